// MSA on the device (kernels/cuda/msa.cuh, core/kvcache/device_kv_cache.h) against a CPU reference built from the
// kernels/cpu primitives (ref::max_dot for block scores, ref::dot_rows_f32 + softmax +
// ref::accumulate_rows_f32 for attention), on fresh random caches of odd lengths, unaligned
// call starts, GQA groups, both head dims and block sizes, prefill and split-K decode, with blocks
// moved through the pinned host tier; the hybrid index (mean keys, estimates, shortlist, exact
// re-ranking) against host references. Skips without a device.
#include <QTest>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>

#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"
#include "tests/common/test_support.h"
#include "tests/gpu/gpu_test_util.h"

#if SIGHTLINE_HAVE_CUDA
#include "kernels/cuda/msa.cuh"
#include "kernels/cuda/ops.cuh"
#include "core/kvcache/device_kv_cache.h"
#endif

class TstCudaMsa : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void shapeArithmeticAndRefusals();  // no device needed
    void pagedCacheRoundTrip();
    void prefillMatchesReference();
    void decodeSplitKMatchesReference();
    void denseSelectionIsEveryVisibleBlock();
    void hybridSelection();
    void windowAndGrowth();
    void tokenMassMatchesReference();
    void remappedPositions();
};

#if SIGHTLINE_HAVE_CUDA
using sl::test::DevBuf;
namespace kc = sl::kernels;

namespace {

int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(sl::test::rng()); }

std::vector<float> bf16_round(std::vector<float> v) {
    for (float& x : v) x = kc::bf16_to_f32(kc::f32_to_bf16(x));
    return v;
}

// A random cache: K, V (n_kv, n_kv_head, D) rounded to bf16, in a DeviceKvCache filled in random
// chunks, with a few blocks offloaded to the host tier and fetched back (so physical placement is
// shuffled and the host round trip is on the path of every comparison).
struct Fixture {
    sl::cuda::MsaShape s;
    std::vector<float> k, v, q;  // k, v rounded; q (n_q, n_head, D) f32
    std::unique_ptr<sl::DeviceKvCache> cache;
};

bool make_fixture(Fixture& f, int64_t pos0, int n_q, int n_kv_head, int G, int D, int B, std::string* error) {
    f.s.pos0 = pos0;
    f.s.n_q = n_q;
    f.s.n_kv_head = n_kv_head;
    f.s.n_head = n_kv_head * G;
    f.s.head_dim = D;
    f.s.block_size = B;
    const int64_t n_kv = f.s.n_kv(), row = static_cast<int64_t>(n_kv_head) * D;
    f.k = bf16_round(sl::test::random_floats(static_cast<size_t>(n_kv * row)));
    f.v = bf16_round(sl::test::random_floats(static_cast<size_t>(n_kv * row)));
    f.q = sl::test::random_floats(static_cast<size_t>(n_q) * f.s.n_head * D);
    sl::DeviceKvCache::Config c;
    c.n_kv_head = n_kv_head;
    c.head_dim = D;
    c.block_size = B;
    c.max_blocks = f.s.n_kv_blocks() + 1;
    c.device_blocks = f.s.n_kv_blocks() + 2;
    c.host_blocks = 3;
    f.cache = sl::DeviceKvCache::create(c, error);
    if (!f.cache) return false;
    DevBuf<float> dk(f.k), dv(f.v);
    if (!dk.ok() || !dv.ok()) {
        *error = "cudaMalloc failed";
        return false;
    }
    for (int64_t p = 0; p < n_kv;) {
        const int64_t n = std::min<int64_t>(n_kv - p, uniform(1, 3 * B));
        if (!f.cache->append(0, p, n, dk.get() + p * row, dv.get() + p * row, nullptr, error)) return false;
        p += n;
    }
    const int64_t nb = f.s.n_kv_blocks();
    for (int i = 0; i < 3 && nb > 1; ++i) {
        const int64_t b = uniform(0, static_cast<int>(nb - 1));
        if (!f.cache->offload(0, b, nullptr, error)) return false;
        if (f.cache->resident(0, b) || !f.cache->on_host(0, b)) {
            *error = "offload left the block resident";
            return false;
        }
    }
    for (int64_t b = 0; b < nb; ++b)
        if (!f.cache->fetch(0, b, nullptr, error)) return false;
    return cudaDeviceSynchronize() == cudaSuccess;
}

// Index queries: group means of q, rounded to bf16 as the kernel stages them.
std::vector<float> group_mean(const Fixture& f) {
    const auto& s = f.s;
    const int G = s.n_head / s.n_kv_head, D = s.head_dim;
    std::vector<float> iq(static_cast<size_t>(s.n_q) * s.n_kv_head * D);
    for (int t = 0; t < s.n_q; ++t)
        for (int g = 0; g < s.n_kv_head; ++g)
            for (int i = 0; i < D; ++i) {
                float acc = 0;
                for (int h = 0; h < G; ++h) acc += f.q[(static_cast<size_t>(t) * s.n_head + g * G + h) * D + i];
                iq[(static_cast<size_t>(t) * s.n_kv_head + g) * D + i] = acc / static_cast<float>(G);
            }
    return iq;
}

// K rows of head g for positions [p, p + n), gathered (n, D).
std::vector<float> head_rows(const std::vector<float>& kv, const sl::cuda::MsaShape& s, int g, int64_t p, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n * s.head_dim));
    for (int64_t j = 0; j < n; ++j)
        std::copy_n(kv.data() + ((p + j) * s.n_kv_head + g) * s.head_dim, s.head_dim, out.data() + j * s.head_dim);
    return out;
}

// Reference block scores (n_tasks, n_kv_blocks), as msa.cuh defines them.
std::vector<float> reference_scores(const Fixture& f, const std::vector<float>& iq_rounded, bool sink) {
    const auto& s = f.s;
    const int64_t nb = s.n_kv_blocks(), B = s.block_size;
    std::vector<float> out(static_cast<size_t>(s.n_tasks() * nb));
    for (int64_t task = 0; task < s.n_tasks(); ++task) {
        const int g = static_cast<int>(task % s.n_kv_head);
        const int64_t qb = s.first_qblock() + task / s.n_kv_head;
        const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
        for (int64_t b = 0; b < nb; ++b) {
            float& o = out[static_cast<size_t>(task * nb + b)];
            if (b == qb) o = INFINITY;
            else if (sink && b == 0 && qb != 0) o = FLT_MAX;
            else if (b > qb) o = -INFINITY;
            else {
                const auto keys = head_rows(f.k, s, g, b * B, B);
                float best = -INFINITY;
                for (int64_t t = t0; t < t1; ++t)
                    best = std::max(best, kc::ref::max_dot(iq_rounded.data() + (t * s.n_kv_head + g) * s.head_dim,
                                                           keys.data(), s.head_dim, B, s.head_dim));
                o = best;
            }
        }
    }
    return out;
}

// Reference sparse attention over the selected blocks: out (n_q, n_head, D).
std::vector<float> reference_attention(const Fixture& f, const std::vector<int32_t>& sel, int top_k, float scale) {
    const auto& s = f.s;
    const int G = s.n_head / s.n_kv_head, D = s.head_dim;
    const int64_t B = s.block_size;
    std::vector<float> out(f.q.size());
    for (int64_t task = 0; task < s.n_tasks(); ++task) {
        const int g = static_cast<int>(task % s.n_kv_head);
        const int64_t qb = s.first_qblock() + task / s.n_kv_head;
        const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t qpos = s.pos0 + t;
            for (int h = g * G; h < (g + 1) * G; ++h) {
                const float* qr = f.q.data() + (t * s.n_head + h) * D;
                std::vector<float> scores, keys_v;
                for (int j = 0; j < top_k; ++j) {
                    const int32_t b = sel[static_cast<size_t>(task * top_k + j)];
                    if (b < 0) break;
                    const int64_t n = std::min<int64_t>(B, qpos - b * B + 1);  // causal
                    if (n <= 0) continue;
                    const auto kr = head_rows(f.k, s, g, b * B, n), vr = head_rows(f.v, s, g, b * B, n);
                    std::vector<float> sc(static_cast<size_t>(n));
                    kc::ref::dot_rows_f32(sc.data(), qr, kr.data(), D, n, D, scale);
                    scores.insert(scores.end(), sc.begin(), sc.end());
                    keys_v.insert(keys_v.end(), vr.begin(), vr.end());
                }
                kc::softmax(scores.data(), static_cast<int64_t>(scores.size()));
                float* o = out.data() + (t * s.n_head + h) * D;
                std::fill_n(o, D, 0.0f);
                kc::ref::accumulate_rows_f32(o, scores.data(), keys_v.data(), D, static_cast<int64_t>(scores.size()), D);
            }
        }
    }
    return out;
}

