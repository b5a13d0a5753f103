#include "core/attention/dense_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

// Partial attention of the `group` query heads q (group, hd) of one KV head over keys [j0, j1):
// per head the running max m, the sum of exp(s - m) l, and the unnormalized output acc (hd).
// `scores` is scratch of at least group * (j1 - j0) floats, `kbuf` of block_size * hd floats (the
// pages' rows, dequantized when the cache is not f32). Keys are read page by page, so each page's
// rows stay in L1/L2 while every head of the group passes over them.
void attend_range(const AttentionCall& c, const KvCache& kv, int g, const float* q, int group, int64_t j0,
                  int64_t j1, float* scores, float* m, float* l, float* acc, float* kbuf) {
    const int hd = c.head_dim;
    const int64_t n = j1 - j0;
    const int64_t B = kv.block_size();
    for (int64_t p = j0; p < j1;) {
        const int64_t len = std::min(j1, (p / B + 1) * B) - p;
        const float* K = kv.k_rows(c.layer, g, p, static_cast<int>(len), kbuf);
        for (int i = 0; i < group; ++i)
            kernels::dot_rows_f32(scores + i * n + (p - j0), q + i * hd, K, hd, len, hd, c.scale);
        p += len;
    }
    for (int i = 0; i < group; ++i) {
        float* s = scores + i * n;
        const float mx = n > 0 ? kernels::max_f32(s, n) : -INFINITY;
        m[i] = mx;
        l[i] = kernels::exp_shifted_sum(s, n, mx);
        std::fill(acc + i * hd, acc + (i + 1) * hd, 0.0f);
    }
    for (int64_t p = j0; p < j1;) {
        const int64_t len = std::min(j1, (p / B + 1) * B) - p;
        const float* V = kv.v_rows(c.layer, g, p, static_cast<int>(len), kbuf);
        for (int i = 0; i < group; ++i)
            kernels::accumulate_rows_f32(acc + i * hd, scores + i * n + (p - j0), V, hd, len, hd);
        p += len;
    }
}

// Rows (query tokens x the group's heads) of a prefill item from which pages are transposed for the
// tile kernel; fewer go token by token (attend_range).
constexpr int kMinTileRows = 16;
// Query tokens per prefill item of the tiled path.
constexpr int64_t kTileTokens = 32;