// Runs the whole device pipeline for `f` and compares every stage with the reference.
void check_pipeline(Fixture& f, int top_k, bool sink, int n_splits) {
    const auto& s = f.s;
    const int64_t nb = s.n_kv_blocks();
    DevBuf<float> dq(f.q), diq(static_cast<size_t>(s.n_q) * s.n_kv_head * s.head_dim);
    DevBuf<float> dscores(static_cast<size_t>(s.n_tasks() * nb));
    DevBuf<int32_t> dsel(static_cast<size_t>(s.n_tasks() * top_k));
    DevBuf<float> dout(f.q.size());
    DevBuf<float> dws(static_cast<size_t>(std::max<int64_t>(1, sl::cuda::msa_workspace_floats(s, n_splits))));
    QVERIFY(dq.ok() && diq.ok() && dscores.ok() && dsel.ok() && dout.ok() && dws.ok());

    // Index queries.
    CUDA_OK(sl::cuda::msa_group_mean(dq.get(), s, diq.get(), nullptr));
    const auto iq = group_mean(f);
    const auto iq_dev = diq.download();
    QVERIFY2(sl::test::normalized_error(iq_dev.data(), iq.data(), iq.size()) < 1e-6, "group mean");

    // Block scores: forced / invisible entries exactly, scored ones by normalized error.
    CUDA_OK(sl::cuda::msa_index_scores(s, diq.get(), static_cast<int64_t>(s.n_kv_head) * s.head_dim,
                                       f.cache->k_view(0), sink, dscores.get(), nullptr));
    const auto got = dscores.download();
    const auto want = reference_scores(f, bf16_round(iq_dev), sink);
    std::vector<float> got_f, want_f;
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isfinite(want[i]) && want[i] != FLT_MAX) {
            got_f.push_back(got[i]);
            want_f.push_back(want[i]);
        } else {
            QCOMPARE(got[i], want[i]);
        }
    }
    if (!want_f.empty())
        QVERIFY2(sl::test::normalized_error(got_f.data(), want_f.data(), want_f.size()) < 1e-5, "block scores");

    // Selection: exactly the top-k of the device's scores (ranked on the host), ascending ids.
    CUDA_OK(sl::cuda::msa_select(dscores.get(), s, top_k, dsel.get(), nullptr));
    const auto sel = dsel.download();
    for (int64_t task = 0; task < s.n_tasks(); ++task) {
        std::vector<int32_t> ids;
        for (int32_t b = 0; b < nb; ++b)
            if (got[static_cast<size_t>(task * nb + b)] != -INFINITY) ids.push_back(b);
        std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
            return got[static_cast<size_t>(task * nb + a)] > got[static_cast<size_t>(task * nb + b)];
        });
        if (static_cast<int>(ids.size()) > top_k) ids.resize(static_cast<size_t>(top_k));
        std::sort(ids.begin(), ids.end());
        ids.resize(static_cast<size_t>(top_k), -1);
        const std::vector<int32_t> row(sel.begin() + task * top_k, sel.begin() + (task + 1) * top_k);
        QCOMPARE(row, ids);
        const int64_t qb = s.first_qblock() + task / s.n_kv_head;
        QVERIFY(std::find(row.begin(), row.end(), static_cast<int32_t>(qb)) != row.end());  // local forced
        if (sink && top_k >= 2) QCOMPARE(row[0], 0);
    }

    // Sparse attention over that selection.
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    CUDA_OK(sl::cuda::msa_sparse_attention(s, dq.get(), dout.get(), scale, dsel.get(), top_k, f.cache->k_view(0),
                                           f.cache->v_view(0), n_splits, dws.get(),
                                           static_cast<int64_t>(dws.size()), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto out = dout.download();
    const auto ref = reference_attention(f, sel, top_k, scale);
    const double err = sl::test::normalized_error(out.data(), ref.data(), ref.size());
    qInfo("MSA n_q %d pos0 %lld heads %d/%d D %d B %d top_k %d splits %d: attention error %.2e", s.n_q,
          static_cast<long long>(s.pos0), s.n_head, s.n_kv_head, s.head_dim, s.block_size, top_k, n_splits, err);
    // bf16 q and P (K, V are bf16 on both sides): ~3e-3 expected; layout bugs give O(1).
    QVERIFY2(err < 1e-2, "sparse attention");
}

// The hybrid index on `f` against host references: the cache's mean keys within bf16 rounding,
// the estimates by normalized error (forced entries exactly), the shortlist = the n_cand best
// estimates and the selection = the top_k best exact block scores of the shortlist (both up to
// near-ties), and with a shortlist of every block exactly msa_select over msa_index_scores.
void check_hybrid(Fixture& f, int n_cand, int top_k, bool sink) {
    const auto& s = f.s;
    const int64_t nb = s.n_kv_blocks(), B = s.block_size, T = s.n_tasks();
    const int D = s.head_dim, H = s.n_kv_head;
    const int64_t stride = static_cast<int64_t>(H) * D;
    DevBuf<float> dq(f.q), diq(static_cast<size_t>(s.n_q) * H * D), dest(static_cast<size_t>(T * nb));
    QVERIFY(dq.ok() && diq.ok() && dest.ok());
    CUDA_OK(sl::cuda::msa_group_mean(dq.get(), s, diq.get(), nullptr));
    const auto iq = bf16_round(diq.download());

    // Mean keys as the cache keeps them (filled in random chunks, blocks moved through the host).
    std::vector<uint16_t> km(static_cast<size_t>(nb * H * D));
    CUDA_OK(cudaMemcpy(km.data(), f.cache->key_means(0), km.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> kmf(km.size());
    for (int64_t b = 0; b < nb; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < D; ++i) {
                const int64_t t1 = std::min((b + 1) * B, s.n_kv());
                double acc = 0;
                for (int64_t t = b * B; t < t1; ++t) acc += f.k[static_cast<size_t>((t * H + h) * D + i)];
                const double want = acc / static_cast<double>(t1 - b * B);
                const size_t e = static_cast<size_t>((b * H + h) * D + i);
                kmf[e] = kc::bf16_to_f32(km[e]);
                if (std::abs(kmf[e] - want) > 4e-3 * std::abs(want) + 1e-6)
                    QFAIL(qPrintable(QStringLiteral("mean key of block %1 head %2 dim %3: %4, want %5")
                                         .arg(b).arg(h).arg(i).arg(kmf[e]).arg(want)));
            }

    // Estimates.
    CUDA_OK(sl::cuda::msa_mean_scores(s, diq.get(), stride, f.cache->key_means(0), sink, dest.get(), nullptr));
    const auto est = dest.download();
    std::vector<double> est_ref(est.size());
    std::vector<float> got_f, want_f;
    for (int64_t task = 0; task < T; ++task) {
        const int g = static_cast<int>(task % H);
        const int64_t qb = s.first_qblock() + task / H;
        const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
        for (int64_t b = 0; b < nb; ++b) {
            const size_t e = static_cast<size_t>(task * nb + b);
            double want;
            if (b == qb) want = INFINITY;
            else if (sink && b == 0 && qb != 0) want = FLT_MAX;
            else if (b > qb) want = -INFINITY;
            else {
                want = -INFINITY;
                for (int64_t t = t0; t < t1; ++t) {
                    double d = 0;
                    for (int i = 0; i < D; ++i)
                        d += static_cast<double>(iq[static_cast<size_t>((t * H + g) * D + i)]) *
                             kmf[static_cast<size_t>((b * H + g) * D + i)];
                    want = std::max(want, d);
                }
                got_f.push_back(est[e]);
                want_f.push_back(static_cast<float>(want));
            }
            est_ref[e] = want;
            if (!std::isfinite(want) || want == FLT_MAX) QCOMPARE(static_cast<double>(est[e]), want);
        }
    }
    if (!want_f.empty())
        QVERIFY2(sl::test::normalized_error(got_f.data(), want_f.data(), want_f.size()) < 1e-5, "estimates");

    // The hybrid selection and its shortlist.
    const int64_t ws_bytes = sl::cuda::msa_hybrid_workspace_bytes(s, n_cand, top_k);
    DevBuf<char> dws(static_cast<size_t>(ws_bytes));
    DevBuf<int32_t> dsel(static_cast<size_t>(T * top_k));
    QVERIFY(dws.ok() && dsel.ok());
    CUDA_OK(sl::cuda::msa_hybrid_select(s, diq.get(), stride, f.cache->k_view(0), f.cache->key_means(0), sink, n_cand,
                                        top_k, dsel.get(), dws.get(), ws_bytes, nullptr));
    const auto sel = dsel.download();
    std::vector<int32_t> cand(static_cast<size_t>(T * n_cand));
    CUDA_OK(cudaMemcpy(cand.data(), dws.get(), cand.size() * 4, cudaMemcpyDeviceToHost));
    const auto exact = reference_scores(f, iq, sink);
    double scale_est = 0, scale_exact = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
        if (std::isfinite(exact[i]) && exact[i] != FLT_MAX)
            scale_exact = std::max(scale_exact, std::abs(static_cast<double>(exact[i])));
        if (std::isfinite(est_ref[i]) && est_ref[i] != FLT_MAX) scale_est = std::max(scale_est, std::abs(est_ref[i]));
    }
    const double tol_est = 1e-4 * scale_est, tol_exact = 1e-4 * scale_exact;
    int64_t shortlisted_blocks = 0;
    for (int64_t task = 0; task < T; ++task) {
        const int64_t qb = s.first_qblock() + task / H;
        auto forced = [&](int64_t b) { return b == qb || (sink && b == 0); };
        const std::vector<int32_t> c(cand.begin() + task * n_cand, cand.begin() + (task + 1) * n_cand);
        const std::vector<int32_t> r(sel.begin() + task * top_k, sel.begin() + (task + 1) * top_k);
        const int n_valid_c = static_cast<int>(std::count_if(c.begin(), c.end(), [](int32_t b) { return b >= 0; }));
        QCOMPARE(n_valid_c, static_cast<int>(std::min<int64_t>(n_cand, qb + 1)));
        QVERIFY(std::is_sorted(c.begin(), c.begin() + n_valid_c));
        QVERIFY(std::find(c.begin(), c.end(), static_cast<int32_t>(qb)) != c.end());
        if (sink && qb > 0 && n_cand >= 2) QCOMPARE(c[0], 0);
        shortlisted_blocks += n_valid_c;
        double min_in = INFINITY, max_out = -INFINITY;
        for (int64_t b = 0; b <= qb; ++b) {
            if (forced(b)) continue;
            const double v = est_ref[static_cast<size_t>(task * nb + b)];
            if (std::find(c.begin(), c.end(), static_cast<int32_t>(b)) != c.end()) min_in = std::min(min_in, v);
            else max_out = std::max(max_out, v);
        }
        if (!(max_out <= min_in + tol_est))
            QFAIL(qPrintable(QStringLiteral("task %1: a block left off the shortlist estimates %2 > %3")
                                 .arg(task).arg(max_out).arg(min_in)));
        const int n_valid_r = static_cast<int>(std::count_if(r.begin(), r.end(), [](int32_t b) { return b >= 0; }));
        QCOMPARE(n_valid_r, std::min(top_k, n_valid_c));
        QVERIFY(std::is_sorted(r.begin(), r.begin() + n_valid_r));
        QVERIFY(std::find(r.begin(), r.end(), static_cast<int32_t>(qb)) != r.end());
        double min_sel = INFINITY, max_unsel = -INFINITY;
        for (int j = 0; j < n_valid_c; ++j) {
            const int32_t b = c[static_cast<size_t>(j)];
            if (forced(b)) continue;
            const double v = exact[static_cast<size_t>(task * nb + b)];
            if (std::find(r.begin(), r.end(), b) != r.end()) min_sel = std::min(min_sel, v);
            else max_unsel = std::max(max_unsel, v);
        }
        for (int j = 0; j < n_valid_r; ++j)
            QVERIFY(std::find(c.begin(), c.end(), r[static_cast<size_t>(j)]) != c.end());
        if (!(max_unsel <= min_sel + tol_exact))
            QFAIL(qPrintable(QStringLiteral("task %1: a shortlisted block left out scores %2 > %3")
                                 .arg(task).arg(max_unsel).arg(min_sel)));
    }
    qInfo("hybrid n_q %d pos0 %lld blocks %lld D %d B %d shortlist %d top_k %d sink %d: %.1f blocks shortlisted per task",
          s.n_q, static_cast<long long>(s.pos0), static_cast<long long>(nb), D, s.block_size, n_cand, top_k,
          sink ? 1 : 0, static_cast<double>(shortlisted_blocks) / static_cast<double>(T));

    // A shortlist of every block: the exact path's selection, id for id.
    if (nb >= top_k && nb <= 64) {  // a shortlist of every block (up to 64 here: the cases' sizes)
        const int all = static_cast<int>(nb);
        const int64_t ws_all = sl::cuda::msa_hybrid_workspace_bytes(s, all, top_k);
        DevBuf<char> dws_all(static_cast<size_t>(ws_all));
        DevBuf<float> dscores(static_cast<size_t>(T * nb));
        DevBuf<int32_t> dsel_exact(static_cast<size_t>(T * top_k));
        QVERIFY(dws_all.ok() && dscores.ok() && dsel_exact.ok());
        CUDA_OK(sl::cuda::msa_hybrid_select(s, diq.get(), stride, f.cache->k_view(0), f.cache->key_means(0), sink, all,
                                            top_k, dsel.get(), dws_all.get(), ws_all, nullptr));
        CUDA_OK(sl::cuda::msa_index_scores(s, diq.get(), stride, f.cache->k_view(0), sink, dscores.get(), nullptr));
        CUDA_OK(sl::cuda::msa_select(dscores.get(), s, top_k, dsel_exact.get(), nullptr));
        QCOMPARE(dsel.download(), dsel_exact.download());
    }
}

// The window and the mass growth (msa_extend_selection) on `f` after the hybrid top-k, against a
// host reference from the same inputs (f32 index queries, the cache's bf16 mean keys): the top-k
// leaves the window out and keeps the sink only below it; the extended row holds the top-k, the
// window and the greedy growth of the reference estimate — the growth's blocks estimate at least
// as much as every block left out (up to rounding), and as many as the reference takes (one more
// or less where the running total meets the target within rounding) — ascending, -1-padded.
void check_extend(Fixture& f, int top_k, const sl::cuda::MsaForce& force, const sl::cuda::MsaGrowth& grow) {
    const auto& s = f.s;
    const int64_t nb = s.n_kv_blocks(), B = s.block_size, T = s.n_tasks();
    const int D = s.head_dim, H = s.n_kv_head;
    const int64_t stride = static_cast<int64_t>(H) * D;
    const int n_cand = std::min(sl::cuda::kMaxTopK, 2 + 4 * top_k);
    const int out_k = top_k + force.window + grow.room;
    DevBuf<float> dq(f.q), diq(static_cast<size_t>(s.n_q) * stride);
    const int64_t hws = sl::cuda::msa_hybrid_workspace_bytes(s, n_cand, top_k);
    const int64_t xws = sl::cuda::msa_extend_workspace_bytes(s, grow.room);
    DevBuf<char> dhws(static_cast<size_t>(hws)), dxws(static_cast<size_t>(xws));
    DevBuf<int32_t> dtop(static_cast<size_t>(T * top_k)), dout(static_cast<size_t>(T * out_k));
    QVERIFY(dq.ok() && diq.ok() && dhws.ok() && dxws.ok() && dtop.ok() && dout.ok());
    CUDA_OK(sl::cuda::msa_group_mean(dq.get(), s, diq.get(), nullptr));
    CUDA_OK(sl::cuda::msa_hybrid_select(s, diq.get(), stride, f.cache->k_view(0), f.cache->key_means(0), force, n_cand,
                                        top_k, dtop.get(), dhws.get(), hws, nullptr));
    CUDA_OK(sl::cuda::msa_extend_selection(s, diq.get(), stride, f.cache->key_means(0), dtop.get(), top_k, force.window,
                                           grow, dout.get(), out_k, dxws.get(), xws, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const auto iq = diq.download();
    const auto top = dtop.download();
    const auto out = dout.download();
    std::vector<uint16_t> km(static_cast<size_t>(nb * H * D));
    CUDA_OK(cudaMemcpy(km.data(), f.cache->key_means(0), km.size() * 2, cudaMemcpyDeviceToHost));
    int grown = 0, capped = 0;
    for (int64_t task = 0; task < T; ++task) {
        const int g = static_cast<int>(task % H);
        const int64_t qb = s.first_qblock() + task / H;
        const int64_t w0 = force.window_begin(qb);
        const std::vector<int32_t> t(top.begin() + task * top_k, top.begin() + (task + 1) * top_k);
        const std::vector<int32_t> o(out.begin() + task * out_k, out.begin() + (task + 1) * out_k);
        std::vector<int32_t> base;  // the top-k and the window
        for (int32_t b : t) {
            if (b < 0) continue;
            QVERIFY2(b < w0 || b == qb, "the top-k holds a window block");
            base.push_back(b);
        }
        QVERIFY(std::find(base.begin(), base.end(), static_cast<int32_t>(qb)) != base.end());
        if (force.sink_forced(qb) && top_k >= 2) QVERIFY(std::find(base.begin(), base.end(), 0) != base.end());
        for (int64_t b = w0; b < qb; ++b) base.push_back(static_cast<int32_t>(b));
        std::sort(base.begin(), base.end());
        const int n_valid = static_cast<int>(std::count_if(o.begin(), o.end(), [](int32_t b) { return b >= 0; }));
        QVERIFY(std::all_of(o.begin() + n_valid, o.end(), [](int32_t b) { return b < 0; }));
        const std::vector<int32_t> got(o.begin(), o.begin() + n_valid);
        QVERIFY(std::is_sorted(got.begin(), got.end()));
        QVERIFY(std::adjacent_find(got.begin(), got.end()) == got.end());
        QVERIFY(std::includes(got.begin(), got.end(), base.begin(), base.end()));
        if (grow.mass <= 0) {
            QCOMPARE(got, base);
            continue;
        }
        // The reference estimate of every visible block.
        const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
        const int nq = static_cast<int>(t1 - t0), R = sl::msa_rules::mass_samples(nq);
        std::vector<double> imp(static_cast<size_t>(qb + 1), 0.0), e(imp.size());
        for (int i = 0; i < R; ++i) {
            const int64_t row = t0 + sl::msa_rules::mass_sample_query(i, nq, R);
            double mx = -1e300, z = 0;
            for (int64_t b = 0; b <= qb; ++b) {
                double d = 0;
                for (int x = 0; x < D; ++x)
                    d += double(iq[static_cast<size_t>((row * H + g) * D + x)]) *
                         kc::bf16_to_f32(km[static_cast<size_t>((b * H + g) * D + x)]);
                const int64_t n_b = std::min<int64_t>(B, s.n_kv() - b * B);
                e[static_cast<size_t>(b)] = grow.scale * d + std::log(double(n_b));
                mx = std::max(mx, e[static_cast<size_t>(b)]);
            }
            for (auto& x : e) z += x = std::exp(x - mx);
            for (size_t b = 0; b < e.size(); ++b) imp[b] += e[b] / z / R;
        }
        double have = 0;
        for (int32_t b : base) have += imp[static_cast<size_t>(b)];
        std::vector<std::pair<double, int32_t>> rest;
        for (int64_t b = 0; b <= qb; ++b)
            if (!std::binary_search(base.begin(), base.end(), static_cast<int32_t>(b)))
                rest.emplace_back(imp[static_cast<size_t>(b)], static_cast<int32_t>(b));
        std::sort(rest.begin(), rest.end(), [](auto& x, auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });
        const int64_t room = sl::msa_rules::growth_room(grow.room, grow.full_blocks, qb + 1);
        int64_t want = 0;
        bool near_target = std::fabs(have - grow.mass) < 1e-4;
        for (double h = have; want < std::min<int64_t>(room, static_cast<int64_t>(rest.size())) && h < grow.mass; ++want) {
            h += rest[static_cast<size_t>(want)].first;
            near_target = near_target || std::fabs(h - grow.mass) < 1e-4;
        }
        const int64_t added = n_valid - static_cast<int64_t>(base.size());
        if (near_target ? std::abs(added - want) > 1 : added != want)
            QFAIL(qPrintable(QStringLiteral("task %1 (qb %2): the growth added %3 blocks, the reference %4 (room %5)")
                                 .arg(task).arg(qb).arg(added).arg(want).arg(room)));
        QVERIFY(added <= room);
        double min_in = INFINITY, max_out = -INFINITY, top_imp = 0;
        for (const auto& [v, b] : rest) {
            top_imp = std::max(top_imp, v);
            if (std::binary_search(got.begin(), got.end(), b)) min_in = std::min(min_in, v);
            else max_out = std::max(max_out, v);
        }
        if (added > 0 && !(max_out <= min_in + 1e-5 * top_imp + 1e-9))
            QFAIL(qPrintable(QStringLiteral("task %1: a block left out estimates %2 > %3 taken").arg(task).arg(max_out).arg(min_in)));
        grown += added > 0;
        capped += added == room;
    }
    qInfo("window %d growth %.2f room %d full %lld, n_q %d pos0 %lld blocks %lld D %d B %d: %d of %lld tasks grown, %d to the room",
          force.window, grow.mass, grow.room, static_cast<long long>(grow.full_blocks), s.n_q,
          static_cast<long long>(s.pos0), static_cast<long long>(nb), D, s.block_size, grown,
          static_cast<long long>(T), capped);
}


// ---- Position remapping (MsaRemap) ----
// Rotates v (D values) in double by `delta` positions: pairs below rot_dim as kernels::rope pairs
// them (style 0 adjacent, 1 NeoX halves), theta_i = base^(-2i / rot_dim).
void rotate_host(std::vector<double>& v, int64_t delta, int rot_dim, int style, double base) {
    const int half = rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        const double th = static_cast<double>(delta) * std::pow(base, -2.0 * i / rot_dim);
        const int a = style == 0 ? 2 * i : i, b = style == 0 ? 2 * i + 1 : i + half;
        const double x0 = v[static_cast<size_t>(a)], x1 = v[static_cast<size_t>(b)];
        v[static_cast<size_t>(a)] = x0 * std::cos(th) - x1 * std::sin(th);
        v[static_cast<size_t>(b)] = x0 * std::sin(th) + x1 * std::cos(th);
    }
}

std::vector<double> row_of(const float* p, int D) { return std::vector<double>(p, p + D); }

// A bf16 row rotated as the kernels rotate staged keys (dev::rotate2 in f32 without FMA, the
// angles from the device's table `cs`), rounded to bf16 again when `round` (the staged tiles).
std::vector<double> rotate_like_device(const std::vector<double>& k, const float* cs, int rot_dim, int style, bool round) {
    std::vector<double> out = k;
    const int half = rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        const int a = style == 0 ? 2 * i : i, b = style == 0 ? 2 * i + 1 : i + half;
        const volatile float x0 = static_cast<float>(k[static_cast<size_t>(a)]), x1 = static_cast<float>(k[static_cast<size_t>(b)]);
        const volatile float c = cs[2 * i], sn = cs[2 * i + 1];
        const volatile float p0 = x0 * c, p1 = x1 * sn, p2 = x0 * sn, p3 = x1 * c;
        const float y0 = p0 - p1, y1 = p2 + p3;
        out[static_cast<size_t>(a)] = round ? kc::bf16_to_f32(kc::f32_to_bf16(y0)) : y0;
        out[static_cast<size_t>(b)] = round ? kc::bf16_to_f32(kc::f32_to_bf16(y1)) : y1;
    }
    return out;
}

// Largest |got - want| over the largest |want| (entries one by one, not an average).
double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
        scale = std::max(scale, std::abs(double(want[i])));
    }
    return scale > 0 ? worst / scale : worst;
}
double max_of(const std::vector<double>& v) {
    double m = -INFINITY;
    for (double x : v) m = std::max(m, x);
    return m;
}
double dot_d(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// The remap kernels on `f` (window W, rotation rot_dim / style, base 1e4) against double
// references: the block angles; the exact block scores and the mean-key estimates (far rows with
// q^ = R(W - p) q against keys rotated by R(-b*B)); attention over every visible block; and for a
// decode call the token mass. The device rounds rotated keys and the rows to bf16 (~4e-3 relative):
// tolerances of 1e-2 by normalized error, where a wrong rotation or pass mask gives O(1).
void check_remap(Fixture& f, int64_t W, int rot_dim, int style) {
    const auto& s = f.s;
    const int64_t nb = s.n_kv_blocks(), B = s.block_size, T = s.n_tasks();
    const int D = s.head_dim, H = s.n_kv_head, G = s.n_head / s.n_kv_head;
    const double base = 1e4;
    // q^ per query and head, and its group means.
    std::vector<float> q_far(f.q.size()), iq_far(static_cast<size_t>(s.n_q) * H * D, 0.0f);
    for (int t = 0; t < s.n_q; ++t)
        for (int h = 0; h < s.n_head; ++h) {
            auto v = row_of(f.q.data() + (static_cast<size_t>(t) * s.n_head + h) * D, D);
            rotate_host(v, W - (s.pos0 + t), rot_dim, style, base);
            for (int i = 0; i < D; ++i) {
                q_far[(static_cast<size_t>(t) * s.n_head + h) * D + i] = static_cast<float>(v[static_cast<size_t>(i)]);
                iq_far[(static_cast<size_t>(t) * H + h / G) * D + i] += static_cast<float>(v[static_cast<size_t>(i)]) / G;
            }
        }
    DevBuf<float> dq(f.q), dqf(q_far), diqf(iq_far), diq(static_cast<size_t>(s.n_q) * H * D);
    DevBuf<float> drel(static_cast<size_t>(nb) * rot_dim), dscores(static_cast<size_t>(T * nb)), dest(static_cast<size_t>(T * nb));
    const int top_k = static_cast<int>(nb);
    DevBuf<int32_t> dsel(static_cast<size_t>(T * top_k));
    DevBuf<float> dout(f.q.size());
    QVERIFY(dq.ok() && dqf.ok() && diqf.ok() && diq.ok() && drel.ok() && dscores.ok() && dest.ok() && dsel.ok() && dout.ok());
    CUDA_OK(sl::cuda::msa_remap_table(nb, static_cast<int>(B), rot_dim, static_cast<float>(base), 1.0f, nullptr, drel.get(), nullptr));
    const auto rel = drel.download();
    double worst_angle = 0;
    for (int64_t b = 0; b < nb; ++b)
        for (int i = 0; i < rot_dim / 2; ++i) {
            const double th = -static_cast<double>(b * B) * std::pow(base, -2.0 * i / rot_dim);
            worst_angle = std::max({worst_angle, std::abs(rel[static_cast<size_t>((b * rot_dim / 2 + i) * 2)] - std::cos(th)),
                                    std::abs(rel[static_cast<size_t>((b * rot_dim / 2 + i) * 2 + 1)] - std::sin(th))});
        }
    QVERIFY2(worst_angle < 1e-6, qPrintable(QString::number(worst_angle)));
    sl::cuda::MsaRemap rm;
    rm.window = W;
    rm.q_far = dqf.get();
    rm.iq_far = diqf.get();
    rm.rel = drel.get();
    rm.rot_dim = rot_dim;
    rm.style = style;
    CUDA_OK(sl::cuda::msa_group_mean(dq.get(), s, diq.get(), nullptr));
    // The runner's far rows: q rotated by the rope kernel at positions W - p.
    {
        std::vector<int64_t> pos(static_cast<size_t>(s.n_q));
        for (int t = 0; t < s.n_q; ++t) pos[static_cast<size_t>(t)] = W - (s.pos0 + t);
        DevBuf<int64_t> dpos(pos);
        DevBuf<float> dqr(f.q);
        QVERIFY(dpos.ok() && dqr.ok());
        CUDA_OK(sl::cuda::rope(dqr.get(), s.n_q, s.n_head, D, rot_dim, 0, dpos.get(), static_cast<float>(base), 1.0f,
                               style, nullptr));
        const auto qr = dqr.download();
        QVERIFY2(sl::test::normalized_error(qr.data(), q_far.data(), q_far.size()) < 1e-6, "rope at W - p");
    }
    const int64_t stride = static_cast<int64_t>(H) * D;
    CUDA_OK(sl::cuda::msa_index_scores(s, diq.get(), stride, f.cache->k_view(0), false, dscores.get(), nullptr, rm));
    CUDA_OK(sl::cuda::msa_mean_scores(s, diq.get(), stride, f.cache->key_means(0), false, dest.get(), nullptr, rm));
    CUDA_OK(sl::cuda::msa_select_all(s, top_k, dsel.get(), nullptr));
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    CUDA_OK(sl::cuda::msa_sparse_attention(s, dq.get(), dout.get(), scale, dsel.get(), top_k, f.cache->k_view(0),
                                           f.cache->v_view(0), 1, nullptr, 0, nullptr, rm));
    // Decode as the runner runs it: split-K over 4 CTAs per task.
    const int splits = s.n_q == 1 ? 4 : 1;
    DevBuf<float> dws(static_cast<size_t>(std::max<int64_t>(1, sl::cuda::msa_workspace_floats(s, splits))));
    DevBuf<float> dout_split(f.q.size());
    QVERIFY(dws.ok() && dout_split.ok());
    if (splits > 1)
        CUDA_OK(sl::cuda::msa_sparse_attention(s, dq.get(), dout_split.get(), scale, dsel.get(), top_k, f.cache->k_view(0),
                                               f.cache->v_view(0), splits, dws.get(), static_cast<int64_t>(dws.size()),
                                               nullptr, rm));
    CUDA_OK(cudaDeviceSynchronize());
    const auto scores = dscores.download(), est = dest.download(), out = dout.download(), iq = diq.download();
    std::vector<uint16_t> km(static_cast<size_t>(nb * H * D));
    CUDA_OK(cudaMemcpy(km.data(), f.cache->key_means(0), km.size() * 2, cudaMemcpyDeviceToHost));

    // Every key as it is and rotated to its block's start, k^ = R(-b*B) k, once (double).
    std::vector<std::vector<double>> knear(static_cast<size_t>(s.n_kv() * H)), krot(knear.size());
    for (int64_t p = 0; p < s.n_kv(); ++p)
        for (int g = 0; g < H; ++g) {
            const size_t at = static_cast<size_t>(p * H + g);
            knear[at] = krot[at] = row_of(f.k.data() + (p * H + g) * D, D);
            rotate_host(krot[at], -(p / B) * B, rot_dim, style, base);
        }
    auto key = [&](int64_t p, int g, bool far) -> const std::vector<double>& {
        return (far ? krot : knear)[static_cast<size_t>(p * H + g)];
    };
    // The far keys as the token mass reads them: rotated in f32 by the device's table, rounded to
    // bf16 (the sparse branch's staged k^).
    std::vector<std::vector<double>> krot_dev(knear.size());
    for (int64_t p = 0; p < s.n_kv(); ++p)
        for (int g = 0; g < H; ++g)
            krot_dev[static_cast<size_t>(p * H + g)] =
                rotate_like_device(knear[static_cast<size_t>(p * H + g)], rel.data() + (p / B) * rot_dim, rot_dim, style, true);
    // Softmax over positions [0, qpos] of head h's logits for call query t, each key at its
    // remapped or true distance; `device_keys`: far keys as the device rounds them.
    auto probabilities = [&](int64_t t, int h, bool device_keys = false) {
        const int64_t qpos = s.pos0 + t;
        const int g = h / G;
        const auto qn = row_of(f.q.data() + (t * s.n_head + h) * D, D), qfr = row_of(q_far.data() + (t * s.n_head + h) * D, D);
        std::vector<double> sc;
        for (int64_t p = 0; p <= qpos; ++p) {
            const bool far = qpos >= (p / B) * B + B - 1 + W;
            const auto& k = far && device_keys ? krot_dev[static_cast<size_t>(p * H + g)] : key(p, g, far);
            sc.push_back(scale * dot_d(far ? qfr : qn, k));
        }
        const double mx = max_of(sc);
        double z = 0;
        for (double& x : sc) z += x = std::exp(x - mx);
        for (double& x : sc) x /= z;
        return sc;
    };

    // Index: exact block-max and mean-key estimates, against double references and against the
    // device's own rounding (bf16 rows, keys rotated in f32 by the table and rounded to bf16),
    // entry by entry: a far / near choice off by one position moves an entry by O(1).
    const auto iq_b = bf16_round(iq), iqf_b = bf16_round(iq_far);
    std::vector<float> want_s_dev, want_e_dev;
    std::vector<float> got_s, want_s, got_e, want_e;
    int64_t far_pairs = 0, near_pairs = 0;
    for (int64_t task = 0; task < T; ++task) {
        const int g = static_cast<int>(task % H);
        const int64_t qb = s.first_qblock() + task / H;
        const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
        for (int64_t b = 0; b < qb; ++b) {
            std::vector<double> kmr(static_cast<size_t>(D));
            for (int i = 0; i < D; ++i) kmr[static_cast<size_t>(i)] = kc::bf16_to_f32(km[static_cast<size_t>((b * H + g) * D + i)]);
            std::vector<double> kmf = kmr;
            rotate_host(kmf, -b * B, rot_dim, style, base);
            const float* cs = rel.data() + b * rot_dim;
            const auto kmf_dev = rotate_like_device(kmr, cs, rot_dim, style, true);
            std::vector<std::vector<double>> kf_dev(static_cast<size_t>(B));
            double best = -INFINITY, best_e = -INFINITY, best_dev = -INFINITY, best_e_dev = -INFINITY;
            for (int64_t t = t0; t < t1; ++t) {
                const bool far = s.pos0 + t >= b * B + B - 1 + W;
                (far ? far_pairs : near_pairs) += 1;
                const auto qr = row_of((far ? iq_far : iq).data() + (t * H + g) * D, D);
                const auto qr_dev = row_of((far ? iqf_b : iq_b).data() + (t * H + g) * D, D);
                best_e = std::max(best_e, dot_d(qr, far ? kmf : kmr));
                best_e_dev = std::max(best_e_dev, dot_d(qr_dev, far ? kmf_dev : kmr));
                for (int64_t j = 0; j < B; ++j) {
                    best = std::max(best, dot_d(qr, key(b * B + j, g, far)));
                    const auto& kn = knear[static_cast<size_t>((b * B + j) * H + g)];
                    if (far && kf_dev[static_cast<size_t>(j)].empty())
                        kf_dev[static_cast<size_t>(j)] = rotate_like_device(kn, cs, rot_dim, style, true);
                    best_dev = std::max(best_dev, dot_d(qr_dev, far ? kf_dev[static_cast<size_t>(j)] : kn));
                }
            }
            want_s_dev.push_back(static_cast<float>(best_dev));
            want_e_dev.push_back(static_cast<float>(best_e_dev));
            got_s.push_back(scores[static_cast<size_t>(task * nb + b)]);
            want_s.push_back(static_cast<float>(best));
            got_e.push_back(est[static_cast<size_t>(task * nb + b)]);
            want_e.push_back(static_cast<float>(best_e));
        }
    }
    QVERIFY(far_pairs > 0 && near_pairs > 0);
    const double err_s = sl::test::normalized_error(got_s.data(), want_s.data(), want_s.size());
    const double err_e = sl::test::normalized_error(got_e.data(), want_e.data(), want_e.size());
    const double worst_s = worst_relative(got_s, want_s_dev), worst_e = worst_relative(got_e, want_e_dev);

    // Attention over every visible block, each (query, key) at its remapped or true distance.
    std::vector<float> ref(f.q.size());
    for (int64_t t = 0; t < s.n_q; ++t) {
        const int64_t qpos = s.pos0 + t;
        for (int h = 0; h < s.n_head; ++h) {
            const int g = h / G;
            const auto pr = probabilities(t, h);
            for (int i = 0; i < D; ++i) {
                double acc = 0;
                for (int64_t p = 0; p <= qpos; ++p) acc += pr[static_cast<size_t>(p)] * f.v[static_cast<size_t>((p * H + g) * D + i)];
                ref[static_cast<size_t>((t * s.n_head + h) * D + i)] = static_cast<float>(acc);
            }
        }
    }
    const double err_a = sl::test::normalized_error(out.data(), ref.data(), ref.size());
    qInfo("remap W %lld rot %d style %d, n_q %d pos0 %lld D %d B %d (%lld far / %lld near row-block pairs): "
          "block scores %.2e (device rounding: worst %.2e), estimates %.2e (%.2e), attention %.2e",
          static_cast<long long>(W), rot_dim, style, s.n_q, static_cast<long long>(s.pos0), D, s.block_size,
          static_cast<long long>(far_pairs), static_cast<long long>(near_pairs), err_s, worst_s, err_e, worst_e, err_a);
    QVERIFY2(err_s < 1e-2, "block scores");
    QVERIFY2(err_e < 1e-2, "estimates");
    QVERIFY2(worst_s < 1e-5, "block scores, entry by entry with the device's rounding");
    QVERIFY2(worst_e < 1e-5, "estimates, entry by entry with the device's rounding");
    QVERIFY2(err_a < 2e-2, "attention");
    if (splits > 1) {
        const auto out_split = dout_split.download();
        const double err_split = sl::test::normalized_error(out_split.data(), ref.data(), ref.size());
        qInfo("remap decode split-K %d: attention %.2e", splits, err_split);
        QVERIFY2(err_split < 2e-2, "attention, split-K");
    }

    // The growth's estimate with remapping (msa_extend_selection; its workspace begins with the
    // estimates): from a selection of the local block alone, every other visible block's average
    // over the sampled queries of softmax(scale * row · mean key + log n_b), far blocks with the
    // query's far row (f32) against the mean key rotated in f32 by the table.
    {
        std::vector<int32_t> local_only(static_cast<size_t>(T));
        for (int64_t task = 0; task < T; ++task) local_only[static_cast<size_t>(task)] = static_cast<int32_t>(s.first_qblock() + task / H);
        sl::cuda::MsaGrowth gr;
        gr.mass = 0.5f;
        gr.room = 8;
        gr.scale = scale;
        const int out_k = 1 + gr.room;
        const int64_t xws = sl::cuda::msa_extend_workspace_bytes(s, gr.room);
        DevBuf<int32_t> dlocal(local_only), dx(static_cast<size_t>(T * out_k));
        DevBuf<char> dxws(static_cast<size_t>(xws));
        QVERIFY(dlocal.ok() && dx.ok() && dxws.ok());
        CUDA_OK(sl::cuda::msa_extend_selection(s, diq.get(), stride, f.cache->key_means(0), dlocal.get(), 1, 0, gr,
                                               dx.get(), out_k, dxws.get(), xws, nullptr, rm));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> imp(static_cast<size_t>(T * nb));
        CUDA_OK(cudaMemcpy(imp.data(), dxws.get(), imp.size() * 4, cudaMemcpyDeviceToHost));
        std::vector<float> got_g, want_g;
        for (int64_t task = 0; task < T; ++task) {
            const int g = static_cast<int>(task % H);
            const int64_t qb = s.first_qblock() + task / H;
            const int64_t t0 = std::max(qb * B, s.pos0) - s.pos0, t1 = std::min((qb + 1) * B, s.n_kv()) - s.pos0;
            const int nq = static_cast<int>(t1 - t0), R = sl::msa_rules::mass_samples(nq);
            std::vector<double> acc(static_cast<size_t>(qb + 1), 0.0), e(acc.size());
            for (int r = 0; r < R; ++r) {
                const int64_t t = t0 + sl::msa_rules::mass_sample_query(r, nq, R);
                double mx = -INFINITY, z = 0;
                for (int64_t b = 0; b <= qb; ++b) {
                    std::vector<double> k(static_cast<size_t>(D));
                    for (int i = 0; i < D; ++i) k[static_cast<size_t>(i)] = kc::bf16_to_f32(km[static_cast<size_t>((b * H + g) * D + i)]);
                    const bool far = s.pos0 + t >= b * B + B - 1 + W;
                    if (far) k = rotate_like_device(k, rel.data() + b * rot_dim, rot_dim, style, false);
                    const auto qr = row_of((far ? iq_far : iq).data() + (t * H + g) * D, D);
                    const int64_t n_b = std::min<int64_t>(B, s.n_kv() - b * B);
                    e[static_cast<size_t>(b)] = scale * dot_d(qr, k) + std::log(double(n_b));
                    mx = std::max(mx, e[static_cast<size_t>(b)]);
                }
                for (auto& x : e) z += x = std::exp(x - mx);
                for (size_t b = 0; b < e.size(); ++b) acc[b] += e[b] / z / R;
            }
            for (int64_t b = 0; b < qb; ++b) {
                got_g.push_back(imp[static_cast<size_t>(task * nb + b)]);
                want_g.push_back(static_cast<float>(acc[static_cast<size_t>(b)]));
            }
            QCOMPARE(imp[static_cast<size_t>(task * nb + qb)], -INFINITY);  // the local block: taken
        }
        const double err_g = sl::test::normalized_error(got_g.data(), want_g.data(), want_g.size());
        qInfo("remap growth estimate: error %.2e over %zu blocks", err_g, want_g.size());
        QVERIFY2(err_g < 1e-4, "growth estimate");
    }

    if (s.n_q != 1) return;
    // Decode: the token mass over every visible block.
    DevBuf<float> dmass(static_cast<size_t>(H) * top_k * B);
    QVERIFY(dmass.ok());
    CUDA_OK(sl::cuda::msa_token_mass(s, dq.get(), scale, dsel.get(), top_k, f.cache->k_view(0), dmass.get(), nullptr, rm));
    CUDA_OK(cudaDeviceSynchronize());
    const auto mass = dmass.download();
    std::vector<float> want_m(mass.size(), 0.0f);
    const int64_t qpos = s.pos0;
    for (int h = 0; h < s.n_head; ++h) {
        const int g = h / G;
        const auto pr = probabilities(0, h, /*device_keys=*/true);
        for (int64_t p = 0; p <= qpos; ++p)  // entry p / B of the select-all row is block p / B
            want_m[static_cast<size_t>((g * top_k + p / B) * B + p % B)] += static_cast<float>(pr[static_cast<size_t>(p)] / G);
    }
    const double err_m = sl::test::normalized_error(mass.data(), want_m.data(), want_m.size());
    qInfo("remap token mass: error %.2e", err_m);
    // f32 query and scores against the same bf16 keys: ~1e-6; a block at the wrong distance moves
    // its 128 entries by percents.
    QVERIFY2(err_m < 1e-4, "token mass");
}

}  // namespace

// Query-block bookkeeping, and shapes the kernels refuse before touching the device (so this runs
// everywhere, with fake pointers that are never dereferenced).
void TstCudaMsa::shapeArithmeticAndRefusals() {
    sl::cuda::MsaShape s;
    s.pos0 = 300;
    s.n_q = 200;  // positions 300..499: blocks 2, 3 of 128 (4 KV blocks: 0..3)
    s.n_head = 12;
    s.n_kv_head = 4;
    s.head_dim = 128;
    s.block_size = 128;
    QCOMPARE(s.n_kv(), int64_t{500});
    QCOMPARE(s.n_kv_blocks(), int64_t{4});
    QCOMPARE(s.first_qblock(), int64_t{2});
    QCOMPARE(s.n_qblocks(), int64_t{2});
    QCOMPARE(s.n_tasks(), int64_t{8});
    // Split-K partials: splits x tasks x (min(n_q, B) * G rows) x (D + 2).
    QCOMPARE(sl::cuda::msa_workspace_floats(s, 1), int64_t{0});
    QCOMPARE(sl::cuda::msa_workspace_floats(s, 4), int64_t{4} * 8 * (128 * 3) * 130);
    s.pos0 = 256;
    s.n_q = 1;
    QCOMPARE(s.n_qblocks(), int64_t{1});
    QCOMPARE(s.n_kv_blocks(), int64_t{3});

    alignas(16) static uint16_t fake_kv[64];
    alignas(16) static int32_t fake_table[4];
    alignas(16) static float fake_f[64];
    static int32_t fake_sel[64];
    sl::cuda::PagedView v;
    v.base = fake_kv;
    v.table = fake_table;
    v.block_size = 128;
    v.head_dim = 128;
    v.block_stride = 4 * 128 * 128;
    v.head_stride = 128 * 128;
    s.pos0 = 300;
    s.n_q = 200;
    auto refused = [](cudaError_t e) { return e == cudaErrorInvalidValue; };
    sl::cuda::MsaShape bad = s;
    bad.head_dim = 96;
    QVERIFY(refused(sl::cuda::msa_sparse_attention(bad, fake_f, fake_f, 1, fake_sel, 4, v, v, 1, nullptr, 0, nullptr)));
    bad = s;
    bad.block_size = 100;
    QVERIFY(refused(sl::cuda::msa_index_scores(bad, fake_f, 512, v, false, fake_f, nullptr)));
    bad = s;
    bad.n_head = 10;  // not a multiple of n_kv_head
    QVERIFY(refused(sl::cuda::msa_group_mean(fake_f, bad, fake_f, nullptr)));
    QVERIFY(refused(sl::cuda::msa_sparse_attention(s, fake_f, fake_f, 1, fake_sel, 0, v, v, 1, nullptr, 0, nullptr)));
    QVERIFY(refused(sl::cuda::msa_sparse_attention(s, fake_f, fake_f, 1, fake_sel, 4, v, v, 3, nullptr, 0, nullptr)));
    QVERIFY(refused(sl::cuda::msa_select(fake_f, s, sl::cuda::kMaxTopK + 1, fake_sel, nullptr)));  // top_k > 256
    QVERIFY(refused(sl::cuda::msa_select_all(s, 3, fake_sel, nullptr)));               // < n_kv_blocks
    QVERIFY(refused(sl::cuda::msa_index_scores(s, fake_f, 100, v, false, fake_f, nullptr)));  // iq_stride
    sl::cuda::PagedView odd = v;
    odd.base = fake_kv + 1;  // not 16-byte aligned
    QVERIFY(refused(sl::cuda::msa_index_scores(s, fake_f, 512, odd, false, fake_f, nullptr)));
    odd = v;
    odd.head_stride = 100;  // heads overlap within a block
    QVERIFY(refused(sl::cuda::write_paged(odd, 4, fake_f, 0, 1, nullptr)));
    // More heads than a physical block holds (4 of 128 x 128): rows would spill into the next one.
    QVERIFY(refused(sl::cuda::write_paged(v, 5, fake_f, 0, 1, nullptr)));
    QVERIFY(refused(sl::cuda::msa_key_means(v, 5, 0, 2, 500, fake_kv, nullptr)));
    // Hybrid index: workspace arithmetic (4 pieces, each 256-aligned) and refusals.
    QCOMPARE(sl::cuda::msa_hybrid_workspace_bytes(s, 8, 4), int64_t{4 * 256});
    alignas(16) static char fake_ws[4096];
    QVERIFY(refused(sl::cuda::msa_hybrid_select(s, fake_f, 512, v, fake_kv, false, sl::cuda::kMaxTopK + 1, 16, fake_sel,
                                                fake_ws, 4096, nullptr)));  // shortlist > 256
    QVERIFY(refused(sl::cuda::msa_hybrid_select(s, fake_f, 512, v, fake_kv, false, 8, 9, fake_sel, fake_ws, 4096,
                                                nullptr)));  // top_k > shortlist
    QVERIFY(refused(sl::cuda::msa_hybrid_select(s, fake_f, 512, v, fake_kv, false, 8, 4, fake_sel, fake_ws, 1000,
                                                nullptr)));  // workspace too small
    QVERIFY(refused(sl::cuda::msa_mean_scores(s, fake_f, 512, fake_kv + 1, false, fake_f, nullptr)));  // unaligned
    QVERIFY(refused(sl::cuda::msa_mean_scores(s, fake_f, 512, fake_kv, sl::cuda::MsaForce(true, -1), fake_f, nullptr)));
    // The window and the growth: forced-block arithmetic, workspace (4 pieces, each 256-aligned:
    // estimates 8 tasks x 4 blocks, have, growth ids and estimates 8 x 8) and refusals.
    const sl::cuda::MsaForce fw(true, 3);
    QCOMPARE(fw.window_begin(10), int64_t{7});
    QVERIFY(fw.sink_forced(10));
    QCOMPARE(fw.window_begin(2), int64_t{0});  // the window reaches block 0: the sink is a window block
    QVERIFY(!fw.sink_forced(3));
    QVERIFY(!sl::cuda::MsaForce(false, 0).sink_forced(5));
    QVERIFY(sl::cuda::MsaForce(true).sink_forced(1));  // from bool: no window
    QCOMPARE(sl::cuda::msa_extend_workspace_bytes(s, 8), int64_t{4 * 256});
    sl::cuda::MsaGrowth gr;
    gr.mass = 0.9f;
    gr.room = 8;
    static int32_t fake_out[64];
    QVERIFY(refused(sl::cuda::msa_extend_selection(s, fake_f, 512, fake_kv, fake_sel, 4, 2, gr, fake_out, 13, fake_ws,
                                                   4096, nullptr)));  // out_k < 4 + 2 + 8
    QVERIFY(refused(sl::cuda::msa_extend_selection(s, fake_f, 512, fake_kv, fake_sel, 4, 2, gr, fake_sel, 14, fake_ws,
                                                   4096, nullptr)));  // out aliases sel
    QVERIFY(refused(sl::cuda::msa_extend_selection(s, fake_f, 512, fake_kv, fake_sel, 4, 2, gr, fake_out, 14, fake_ws,
                                                   1000, nullptr)));  // workspace too small
    QVERIFY(refused(sl::cuda::msa_extend_selection(s, fake_f, 512, fake_kv, fake_sel, 4, -1, gr, fake_out, 14, fake_ws,
                                                   4096, nullptr)));  // negative window
    gr.room = sl::cuda::kMaxTopK + 1;
    QVERIFY(refused(sl::cuda::msa_extend_selection(s, fake_f, 512, fake_kv, fake_sel, 4, 2, gr, fake_out, 1000, fake_ws,
                                                   1 << 20, nullptr)));  // room > 256
    QVERIFY(refused(sl::cuda::msa_key_means(v, 4, 0, 5, 500, fake_kv, nullptr)));  // block 4 is past 500 tokens
    // Token mass: calls of one query only.
    sl::cuda::MsaShape one = s;
    one.pos0 = 1000;
    one.n_q = 1;
    QVERIFY(refused(sl::cuda::msa_token_mass(s, fake_f, 1, fake_sel, 4, v, fake_f, nullptr)));     // n_q 200
    QVERIFY(refused(sl::cuda::msa_token_mass(one, fake_f, 1, fake_sel, 0, v, fake_f, nullptr)));
    sl::cuda::PagedView no_table = v;
    no_table.table = nullptr;
    QVERIFY(refused(sl::cuda::msa_token_mass(one, fake_f, 1, fake_sel, 4, no_table, fake_f, nullptr)));
    sl::cuda::PagedView unaligned = v;
    unaligned.block_stride = 4 * 128 * 128 + 1;  // bf16 pairs read 4 bytes at a time
    QVERIFY(refused(sl::cuda::msa_token_mass(one, fake_f, 1, fake_sel, 4, unaligned, fake_f, nullptr)));
    sl::cuda::MsaShape headless = one;
    headless.n_head = 0;
    QVERIFY(refused(sl::cuda::msa_token_mass(headless, fake_f, 1, fake_sel, 4, v, fake_f, nullptr)));
    // Position remapping: refused without its rows or angles, or with an odd rotation.
    sl::cuda::MsaRemap rm;
    rm.window = 512;
    rm.rot_dim = 128;
    QVERIFY(refused(sl::cuda::msa_token_mass(one, fake_f, 1, fake_sel, 4, v, fake_f, nullptr, rm)));  // no q_far, rel
    rm.q_far = fake_f;
    rm.iq_far = fake_f;
    QVERIFY(refused(sl::cuda::msa_token_mass(one, fake_f, 1, fake_sel, 4, v, fake_f, nullptr, rm)));  // no rel
    rm.rel = fake_f;
    sl::cuda::PagedView narrow = v;  // index keys of 64 dims under a rotation of the shape's 128
    narrow.head_dim = 64;
    QVERIFY(refused(sl::cuda::msa_index_scores(s, fake_f, 512, narrow, false, fake_f, nullptr, rm)));
    rm.rot_dim = 63;
    QVERIFY(refused(sl::cuda::msa_sparse_attention(s, fake_f, fake_f, 1, fake_sel, 4, v, v, 1, nullptr, 0, nullptr, rm)));
    rm.rot_dim = 130;  // past head_dim
    QVERIFY(refused(sl::cuda::msa_index_scores(s, fake_f, 512, v, false, fake_f, nullptr, rm)));
    rm.rot_dim = 128;
    rm.iq_far = nullptr;
    QVERIFY(refused(sl::cuda::msa_mean_scores(s, fake_f, 512, fake_kv, false, fake_f, nullptr, rm)));
    QVERIFY(refused(sl::cuda::msa_remap_table(4, 128, 63, 1e4f, 1.0f, nullptr, fake_f, nullptr)));
    QVERIFY(refused(sl::cuda::msa_remap_table(4, 128, 64, 0.0f, 1.0f, nullptr, fake_f, nullptr)));
    QVERIFY(rm.far(1000, 3, 128) == (1000 >= 3 * 128 + 127 + 512));
    QVERIFY(rm.far(1023, 3, 128) && !rm.far(1022, 3, 128));
    QVERIFY(!sl::cuda::MsaRemap().far(1 << 30, 0, 128));  // off
    sl::DeviceKvCache::Config c;  // no heads: refused without allocating
    std::string error;
    QVERIFY(!sl::DeviceKvCache::create(c, &error));
    QVERIFY(error.find("bad configuration") != std::string::npos);
}