// Tiled prefill: items of (KV head, up to kTileTokens query tokens), claimed by free threads, the
// items with the most keys first. Each page of keys is read (dequantized) and transposed once per
// item, and the item's rows (token-major, the group's heads) attend it in tiles of
// kernels::kTileRows (attention_tile.h). Each item writes only its own output rows.
void prefill_tiled(const AttentionCall& c, const KvCache& kv, ThreadPool& pool, std::vector<std::vector<float>>& scratch) {
    const int group = c.n_head / c.n_kv_head;
    const int hd = c.head_dim;
    const int64_t B = kv.block_size();
    const int64_t ldk = kernels::tile_ldk(static_cast<int>(B));
    const int64_t n_chunks = (c.n_tokens + kTileTokens - 1) / kTileTokens;
    const int64_t items = n_chunks * c.n_kv_head;
    const auto max_rows = static_cast<size_t>(kTileTokens * group);
    const auto page = static_cast<size_t>(B) * static_cast<size_t>(hd);
    scratch.resize(static_cast<size_t>(pool.size()));
    std::atomic<int64_t> next{0};
    pool.parallel_for(pool.size(), [&](int64_t, int64_t, int ti) {
        std::vector<float>& buf = scratch[static_cast<size_t>(ti)];
        buf.resize(2 * page + static_cast<size_t>(hd) * static_cast<size_t>(ldk) +
                   static_cast<size_t>(kernels::kTileRows) * static_cast<size_t>(ldk) + max_rows * (2 + static_cast<size_t>(hd)));
        float* kbuf = buf.data();
        float* vbuf = kbuf + page;
        float* kt = vbuf + page;
        float* pt = kt + static_cast<size_t>(hd) * static_cast<size_t>(ldk);
        float* m = pt + static_cast<size_t>(kernels::kTileRows) * static_cast<size_t>(ldk);
        float* l = m + max_rows;
        float* acc = l + max_rows;
        for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < items; it = next.fetch_add(1, std::memory_order_relaxed)) {
            const int64_t chunk = n_chunks - 1 - it / c.n_kv_head;
            const int g = static_cast<int>(it % c.n_kv_head);
            const int64_t t0 = chunk * kTileTokens, t1 = std::min<int64_t>(c.n_tokens, t0 + kTileTokens);
            const auto rows = static_cast<size_t>((t1 - t0) * group);
            std::fill(m, m + rows, -INFINITY);
            std::fill(l, l + rows, 0.0f);
            std::fill(acc, acc + rows * static_cast<size_t>(hd), 0.0f);
            const int64_t end = c.causal ? c.pos0 + t1 : c.pos0 + c.n_tokens;  // keys [0, end)
            for (int64_t p = 0; p < end;) {
                const int len = static_cast<int>(std::min(end, (p / B + 1) * B) - p);
                const float* K = kv.k_rows(c.layer, g, p, len, kbuf);
                const float* V = kv.v_rows(c.layer, g, p, len, vbuf);
                kernels::transpose_keys(kt, ldk, K, hd, len, hd);
                const float* tq[kernels::kTileRows];
                float tsum[kernels::kTileRows];
                int tn = 0, tvis = 0;
                size_t tr0 = 0;
                auto flush = [&] {
                    if (tn > 0)
                        kernels::attend_tile(tn, tq, kt, ldk, V, hd, tvis, hd, c.scale, m + tr0, l + tr0, acc + tr0 * static_cast<size_t>(hd),
                                             pt, ldk, tsum);
                    tn = 0;
                };
                for (int64_t t = t0; t < t1; ++t) {
                    const int64_t n_vis = std::min<int64_t>(len, (c.causal ? c.pos0 + t + 1 : end) - p);
                    if (n_vis <= 0) continue;
                    for (int h = 0; h < group; ++h) {
                        const size_t r = static_cast<size_t>((t - t0) * group + h);
                        if (tn > 0 && (tn == kernels::kTileRows || n_vis != tvis || r != tr0 + static_cast<size_t>(tn))) flush();
                        if (tn == 0) {
                            tr0 = r;
                            tvis = static_cast<int>(n_vis);
                        }
                        tq[tn++] = c.q + (t * c.n_head + static_cast<int64_t>(g) * group + h) * hd;
                    }
                }
                flush();
                p += len;
            }
            for (int64_t t = t0; t < t1; ++t)
                for (int h = 0; h < group; ++h) {
                    const size_t r = static_cast<size_t>((t - t0) * group + h);
                    const float inv = 1.0f / l[r];
                    float* out = c.out + (t * c.n_head + static_cast<int64_t>(g) * group + h) * hd;
                    for (int d = 0; d < hd; ++d) out[d] = acc[r * static_cast<size_t>(hd) + static_cast<size_t>(d)] * inv;
                }
        }
    });
}

}  // namespace