void TstCudaMsa::hybridSelection() {
    REQUIRE_CUDA_DEVICE();
    struct Case {
        int blocks_lo, blocks_hi, n_q_lo, n_q_hi, kv_heads, G, D, B, n_cand, top_k;
    };
    // Long enough that the shortlist leaves blocks out; prefill and decode; both dims and block
    // sizes; and short contexts whose shortlist holds every block (checked against the exact path).
    const Case cases[] = {{90, 110, 100, 300, 2, 3, 64, 64, 24, 8}, {70, 90, 60, 200, 2, 2, 128, 128, 40, 16},
                          {70, 90, 1, 1, 4, 4, 128, 128, 40, 16},   {150, 170, 1, 1, 3, 3, 64, 64, 64, 16},
                          {12, 30, 30, 150, 2, 3, 64, 64, 64, 8},   {12, 30, 1, 1, 2, 2, 128, 128, 64, 6},
                          // mixed head dim and block size (added after the last device run)
                          {40, 60, 50, 150, 2, 3, 64, 128, 32, 8},  {80, 100, 1, 1, 2, 2, 128, 64, 24, 8},
                          // an 8B's 8 KV heads over ~15 query blocks and 600 context blocks: on a
                          // 132-SM device the index kernel scores 8 candidates per CTA and the
                          // estimates take 2 tiles per CTA (their loops; every case above has one)
                          {600, 620, 850, 950, 8, 1, 64, 64, 64, 8}};
    for (const Case& c : cases)
        for (const bool sink : {false, true}) {
            Fixture f;
            std::string error;
            const int64_t pos0 = static_cast<int64_t>(uniform(c.blocks_lo, c.blocks_hi)) * c.B - uniform(0, c.B - 1);
            QVERIFY2(make_fixture(f, pos0, uniform(c.n_q_lo, c.n_q_hi), c.kv_heads, c.G, c.D, c.B, &error),
                     error.c_str());
            check_hybrid(f, c.n_cand, c.top_k, sink);
            if (QTest::currentTestFailed()) return;
        }
}