void DenseAttention::forward(const AttentionCall& c, const KvCache& kv, ThreadPool& pool) {
    const int group = c.n_head / c.n_kv_head;
    const int hd = c.head_dim;
    const kernels::AxpyF32Fn axpy = kernels::axpy_f32_fn();
    const int64_t n_keys_max = c.pos0 + c.n_tokens;
    const auto threads = static_cast<size_t>(pool.size());
    // Per-thread scratch starts with one page of rows (64-byte multiple: what follows stays aligned).
    const size_t kbuf_floats = (static_cast<size_t>(kv.block_size()) * static_cast<size_t>(hd) + 15) / 16 * 16;

    // The first key a query at position p sees: 0, or p - window + 1 in a sliding-window layer.
    const auto first_key = [&c](int64_t p) { return c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : int64_t{0}; };

    // Decode over a long context: split the keys across threads and combine (flash-decoding).
    const int64_t decode_lo = first_key(n_keys_max - 1);
    if (c.n_tokens == 1 && n_keys_max - decode_lo >= 512 && threads > 1) {
        const int64_t chunks = static_cast<int64_t>(threads);
        const int64_t per = (n_keys_max - decode_lo + chunks - 1) / chunks;
        const auto parts = static_cast<size_t>(chunks) * static_cast<size_t>(c.n_kv_head);
        m_.resize(parts * group);
        l_.resize(parts * group);
        acc_.resize(parts * group * hd);
        std::vector<float>&m = m_, &l = l_, &acc = acc_;
        std::vector<std::vector<float>>& scratch = scratch_;
        scratch.resize(threads);
        pool.parallel_for(static_cast<int64_t>(parts), [&](int64_t b, int64_t e, int t) {
            std::vector<float>& s = scratch[static_cast<size_t>(t)];
            s.resize(static_cast<size_t>(group * per) + kbuf_floats);
            for (int64_t it = b; it < e; ++it) {
                const int64_t chunk = it / c.n_kv_head;
                const int g = static_cast<int>(it % c.n_kv_head);
                const int64_t j0 = decode_lo + chunk * per, j1 = std::min(n_keys_max, j0 + per);
                const auto o = static_cast<size_t>(it) * group;
                if (j0 >= j1) {
                    std::fill(m.begin() + static_cast<ptrdiff_t>(o), m.begin() + static_cast<ptrdiff_t>(o + group), -INFINITY);
                    std::fill(l.begin() + static_cast<ptrdiff_t>(o), l.begin() + static_cast<ptrdiff_t>(o + group), 0.0f);
                    continue;
                }
                attend_range(c, kv, g, c.q + static_cast<int64_t>(g) * group * hd, group, j0, j1, s.data() + kbuf_floats,
                             m.data() + o, l.data() + o, acc.data() + o * hd, s.data());
            }
        });
        for (int g = 0; g < c.n_kv_head; ++g) {
            for (int i = 0; i < group; ++i) {
                float mx = -INFINITY;
                for (int64_t ch = 0; ch < chunks; ++ch) mx = std::max(mx, m[(static_cast<size_t>(ch * c.n_kv_head + g)) * group + i]);
                float* out = c.out + (static_cast<int64_t>(g) * group + i) * hd;
                std::fill(out, out + hd, 0.0f);
                double total = 0;
                for (int64_t ch = 0; ch < chunks; ++ch) {
                    const size_t o = static_cast<size_t>(ch * c.n_kv_head + g) * group + static_cast<size_t>(i);
                    if (l[o] == 0.0f) continue;
                    const float w = std::exp(m[o] - mx);
                    total += static_cast<double>(l[o]) * w;
                    axpy(out, w, acc.data() + o * hd, hd);
                }
                const float inv = static_cast<float>(1.0 / total);
                for (int d = 0; d < hd; ++d) out[d] *= inv;
            }
        }
        return;
    }

    // The tiled prefill sees key prefixes only; sliding-window layers go token by token below.
    if (c.window == 0 && static_cast<int64_t>(c.n_tokens) * group >= kMinTileRows) {
        prefill_tiled(c, kv, pool, scratch_);
        return;
    }

    // One item per (token, KV head): the group's query heads read each key and value once.
    const int64_t items = static_cast<int64_t>(c.n_tokens) * c.n_kv_head;
    std::vector<std::vector<float>>& scratch = scratch_;
    scratch.resize(threads);
    pool.parallel_for(items, [&](int64_t b, int64_t e, int t) {
        std::vector<float>& s = scratch[static_cast<size_t>(t)];
        s.resize(kbuf_floats + static_cast<size_t>(group) * static_cast<size_t>(n_keys_max) + 2 * static_cast<size_t>(group));
        for (int64_t it = b; it < e; ++it) {
            const int64_t ti = it / c.n_kv_head;
            const int g = static_cast<int>(it % c.n_kv_head);
            const int64_t n_keys = c.causal ? c.pos0 + ti + 1 : n_keys_max;
            const int64_t lo = first_key(c.pos0 + ti);
            const float* q = c.q + (ti * c.n_head + static_cast<int64_t>(g) * group) * hd;
            float* out = c.out + (ti * c.n_head + static_cast<int64_t>(g) * group) * hd;
            float* scores = s.data() + kbuf_floats;
            float* m = scores + static_cast<size_t>(group) * static_cast<size_t>(n_keys_max);
            float* l = m + group;
            attend_range(c, kv, g, q, group, lo, n_keys, scores, m, l, out, s.data());
            for (int i = 0; i < group; ++i) {
                const float inv = 1.0f / l[i];
                for (int d = 0; d < hd; ++d) out[i * hd + d] *= inv;
            }
        }
    });
}

}  // namespace sl