void TstCudaMsa::windowAndGrowth() {
    REQUIRE_CUDA_DEVICE();
    struct Case {
        int blocks_lo, blocks_hi, n_q_lo, n_q_hi, kv_heads, G, D, B, top_k, window;
        float mass;
        int grow;          // room = top_k * (grow - 1)
        int full_blocks;   // 0: the whole room
    };
    // Prefill (several query blocks) and decode; the product's mode at top-k 16 (w16 / p98x8 /
    // c32k, scaled down so the room shrinks within the context) and a wide one at top-k 32 (a
    // 224-block room: the topk_rows of 256); and a prefill from position 0 (blocks_hi 0), whose
    // early query blocks have the window reach block 0 (no sink of their own), a top-k of the local
    // block alone, and every visible block taken before any growth.
    const Case cases[] = {{60, 80, 100, 300, 2, 3, 64, 128, 16, 16, 0.98f, 8, 48},
                          {60, 80, 1, 1, 3, 3, 64, 128, 16, 16, 0.98f, 8, 48},
                          {30, 40, 50, 200, 2, 2, 128, 64, 8, 4, 0.9f, 4, 0},
                          {280, 300, 1, 1, 2, 4, 128, 128, 32, 16, 0.98f, 8, 0},
                          {40, 60, 80, 160, 2, 3, 64, 64, 6, 3, 0.0f, 4, 0},  // the window alone
                          {0, 0, 2400, 2560, 2, 3, 64, 128, 4, 16, 0.98f, 8, 0}};
    for (const Case& c : cases)
        for (const bool sink : {false, true}) {
            Fixture f;
            std::string error;
            const int64_t pos0 =
                c.blocks_hi == 0 ? 0 : static_cast<int64_t>(uniform(c.blocks_lo, c.blocks_hi)) * c.B - uniform(0, c.B - 1);
            QVERIFY2(make_fixture(f, pos0, uniform(c.n_q_lo, c.n_q_hi), c.kv_heads, c.G, c.D, c.B, &error),
                     error.c_str());
            sl::cuda::MsaGrowth grow;
            grow.mass = c.mass;
            grow.room = c.mass > 0 ? c.top_k * (c.grow - 1) : 0;
            grow.full_blocks = c.full_blocks;
            grow.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
            check_extend(f, c.top_k, sl::cuda::MsaForce(sink, c.window), grow);
            if (QTest::currentTestFailed()) return;
        }
}

void TstCudaMsa::remappedPositions() {
    REQUIRE_CUDA_DEVICE();
    struct Case {
        int D, B, n_q, rot_div, style, G;
        int edge;  // decode: -1 none; 0 / 1: W puts the query exactly on a block's far edge / one short of it
    };
    // Prefill (query blocks straddling the window's edge: W is not a multiple of B, so some
    // blocks are far from part of a query block) and decode; full and partial rotation, both
    // pairings; decode queries exactly at a block's far edge and one position short of it (an
    // off-by-one in a kernel's test flips that block); a group of 20 heads (token mass chunks).
    const Case cases[] = {{64, 128, 300, 1, 0, 3, -1}, {128, 64, 150, 2, 1, 3, -1}, {64, 64, 1, 1, 1, 3, -1},
                          {128, 128, 1, 2, 0, 3, -1},  {64, 128, 1, 1, 0, 3, 0},    {64, 128, 1, 1, 0, 3, 1},
                          {128, 64, 1, 2, 1, 20, 0}};
    for (const Case& c : cases) {
        Fixture f;
        std::string error;
        const int64_t pos0 = uniform(14, 20) * c.B + uniform(1, c.B - 1);
        QVERIFY2(make_fixture(f, pos0, c.n_q, 2, c.G, c.D, c.B, &error), error.c_str());
        int64_t W = 5 * c.B + 37;
        if (c.edge >= 0) {  // block b's last token W before the query (edge 0), or W - 1 (edge 1)
            const int64_t b = f.s.n_kv_blocks() / 2;
            W = pos0 - (b * c.B + c.B - 1) + c.edge;
        }
        check_remap(f, W, c.D / c.rot_div, c.style);
        if (QTest::currentTestFailed()) return;
    }
}

void TstCudaMsa::pagedCacheRoundTrip() {
    REQUIRE_CUDA_DEVICE();
    Fixture f;
    std::string error;
    QVERIFY2(make_fixture(f, uniform(300, 1500), uniform(1, 200), 3, 2, 64, 64, &error), error.c_str());
    const auto& s = f.s;
    const auto& cfg = f.cache->config();
    const int64_t nb = s.n_kv_blocks(), elems = static_cast<int64_t>(cfg.n_kv_head) * cfg.block_size * cfg.head_dim;
    std::vector<int32_t> table(static_cast<size_t>(nb));
    CUDA_OK(cudaMemcpy(table.data(), f.cache->k_view(0).table, table.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<uint16_t> kpool(static_cast<size_t>(cfg.device_blocks * elems)), vpool(kpool.size());
    CUDA_OK(cudaMemcpy(kpool.data(), f.cache->k_view(0).base, kpool.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(vpool.data(), f.cache->v_view(0).base, vpool.size() * 2, cudaMemcpyDeviceToHost));
    for (int64_t p = 0; p < s.n_kv(); ++p) {
        const int32_t phys = table[static_cast<size_t>(p / s.block_size)];
        QVERIFY(phys >= 0 && phys < cfg.device_blocks);
        for (int h = 0; h < s.n_kv_head; ++h)
            for (int i = 0; i < s.head_dim; ++i) {
                const size_t at = static_cast<size_t>(phys * elems + (h * s.block_size + p % s.block_size) * s.head_dim + i);
                const size_t want = static_cast<size_t>((p * s.n_kv_head + h) * s.head_dim + i);
                QCOMPARE(kc::bf16_to_f32(kpool[at]), f.k[want]);
                QCOMPARE(kc::bf16_to_f32(vpool[at]), f.v[want]);
            }
    }
    // read_block gives each block as the pool holds it (after offload / fetch shuffled them).
    std::vector<uint16_t> kb(static_cast<size_t>(elems)), vb(kb.size());
    for (int64_t b = 0; b < nb; ++b) {
        QVERIFY2(f.cache->read_block(0, b, kb.data(), vb.data(), nullptr, &error), error.c_str());
        const size_t at = static_cast<size_t>(table[static_cast<size_t>(b)] * elems);
        QVERIFY(std::equal(kb.begin(), kb.end(), kpool.begin() + static_cast<std::ptrdiff_t>(at)));
        QVERIFY(std::equal(vb.begin(), vb.end(), vpool.begin() + static_cast<std::ptrdiff_t>(at)));
    }
    // And from the host tier: offload one, read it there.
    QVERIFY2(f.cache->offload(0, nb - 1, nullptr, &error), error.c_str());
    QVERIFY2(f.cache->read_block(0, nb - 1, kb.data(), vb.data(), nullptr, &error), error.c_str());
    {
        const size_t at = static_cast<size_t>(table[static_cast<size_t>(nb - 1)] * elems);
        QVERIFY(std::equal(kb.begin(), kb.end(), kpool.begin() + static_cast<std::ptrdiff_t>(at)));
    }
    QVERIFY(!f.cache->read_block(0, nb + 5 < cfg.max_blocks ? nb + 5 : cfg.max_blocks, kb.data(), vb.data(), nullptr, &error));
    // read_blocks: every block at once, backwards (two offloaded ones among them, the second
    // offloaded just before with nothing waited for: its copy to the host tier may be in flight),
    // into pinned and into pageable memory, a stride wider than a block: each as the pool held it.
    if (nb >= 3) {
        QVERIFY2(f.cache->offload(0, nb - 2, nullptr, &error), error.c_str());
        const int n = static_cast<int>(nb);
        const size_t stride = static_cast<size_t>(elems) + 7;
        std::vector<int> layers(static_cast<size_t>(n), 0);
        std::vector<int64_t> blocks(static_cast<size_t>(n));
        for (int j = 0; j < n; ++j) blocks[static_cast<size_t>(j)] = nb - 1 - j;
        uint16_t *pk = nullptr, *pv = nullptr;
        CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&pk), stride * static_cast<size_t>(n) * 2, cudaHostAllocDefault));
        CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&pv), stride * static_cast<size_t>(n) * 2, cudaHostAllocDefault));
        std::vector<uint16_t> qk(stride * static_cast<size_t>(n)), qv(qk.size());
        QVERIFY2(f.cache->read_blocks(n, layers.data(), blocks.data(), pk, pv, stride, nullptr, &error), error.c_str());
        QVERIFY2(f.cache->read_blocks(n, layers.data(), blocks.data(), qk.data(), qv.data(), stride, nullptr, &error),
                 error.c_str());
        int differ = 0;
        for (int j = 0; j < n; ++j) {
            const size_t at = static_cast<size_t>(j) * stride;
            const auto was = kpool.begin() + static_cast<std::ptrdiff_t>(table[static_cast<size_t>(blocks[static_cast<size_t>(j)])] * elems);
            const auto was_v = vpool.begin() + static_cast<std::ptrdiff_t>(table[static_cast<size_t>(blocks[static_cast<size_t>(j)])] * elems);
            differ += !std::equal(was, was + elems, pk + at) || !std::equal(was_v, was_v + elems, pv + at);
            differ += !std::equal(was, was + elems, qk.begin() + static_cast<std::ptrdiff_t>(at)) ||
                      !std::equal(was_v, was_v + elems, qv.begin() + static_cast<std::ptrdiff_t>(at));
        }
        cudaFreeHost(pk);
        cudaFreeHost(pv);
        QCOMPARE(differ, 0);
        blocks[0] = cfg.max_blocks;  // one out of range: refused, naming it
        QVERIFY(!f.cache->read_blocks(n, layers.data(), blocks.data(), qk.data(), qv.data(), stride, nullptr, &error));
        QVERIFY2(error.find("out of range") != std::string::npos, error.c_str());
    }
    // Errors are reported, not thrown: a block past the table, a full host tier.
    QVERIFY(!f.cache->offload(0, cfg.max_blocks, nullptr, &error));
    QVERIFY(error.find("out of range") != std::string::npos);
}

void TstCudaMsa::prefillMatchesReference() {
    REQUIRE_CUDA_DEVICE();
    for (int D : {64, 128}) {
        for (int B : {64, 128}) {
            Fixture f;
            std::string error;
            // An unaligned start, several query blocks, odd lengths; G = 3 query heads per KV head.
            const int64_t pos0 = uniform(3, 9) * B + uniform(1, B - 1);
            QVERIFY2(make_fixture(f, pos0, uniform(2 * B, 4 * B) | 1, 2, 3, D, B, &error), error.c_str());
            check_pipeline(f, /*top_k=*/4, /*sink=*/B == 64, /*n_splits=*/1);
            check_pipeline(f, /*top_k=*/3, /*sink=*/false, /*n_splits=*/3);  // split-K on prefill rows
            check_pipeline(f, /*top_k=*/64, /*sink=*/false, /*n_splits=*/1); // everything visible: dense
        }
    }
}

void TstCudaMsa::decodeSplitKMatchesReference() {
    REQUIRE_CUDA_DEVICE();
    for (int D : {64, 128}) {
        Fixture f;
        std::string error;
        const int B = 128;
        QVERIFY2(make_fixture(f, uniform(20, 40) * B + uniform(0, B - 1), 1, 4, 4, D, B, &error), error.c_str());
        check_pipeline(f, 16, /*sink=*/true, /*n_splits=*/1);
        check_pipeline(f, 16, /*sink=*/true, /*n_splits=*/5);  // uneven split of 16 blocks
        check_pipeline(f, 16, /*sink=*/false, /*n_splits=*/16);
    }
}

void TstCudaMsa::denseSelectionIsEveryVisibleBlock() {
    REQUIRE_CUDA_DEVICE();
    Fixture f;
    std::string error;
    const int B = 64;
    QVERIFY2(make_fixture(f, uniform(1, 5) * B + uniform(0, B - 1), uniform(B, 3 * B) | 1, 3, 3, 64, B, &error),
             error.c_str());
    const auto& s = f.s;
    const int top_k = static_cast<int>(s.n_kv_blocks()) + 2;
    DevBuf<int32_t> dsel(static_cast<size_t>(s.n_tasks() * top_k));
    DevBuf<float> dq(f.q), dout(f.q.size());
    QVERIFY(dsel.ok() && dq.ok() && dout.ok());
    QCOMPARE(sl::cuda::msa_select_all(s, top_k - 3, dsel.get(), nullptr), cudaErrorInvalidValue);
    CUDA_OK(sl::cuda::msa_select_all(s, top_k, dsel.get(), nullptr));
    const auto sel = dsel.download();
    for (int64_t task = 0; task < s.n_tasks(); ++task) {
        const int64_t qb = s.first_qblock() + task / s.n_kv_head;
        for (int j = 0; j < top_k; ++j) QCOMPARE(sel[static_cast<size_t>(task * top_k + j)], j <= qb ? j : -1);
    }
    const float scale = 0.125f;
    CUDA_OK(sl::cuda::msa_sparse_attention(s, dq.get(), dout.get(), scale, dsel.get(), top_k, f.cache->k_view(0),
                                           f.cache->v_view(0), 1, nullptr, 0, nullptr));
    const auto out = dout.download();
    const auto ref = reference_attention(f, sel, top_k, scale);
    QVERIFY(sl::test::normalized_error(out.data(), ref.data(), ref.size()) < 1e-2);
}

void TstCudaMsa::tokenMassMatchesReference() {
    REQUIRE_CUDA_DEVICE();
    struct Case {
        int D, B, G, blocks_lo, blocks_hi, k_lo, k_hi;
    };
    // Each head dim and block size; and a grown selection's width (150-300 blocks, past the former
    // 80-block cap) with a group of 20 heads (two chunks of kMaxMassGroup).
    const Case cases[] = {{64, 64, 3, 20, 40, 4, 24},   {64, 128, 3, 20, 40, 4, 24}, {128, 64, 3, 20, 40, 4, 24},
                          {128, 128, 3, 20, 40, 4, 24}, {64, 64, 20, 330, 350, 150, 300}};
    for (const Case& cs : cases) {
        {
            const int D = cs.D, B = cs.B;
            Fixture f;
            std::string error;
            const int n_kv_head = 3, G = cs.G;
            QVERIFY2(make_fixture(f, uniform(cs.blocks_lo, cs.blocks_hi) * B + uniform(0, B - 1), 1, n_kv_head, G, D, B,
                                  &error),
                     error.c_str());
            const auto& s = f.s;
            const int64_t nb = s.n_kv_blocks(), local = nb - 1;
            // Per group a random ascending selection holding the local block, -1-padded (mostly
            // full for the wide case).
            const int top_k = uniform(cs.k_lo, cs.k_hi);
            std::vector<int32_t> sel(static_cast<size_t>(n_kv_head * top_k), -1);
            for (int g = 0; g < n_kv_head; ++g) {
                std::vector<int32_t> pick{static_cast<int32_t>(local)};
                const int want = cs.k_lo >= 100 ? uniform(top_k * 3 / 4, top_k) : uniform(1, top_k);
                while (static_cast<int>(pick.size()) < want) {
                    const auto b = static_cast<int32_t>(uniform(0, static_cast<int>(local)));
                    if (std::find(pick.begin(), pick.end(), b) == pick.end()) pick.push_back(b);
                }
                std::sort(pick.begin(), pick.end());
                std::copy(pick.begin(), pick.end(), sel.begin() + g * top_k);
            }
            const float scale = 1.0f / std::sqrt(static_cast<float>(D));
            DevBuf<int32_t> dsel(sel);
            DevBuf<float> dq(f.q), dmass(static_cast<size_t>(n_kv_head) * top_k * B);
            QVERIFY(dsel.ok() && dq.ok() && dmass.ok());
            CUDA_OK(sl::cuda::msa_token_mass(s, dq.get(), scale, dsel.get(), top_k, f.cache->k_view(0), dmass.get(), nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            const auto got = dmass.download();
            // Reference in double: per head, softmax over the selected tokens at or before the query.
            std::vector<float> ref(got.size(), 0.0f);
            for (int g = 0; g < n_kv_head; ++g)
                for (int h = g * G; h < (g + 1) * G; ++h) {
                    std::vector<double> sc(static_cast<size_t>(top_k * B), -INFINITY);
                    double mx = -INFINITY;
                    for (int si = 0; si < top_k; ++si) {
                        const int32_t b = sel[static_cast<size_t>(g * top_k + si)];
                        if (b < 0) continue;
                        for (int t = 0; t < B; ++t) {
                            const int64_t p = static_cast<int64_t>(b) * B + t;
                            if (p > s.pos0) break;
                            double acc = 0;
                            for (int i = 0; i < D; ++i)
                                acc += static_cast<double>(f.q[static_cast<size_t>(h * D + i)]) *
                                       f.k[static_cast<size_t>((p * n_kv_head + g) * D + i)];
                            sc[static_cast<size_t>(si * B + t)] = acc * scale;
                            mx = std::max(mx, acc * scale);
                        }
                    }
                    double sum = 0;
                    for (double& x : sc) sum += x == -INFINITY ? 0 : std::exp(x - mx);
                    for (size_t i = 0; i < sc.size(); ++i)
                        if (sc[i] != -INFINITY)
                            ref[static_cast<size_t>(g * top_k * B) + i] += static_cast<float>(std::exp(sc[i] - mx) / sum / G);
                }
            const double err = sl::test::normalized_error(got.data(), ref.data(), ref.size());
            double row_sum = 0;
            for (int i = 0; i < top_k * B; ++i) row_sum += got[static_cast<size_t>(i)];
            qInfo("token mass D %d B %d top-k %d: error %.3e, group 0 sums to %.6f", D, B, top_k, err, row_sum);
            QVERIFY2(err < 1e-4, qPrintable(QString::number(err)));
            QVERIFY(std::abs(row_sum - 1.0) < 1e-4);
            for (int g = 0; g < n_kv_head; ++g)  // nothing on padding
                for (int si = 0; si < top_k; ++si)
                    if (sel[static_cast<size_t>(g * top_k + si)] < 0)
                        for (int t = 0; t < B; ++t) QCOMPARE(got[static_cast<size_t>((g * top_k + si) * B + t)], 0.0f);
        }
    }
}

#else
void TstCudaMsa::tokenMassMatchesReference() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::shapeArithmeticAndRefusals() { QSKIP("built without CUDA"); }
void TstCudaMsa::denseSelectionIsEveryVisibleBlock() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::pagedCacheRoundTrip() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::hybridSelection() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::windowAndGrowth() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::remappedPositions() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::prefillMatchesReference() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaMsa::decodeSplitKMatchesReference() { QSKIP("no CUDA device: built without CUDA"); }
#endif

QTEST_APPLESS_MAIN(TstCudaMsa)
#include "tst_cuda_msa.moc"
