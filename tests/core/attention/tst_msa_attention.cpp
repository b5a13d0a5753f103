// MSA sparse attention (training-free): equals dense when top-k covers every block; matches a
// restricted-softmax reference when it does not; Quest-pruned block-max selection equals brute force;
// forced (local, sink) and invisible blocks; incremental index; the index kernels against their
// scalar references.
#include <QTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/attention/block_index.h"
#include "core/attention/block_select.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/util/error.h"
#include "core/kvcache/kv_cache.h"
#include "tests/core/attention/host_kv.h"
#include "tests/core/attention/msa_fixtures.h"
#include "core/runtime/thread_pool.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"
#include "tests/common/test_support.h"

namespace {

using sl::test::fill_random;
using sl::test::fill_structured;
using sl::test::make_call;

// RoPE at their true positions on the keys of `kv` (all n_ctx positions, filled) and on random
// queries for positions [pos0, n_ctx); the call for them, with its RoPE parameters set (base
// 10000). q0: the queries before RoPE.
struct Roped {
    std::vector<float> q0, q, out;
    sl::AttentionCall call;
    Roped(sl::test::HostKv& kv, int n_head, int pos0, int rope_dim, bool neox) {
        const auto style = neox ? sl::kernels::RopeStyle::Neox : sl::kernels::RopeStyle::Norm;
        const int n_ctx = static_cast<int>(kv.n_ctx()), n_kv = kv.n_kv_head(), hd = kv.head_dim(), nt = n_ctx - pos0;
        for (int p = 0; p < n_ctx; ++p) sl::kernels::rope(kv.k(0, p), n_kv, hd, rope_dim, p, 10000.0f, 1.0f, style);
        kv.set_n_past(n_ctx);
        q0 = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd));
        q = q0;
        out.resize(q.size());
        for (int t = 0; t < nt; ++t) sl::kernels::rope(q.data() + t * n_head * hd, n_head, hd, rope_dim, pos0 + t, 10000.0f, 1.0f, style);
        call = make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data());
        call.rope_dim = rope_dim;
        call.rope_neox = neox ? 1 : 0;
    }
};

// Double-precision attention of query t (position pos0 + t), head h, over the tokens of `blocks`
// only (causal), writing out (hd) and the mass per block.
void restricted_ref(const sl::test::HostKv& kv, const sl::AttentionCall& c, int t, int h, const std::vector<int32_t>& blocks,
                    int B, double* out, std::vector<double>& mass) {
    const int G = c.n_head / c.n_kv_head, g = h / G, hd = c.head_dim;
    const int64_t p = c.pos0 + t;
    const float* q = c.q + (static_cast<int64_t>(t) * c.n_head + h) * hd;
    std::vector<double> s;
    std::vector<int64_t> pos;
    std::vector<size_t> owner;
    double mx = -1e300;
    for (size_t bi = 0; bi < blocks.size(); ++bi)
        for (int64_t j = static_cast<int64_t>(blocks[bi]) * B; j < (blocks[bi] + 1LL) * B && j <= p; ++j) {
            double d = 0;
            for (int i = 0; i < hd; ++i) d += static_cast<double>(q[i]) * kv.k(c.layer, j)[g * hd + i];
            s.push_back(d * c.scale);
            pos.push_back(j);
            owner.push_back(bi);
            mx = std::max(mx, s.back());
        }
    double z = 0;
    for (auto& x : s) z += x = std::exp(x - mx);
    std::fill(out, out + hd, 0.0);
    mass.assign(blocks.size(), 0.0);
    for (size_t j = 0; j < s.size(); ++j) {
        mass[owner[j]] += s[j] / z;
        for (int i = 0; i < hd; ++i) out[i] += s[j] / z * kv.v(c.layer, pos[j])[g * hd + i];
    }
}

}  // namespace

class TstMsaAttention : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void kernelsMatchReference();
    void equalsDenseWhenAllSelected_data();
    void equalsDenseWhenAllSelected();
    void sparseMatchesRestrictedReference_data();
    void sparseMatchesRestrictedReference();
    void prunedEqualsBruteForce_data();
    void prunedEqualsBruteForce();
    void forcedAndInvisibleBlocks();
    void incrementalIndexAndDecode();
    void remapPositions_data();
    void remapPositions();
    void remapSelection_data();
    void remapSelection();
    void tokenMass();
    void lastQuerySelectsAlone();
    void parseScoring();
    void decodeShortlistFactor();
    void sameForEveryThreadCount();
    void indexSameOnAPool();
};

void TstMsaAttention::kernelsMatchReference() {
    using sl::kernels::Isa;
    const Isa best = sl::kernels::max_supported_isa();
    for (int d : {1, 7, 17, 33, 64, 100, 128}) {
        const int rows = 5, keys = 13, qs = d + 3, ks = d + 5;
        auto q = sl::test::random_floats(static_cast<size_t>(rows * qs + 1), -2, 2);
        auto k = sl::test::random_floats(static_cast<size_t>(keys * ks + 1), -2, 2);
        std::vector<float> kmin(static_cast<size_t>(d) + 1), kmax(static_cast<size_t>(d) + 1);
        for (int i = 0; i < d; ++i) {
            kmin[static_cast<size_t>(i) + 1] = kmax[static_cast<size_t>(i) + 1] = k[static_cast<size_t>(i) + 1];
            for (int j = 1; j < keys; ++j) {
                kmin[static_cast<size_t>(i) + 1] = std::min(kmin[static_cast<size_t>(i) + 1], k[static_cast<size_t>(j * ks + i) + 1]);
                kmax[static_cast<size_t>(i) + 1] = std::max(kmax[static_cast<size_t>(i) + 1], k[static_cast<size_t>(j * ks + i) + 1]);
            }
        }
        // Misaligned by one float on purpose.
        const float* qp = q.data() + 1;
        const float* kp = k.data() + 1;
        std::vector<float> ref_b(rows), got_b(rows), ref_m(rows), got_m(rows);
        sl::kernels::ref::quest_bounds(ref_b.data(), qp, rows, qs, kmin.data() + 1, kmax.data() + 1, d);
        for (int r = 0; r < rows; ++r) ref_m[static_cast<size_t>(r)] = sl::kernels::ref::max_dot(qp + r * qs, kp, ks, keys, d);
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (static_cast<int>(isa) > static_cast<int>(best)) continue;
            sl::kernels::set_active_isa(isa);
            sl::kernels::quest_bounds(got_b.data(), qp, rows, qs, kmin.data() + 1, kmax.data() + 1, d);
            for (int r = 0; r < rows; ++r) got_m[static_cast<size_t>(r)] = sl::kernels::max_dot(qp + r * qs, kp, ks, keys, d);
            QVERIFY2(sl::test::normalized_error(got_b.data(), ref_b.data(), rows) < 1e-5, sl::kernels::isa_name(isa));
            QVERIFY2(sl::test::normalized_error(got_m.data(), ref_m.data(), rows) < 1e-5, sl::kernels::isa_name(isa));
            // A key's score does not depend on where it falls in the call (tile or tail): the
            // index compares block scores of different calls bitwise.
            for (int r = 0; r < rows; ++r) {
                float alone = sl::kernels::max_dot(qp + r * qs, kp, ks, 1, d);
                for (int j = 1; j < keys; ++j) alone = std::max(alone, sl::kernels::max_dot(qp + r * qs, kp + j * ks, ks, 1, d));
                QVERIFY2(alone == got_m[static_cast<size_t>(r)], sl::kernels::isa_name(isa));
            }
            // The bound holds (up to rounding) for every key inside the box.
            for (int r = 0; r < rows; ++r) QVERIFY(got_b[static_cast<size_t>(r)] >= got_m[static_cast<size_t>(r)] - 1e-4f);
        }
    }
    sl::kernels::set_active_isa(best);
}

void TstMsaAttention::equalsDenseWhenAllSelected_data() {
    QTest::addColumn<int>("n_head");
    QTest::addColumn<int>("n_kv");
    QTest::addColumn<int>("hd");
    QTest::addColumn<int>("block");
    QTest::addColumn<int>("pos0");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("mode");  // 0 block-max, 1 mean-key, 2 block-max group-mean query, 3 + sink
    QTest::addColumn<int>("kv_type");  // sl::KvType: MSA covering the context equals dense for every KV type
    const std::pair<sl::KvType, const char*> types[] = {{sl::KvType::F32, "f32"}, {sl::KvType::F16, "f16"}, {sl::KvType::Int8, "int8"}};
    for (const auto& [type, name] : types) {
        auto row = [&](const char* what) -> QTestData& { return QTest::newRow(qPrintable(QStringLiteral("%1 %2").arg(QLatin1String(what), QLatin1String(name)))); };
        const int t = static_cast<int>(type);
        row("prefill g3 B16 partial") << 9 << 3 << 64 << 16 << 0 << 203 << 0 << t;
        row("prefill g1 odd dim B64") << 3 << 3 << 17 << 64 << 0 << 150 << 1 << t;
        row("prefill g16 B128") << 16 << 1 << 32 << 128 << 0 << 300 << 2 << t;
        row("chunked g3 B64 unaligned") << 9 << 3 << 64 << 64 << 77 << 140 << 0 << t;
        row("chunked g16 odd dim B16") << 32 << 2 << 33 << 16 << 45 << 38 << 3 << t;
        row("decode g3 B128") << 9 << 3 << 64 << 128 << 300 << 1 << 0 << t;
        row("decode first of block B16") << 4 << 2 << 24 << 16 << 64 << 1 << 1 << t;
        row("decode g16 B64 sink") << 16 << 1 << 72 << 64 << 333 << 1 << 3 << t;
        row("m3 shape chunk") << 64 << 4 << 128 << 128 << 256 << 131 << 0 << t;
    }
}

void TstMsaAttention::equalsDenseWhenAllSelected() {
    QFETCH(int, n_head);
    QFETCH(int, n_kv);
    QFETCH(int, hd);
    QFETCH(int, block);
    QFETCH(int, pos0);
    QFETCH(int, n_tokens);
    QFETCH(int, mode);
    QFETCH(int, kv_type);
    const int n_ctx = pos0 + n_tokens;
    sl::KvCacheOptions kvo;
    kvo.type = static_cast<sl::KvType>(kv_type);
    sl::test::HostKv kv(1, n_ctx, n_kv, hd, kvo);
    fill_random(kv, 0, 0, n_ctx);
    kv.set_n_past(n_ctx);
    // The mirror takes the values the cache stores (rounded to f16 / int8), so that the double
    // reference below reads what both attentions read.
    {
        const sl::KvCache& stored = kv;
        std::vector<float> k(static_cast<size_t>(kv.row())), v(k.size());
        for (int p = 0; p < n_ctx; ++p) {
            stored.read(0, p, k.data(), v.data());
            std::copy(k.begin(), k.end(), kv.k(0, p));
            std::copy(v.begin(), v.end(), kv.v(0, p));
        }
    }
    auto q = sl::test::random_floats(static_cast<size_t>(n_tokens * n_head * hd), -2, 2);
    std::vector<float> out(q.size()), ref(q.size());
    sl::ThreadPool pool(2);
    sl::DenseAttention dense;
    dense.forward(make_call(n_head, n_kv, hd, pos0, n_tokens, q.data(), ref.data()), kv, pool);
    sl::MsaConfig cfg;
    cfg.block_size = block;
    cfg.top_k = (n_ctx + block - 1) / block;  // exactly every block
    cfg.scoring = mode == 1 ? sl::BlockScoring::MeanKey : sl::BlockScoring::BlockMax;
    cfg.index_query = mode == 2 ? sl::IndexQuery::GroupMean : sl::IndexQuery::HeadMax;
    cfg.sink = mode == 3;
    sl::MsaAttention msa(cfg);
    const auto call = make_call(n_head, n_kv, hd, pos0, n_tokens, q.data(), out.data());
    msa.forward(call, kv, pool);
    const double err = sl::test::normalized_error(out.data(), ref.data(), out.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    // Every visible block selected; masses sum to 1 and match the exact softmax.
    const auto& sels = msa.last_selections(0);
    const int n_qb = (n_ctx - 1) / block - pos0 / block + 1;
    const bool split_last = n_ctx - std::max(pos0, (n_ctx - 1) / block * block) > 1;  // the last query's own
    QCOMPARE(static_cast<int>(sels.size()), (n_qb + (split_last ? 1 : 0)) * n_kv);
    QCOMPARE(sels.back().n_queries, 1);
    QCOMPARE(sels.back().q_pos0, int64_t{n_ctx - 1});
    std::vector<double> o(static_cast<size_t>(hd)), m;
    for (const auto& s : sels) {
        const int local = static_cast<int>(s.q_pos0 / block);
        QCOMPARE(static_cast<int>(s.blocks.size()), local + 1);
        for (int b = 0; b <= local; ++b) QCOMPARE(s.blocks[static_cast<size_t>(b)], b);
        QVERIFY(std::fabs(std::accumulate(s.mass.begin(), s.mass.end(), 0.0) - 1.0) < 1e-4);
        std::vector<double> want(s.blocks.size(), 0.0);
        const int G = n_head / n_kv;
        for (int t = 0; t < s.n_queries; ++t)
            for (int h = s.kv_head * G; h < (s.kv_head + 1) * G; ++h) {
                restricted_ref(kv, call, static_cast<int>(s.q_pos0 - pos0) + t, h, s.blocks, block, o.data(), m);
                for (size_t i = 0; i < m.size(); ++i) want[i] += m[i] / (s.n_queries * G);
            }
        for (size_t i = 0; i < want.size(); ++i) QVERIFY(std::fabs(want[i] - s.mass[i]) < 1e-5);
    }
}

void TstMsaAttention::sparseMatchesRestrictedReference_data() {
    QTest::addColumn<int>("n_head");
    QTest::addColumn<int>("n_kv");
    QTest::addColumn<int>("hd");
    QTest::addColumn<int>("block");
    QTest::addColumn<int>("pos0");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("top_k");
    QTest::addColumn<int>("mode");
    QTest::addColumn<int>("window");  // MsaConfig::window_blocks
    QTest::newRow("prefill g3 B16 k3") << 9 << 3 << 64 << 16 << 0 << 203 << 3 << 0 << 0;
    QTest::newRow("chunked g16 B16 k4 sink") << 16 << 1 << 40 << 16 << 101 << 70 << 4 << 3 << 0;
    QTest::newRow("chunked g1 odd B64 k2 meankey") << 3 << 3 << 31 << 64 << 200 << 90 << 2 << 1 << 0;
    QTest::newRow("decode g3 B16 k5 groupmean") << 9 << 3 << 64 << 16 << 333 << 1 << 5 << 2 << 0;
    QTest::newRow("decode m3 B128 k2") << 64 << 4 << 128 << 128 << 700 << 1 << 2 << 0 << 0;
    QTest::newRow("prefill g3 B16 k3 window 4") << 9 << 3 << 64 << 16 << 0 << 203 << 3 << 0 << 4;
    QTest::newRow("chunked g16 B16 k4 sink window 3") << 16 << 1 << 40 << 16 << 101 << 70 << 4 << 3 << 3;
    QTest::newRow("decode g3 B16 k5 groupmean window 7") << 9 << 3 << 64 << 16 << 333 << 1 << 5 << 2 << 7;
}

void TstMsaAttention::sparseMatchesRestrictedReference() {
    QFETCH(int, n_head);
    QFETCH(int, n_kv);
    QFETCH(int, hd);
    QFETCH(int, block);
    QFETCH(int, pos0);
    QFETCH(int, n_tokens);
    QFETCH(int, top_k);
    QFETCH(int, mode);
    QFETCH(int, window);
    const int n_ctx = pos0 + n_tokens;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, block);
    kv.set_n_past(n_ctx);
    auto q = sl::test::random_floats(static_cast<size_t>(n_tokens * n_head * hd), -2, 2);
    std::vector<float> out(q.size()), ref(q.size());
    sl::ThreadPool pool(2);
    sl::MsaConfig cfg;
    cfg.block_size = block;
    cfg.top_k = top_k;
    cfg.scoring = mode == 1 ? sl::BlockScoring::MeanKey : sl::BlockScoring::BlockMax;
    cfg.index_query = mode == 2 ? sl::IndexQuery::GroupMean : sl::IndexQuery::HeadMax;
    cfg.sink = mode == 3;
    cfg.window_blocks = window;
    cfg.window_blocks = window;
    sl::MsaAttention msa(cfg);
    const auto call = make_call(n_head, n_kv, hd, pos0, n_tokens, q.data(), out.data());
    msa.forward(call, kv, pool);
    const int G = n_head / n_kv;
    std::vector<double> o(static_cast<size_t>(hd)), m;
    bool some_sparse = false;
    for (const auto& s : msa.last_selections(0)) {
        const int local = static_cast<int>(s.q_pos0 / block);
        QCOMPARE(static_cast<int>(s.blocks.size()), std::min(top_k + window, local + 1));
        for (int b = std::max(0, local - window); b <= local; ++b)  // the local window, whole
            QVERIFY(std::binary_search(s.blocks.begin(), s.blocks.end(), b));
        some_sparse |= local + 1 > top_k + window;
        std::vector<double> want(s.blocks.size(), 0.0);
        for (int t = 0; t < s.n_queries; ++t)
            for (int h = s.kv_head * G; h < (s.kv_head + 1) * G; ++h) {
                const int ti = static_cast<int>(s.q_pos0 - pos0) + t;
                restricted_ref(kv, call, ti, h, s.blocks, block, o.data(), m);
                for (int i = 0; i < hd; ++i) ref[static_cast<size_t>((ti * n_head + h) * hd + i)] = static_cast<float>(o[static_cast<size_t>(i)]);
                for (size_t i = 0; i < m.size(); ++i) want[i] += m[i] / (s.n_queries * G);
            }
        for (size_t i = 0; i < want.size(); ++i) QVERIFY(std::fabs(want[i] - s.mass[i]) < 1e-5);
    }
    QVERIFY(some_sparse);
    const double err = sl::test::normalized_error(out.data(), ref.data(), out.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
}

void TstMsaAttention::prunedEqualsBruteForce_data() {
    QTest::addColumn<int>("hd");
    QTest::addColumn<int>("block");
    QTest::addColumn<int>("n_blocks");
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("top_k");
    QTest::addColumn<bool>("sink");
    QTest::addColumn<int>("structure");  // 0 random, 1 clustered + needles, 2 duplicated blocks (ties)
    QTest::addColumn<int>("window");     // SelectParams::window
    QTest::newRow("random d64 B16") << 64 << 16 << 40 << 3 << 5 << false << 0 << 0;
    QTest::newRow("random d17 B64 one row") << 17 << 64 << 23 << 1 << 4 << true << 0 << 0;
    QTest::newRow("clustered d64 B64") << 64 << 64 << 60 << 9 << 8 << false << 1 << 0;
    QTest::newRow("clustered d128 B128 many rows") << 128 << 128 << 33 << 48 << 16 << true << 1 << 0;
    QTest::newRow("clustered d33 B16 k1") << 33 << 16 << 50 << 2 << 2 << false << 1 << 0;
    QTest::newRow("ties d32 B16") << 32 << 16 << 45 << 4 << 6 << false << 2 << 0;
    QTest::newRow("clustered d64 B16 window 9") << 64 << 16 << 50 << 5 << 6 << false << 1 << 9;
    QTest::newRow("random d40 B32 sink window 13") << 40 << 32 << 30 << 2 << 4 << true << 0 << 13;
    // 32 rows or more: exact scores in tiles over transposed keys (max_dot_tile), every ISA's d.
    QTest::newRow("ties d32 B16 tiled rows") << 32 << 16 << 45 << 40 << 6 << false << 2 << 0;
    QTest::newRow("clustered d40 B32 tiled rows window 5") << 40 << 32 << 30 << 33 << 4 << true << 1 << 5;
    QTest::newRow("random d17 B16 tiled rows") << 17 << 16 << 28 << 37 << 5 << false << 0 << 0;
    QTest::newRow("clustered d64 B128 tiled rows") << 64 << 128 << 20 << 64 << 6 << false << 1 << 0;
    QTest::newRow("clustered d32 B16 window past block 0") << 32 << 16 << 20 << 3 << 5 << true << 1 << 40;
}

void TstMsaAttention::prunedEqualsBruteForce() {
    QFETCH(int, hd);
    QFETCH(int, block);
    QFETCH(int, n_blocks);
    QFETCH(int, n_rows);
    QFETCH(int, top_k);
    QFETCH(bool, sink);
    QFETCH(int, structure);
    QFETCH(int, window);
    const int n_kv = 2;
    const int64_t n = static_cast<int64_t>(n_blocks) * block;
    sl::test::HostKv kv(1, static_cast<int>(n), n_kv, hd);
    if (structure == 0) fill_random(kv, 0, 0, n);
    else fill_structured(kv, 0, n, block);
    if (structure == 2)  // every third block a copy of the one before: exact score ties
        for (int64_t p = 0; p < n; ++p)
            if ((p / block) % 3 == 2) std::copy(kv.k(0, p - block), kv.k(0, p - block) + kv.row(), kv.k(0, p));
    sl::BlockIndex index(block, n_kv, hd);
    index.update(kv, 0, 0, n);
    sl::SelectParams pruned, brute;
    pruned.top_k = brute.top_k = top_k;
    pruned.sink = brute.sink = sink;
    pruned.window = brute.window = window;
    brute.prune = false;
    sl::SelectScratch scratch;
    sl::SelectStats st_p, st_b;
    std::vector<int32_t> a, b;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int trial = 0; trial < 20; ++trial) {
        const int g = trial % n_kv;
        const int64_t local = n_blocks - 1 - trial % 5;
        std::vector<float> rows(static_cast<size_t>(n_rows * hd));
        // Half the trials: queries near a random key of the context (peaked scores); else random.
        for (int r = 0; r < n_rows; ++r) {
            const float* k = kv.k(0, std::uniform_int_distribution<int64_t>(0, local * block - 1)(sl::test::rng())) + g * hd;
            for (int i = 0; i < hd; ++i)
                rows[static_cast<size_t>(r * hd + i)] = trial % 2 ? k[i] + 0.5f * nd(sl::test::rng()) : nd(sl::test::rng());
        }
        sl::select_blocks(index, kv, 0, g, rows.data(), n_rows, hd, local, pruned, scratch, a, st_p);
        sl::select_blocks(index, kv, 0, g, rows.data(), n_rows, hd, local, brute, scratch, b, st_b);
        QCOMPARE(a, b);
        // And both against an independent ranking of exact scores (ties: lower id).
        // The local block and the window's are forced, then the sink when outside the window.
        const int64_t end = std::max<int64_t>(0, local - window);
        std::set<int32_t> want;
        for (int64_t blk = end; blk <= local; ++blk) want.insert(static_cast<int32_t>(blk));
        const bool forced_sink = sink && end > 0;
        if (forced_sink) want.insert(0);
        std::vector<std::pair<float, int32_t>> all;
        for (int64_t blk = forced_sink ? 1 : 0; blk < end; ++blk)
            all.emplace_back(sl::exact_block_score(index, kv, 0, g, rows.data(), n_rows, hd, blk), static_cast<int32_t>(blk));
        std::sort(all.begin(), all.end(), [](auto& x, auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });
        const size_t m = static_cast<size_t>(std::max(0, top_k - 1 - (forced_sink ? 1 : 0)));
        for (size_t i = 0; i < std::min(m, all.size()); ++i) want.insert(all[i].second);
        QCOMPARE(std::set<int32_t>(a.begin(), a.end()), want);
    }
    qInfo("exact block scores: pruned %lld of %lld candidates (%.1f%%), row-block pairs %lld vs %lld brute force",
          static_cast<long long>(st_p.exact_blocks), static_cast<long long>(st_p.candidates),
          100.0 * static_cast<double>(st_p.exact_blocks) / static_cast<double>(std::max<int64_t>(1, st_p.candidates)),
          static_cast<long long>(st_p.exact_rows), static_cast<long long>(st_b.exact_rows));
    QVERIFY(st_p.exact_rows <= st_b.exact_rows);
}

void TstMsaAttention::forcedAndInvisibleBlocks() {
    // Local block keys are tiny, block 0 keys point away from the queries, block 5 matches them:
    // scores alone would never pick local or sink.
    const int n_head = 6, n_kv = 2, hd = 24, B = 16, n_ctx = 16 * 12 + 5;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_random(kv, 0, 0, n_ctx, -0.1f, 0.1f);
    for (int p = 0; p < n_ctx; ++p)
        for (int i = 0; i < kv.row(); ++i) {
            if (p / B == 5) kv.k(0, p)[i] = 3.0f;
            if (p / B == 0) kv.k(0, p)[i] = -3.0f;
            if (p / B == 12) kv.k(0, p)[i] *= 0.01f;
        }
    kv.set_n_past(n_ctx);
    sl::ThreadPool pool(2);
    for (int pos0 : {0, 100, n_ctx - 1}) {
        const int nt = n_ctx - pos0;
        std::vector<float> q(static_cast<size_t>(nt * n_head * hd), 1.0f), out(q.size());
        for (int top_k : {1, 2, 3}) {
            for (bool sink : {false, true}) {
                for (auto scoring : {sl::BlockScoring::BlockMax, sl::BlockScoring::MeanKey}) {
                    sl::MsaConfig cfg;
                    cfg.block_size = B;
                    cfg.top_k = top_k;
                    cfg.sink = sink;
                    cfg.scoring = scoring;
                    sl::MsaAttention msa(cfg);
                    msa.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
                    for (const auto& s : msa.last_selections(0)) {
                        const int32_t local = static_cast<int32_t>(s.q_pos0 / B);
                        QVERIFY(std::find(s.blocks.begin(), s.blocks.end(), local) != s.blocks.end());
                        QVERIFY(s.blocks.back() <= local);  // nothing invisible (ascending ids)
                        QVERIFY(std::is_sorted(s.blocks.begin(), s.blocks.end()));
                        if (sink && local > 0 && top_k >= 2) QCOMPARE(s.blocks.front(), 0);
                        if (!sink && top_k >= 2 && local > 5) QVERIFY(std::find(s.blocks.begin(), s.blocks.end(), 5) != s.blocks.end());
                        if (!sink && local > 0 && top_k < local + 1)
                            QVERIFY(std::find(s.blocks.begin(), s.blocks.end(), 0) == s.blocks.end());
                        QCOMPARE(static_cast<int>(s.blocks.size()), std::min(top_k, local + 1));
                    }
                }
            }
        }
    }
}

void TstMsaAttention::incrementalIndexAndDecode() {
    // Chunked prefill then decode, call by call on a growing cache, then a restart from position 0
    // with different contents: the incremental index equals a fresh one, and with every block
    // selected each call equals dense.
    const int n_head = 9, n_kv = 3, hd = 40, B = 16, n_ctx = 150;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    sl::ThreadPool pool(2);
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = 100;
    sl::MsaAttention msa(cfg);
    sl::DenseAttention dense;
    for (int round = 0; round < 2; ++round) {
        int64_t pos = 0;
        for (int n : {37, 20, 11, 1, 1, 1, 30, 1}) {
            fill_random(kv, 0, pos, pos + n);
            kv.set_n_past(pos + n);
            auto q = sl::test::random_floats(static_cast<size_t>(n * n_head * hd), -2, 2);
            std::vector<float> out(q.size()), ref(q.size());
            msa.forward(make_call(n_head, n_kv, hd, pos, n, q.data(), out.data()), kv, pool);
            dense.forward(make_call(n_head, n_kv, hd, pos, n, q.data(), ref.data()), kv, pool);
            QVERIFY(sl::test::normalized_error(out.data(), ref.data(), out.size()) < 1e-5);
            pos += n;
            sl::BlockIndex fresh(B, n_kv, hd);
            fresh.update(kv, 0, 0, pos);
            const sl::BlockIndex* inc = msa.index(0);
            QVERIFY(inc);
            QCOMPARE(inc->n_blocks(), fresh.n_blocks());
            for (int64_t b = 0; b < fresh.n_blocks(); ++b)
                for (int h = 0; h < n_kv; ++h)
                    for (int i = 0; i < hd; ++i) {
                        QCOMPARE(inc->kmin(b, h)[i], fresh.kmin(b, h)[i]);
                        QCOMPARE(inc->kmax(b, h)[i], fresh.kmax(b, h)[i]);
                        QCOMPARE(inc->kmean(b, h)[i], fresh.kmean(b, h)[i]);
                    }
        }
    }
    QCOMPARE(msa.stats().calls, 16);
}

void TstMsaAttention::remapPositions_data() {
    QTest::addColumn<bool>("neox");
    QTest::addColumn<int>("rope_dim");
    QTest::newRow("adjacent pairs") << false << 16;
    QTest::newRow("neox, partial rotation") << true << 10;
}

void TstMsaAttention::remapPositions() {
    // Keys and queries carry RoPE of their true positions. With every block selected, Remap must
    // equal attention whose query, for each block ending >= W positions before it, was rotated to
    // position block_start + W instead (double-precision reference, un-rotated q kept aside).
    QFETCH(bool, neox);
    QFETCH(int, rope_dim);
    const int n_head = 4, n_kv = 2, hd = 16, B = 8, W = 20, n_ctx = 8 * 9 + 3;
    const auto style = neox ? sl::kernels::RopeStyle::Neox : sl::kernels::RopeStyle::Norm;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_random(kv, 0, 0, n_ctx);
    const int pos0 = 50, nt = n_ctx - pos0;
    Roped r(kv, n_head, pos0, rope_dim, neox);
    const std::vector<float>& q0 = r.q0;
    std::vector<float>& out = r.out;
    sl::AttentionCall& c = r.call;
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = 100;
    cfg.positions = sl::PositionMode::Remap;
    cfg.remap_window = W;
    sl::MsaAttention msa(cfg);
    sl::ThreadPool pool(2);
    msa.forward(c, kv, pool);
    std::vector<float> ref(out.size());
    int far_pairs = 0;
    for (int t = 0; t < nt; ++t)
        for (int h = 0; h < n_head; ++h) {
            const int g = h / (n_head / n_kv);
            const int64_t p = pos0 + t;
            std::vector<double> s;
            std::vector<int64_t> pos;
            double mx = -1e300;
            for (int64_t j = 0; j <= p; ++j) {
                const int64_t b0 = j / B * B, last = std::min<int64_t>(b0 + B, n_ctx) - 1;
                std::vector<float> qq(q0.begin() + (t * n_head + h) * hd, q0.begin() + (t * n_head + h + 1) * hd);
                const bool far = p - last >= W;
                far_pairs += far && j == b0;
                sl::kernels::rope(qq.data(), 1, hd, rope_dim, far ? b0 + W : p, 10000.0f, 1.0f, style);
                double d = 0;
                for (int i = 0; i < hd; ++i) d += static_cast<double>(qq[static_cast<size_t>(i)]) * kv.k(0, j)[g * hd + i];
                s.push_back(d * c.scale);
                pos.push_back(j);
                mx = std::max(mx, s.back());
            }
            double z = 0;
            for (auto& x : s) z += x = std::exp(x - mx);
            for (int i = 0; i < hd; ++i) {
                double acc = 0;
                for (size_t j = 0; j < s.size(); ++j) acc += s[j] / z * kv.v(0, pos[j])[g * hd + i];
                ref[static_cast<size_t>((t * n_head + h) * hd + i)] = static_cast<float>(acc);
            }
        }
    QVERIFY(far_pairs > 0);
    const double e = sl::test::normalized_error(out.data(), ref.data(), ref.size());
    qInfo("remap vs reference: %.2e (%d far (query, block) pairs)", e, far_pairs);
    QVERIFY2(e < 1e-5, qPrintable(QString::number(e)));
    // And Original positions differ from it (the test can fail).
    cfg.positions = sl::PositionMode::Original;
    sl::MsaAttention orig(cfg);
    std::vector<float> out2(out.size());
    c.out = out2.data();
    orig.forward(c, kv, pool);
    QVERIFY(sl::test::normalized_error(out2.data(), ref.data(), ref.size()) > 1e-3);
}

void TstMsaAttention::remapSelection_data() {
    QTest::addColumn<bool>("neox");
    QTest::addColumn<int>("rope_dim");
    QTest::addColumn<int>("scoring");  // sl::BlockScoring
    QTest::addColumn<bool>("group_mean");
    QTest::newRow("block-max adjacent") << false << 16 << static_cast<int>(sl::BlockScoring::BlockMax) << false;
    QTest::newRow("block-max neox partial") << true << 10 << static_cast<int>(sl::BlockScoring::BlockMax) << false;
    QTest::newRow("block-max group-mean") << false << 16 << static_cast<int>(sl::BlockScoring::BlockMax) << true;
    QTest::newRow("mean-key") << false << 16 << static_cast<int>(sl::BlockScoring::MeanKey) << false;
}

void TstMsaAttention::remapSelection() {
    // Remap: the index branch must rank a block that lies >= W before a query by that query's
    // logits at the remapped distance (the query moved to block_start + W), and nearer blocks at
    // their true distance: the logits the sparse branch attends with. Reference: double precision,
    // from un-rotated q rotated to the target position with kernels::rope. Pruned block-max must
    // also pick what brute force picks. And true-position ranking must differ (the test can fail).
    QFETCH(bool, neox);
    QFETCH(int, rope_dim);
    QFETCH(int, scoring);
    QFETCH(bool, group_mean);
    const int n_head = 6, n_kv = 2, G = n_head / n_kv, hd = 16, B = 8, W = 36, n_ctx = 8 * 30 + 5, top_k = 5;
    const auto style = neox ? sl::kernels::RopeStyle::Neox : sl::kernels::RopeStyle::Norm;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, B);
    const int pos0 = 120;
    Roped r(kv, n_head, pos0, rope_dim, neox);
    const std::vector<float>& q0 = r.q0;
    std::vector<float>& out = r.out;
    sl::AttentionCall& c = r.call;
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = top_k;
    cfg.scoring = static_cast<sl::BlockScoring>(scoring);
    cfg.index_query = group_mean ? sl::IndexQuery::GroupMean : sl::IndexQuery::HeadMax;
    cfg.positions = sl::PositionMode::Remap;
    cfg.remap_window = W;
    sl::ThreadPool pool(2);
    sl::MsaAttention msa(cfg);
    msa.forward(c, kv, pool);
    cfg.prune = false;
    sl::MsaAttention brute(cfg);
    std::vector<float> out_b(out.size());
    c.out = out_b.data();
    brute.forward(c, kv, pool);
    const auto& sels = msa.last_selections(0);
    const auto& sels_b = brute.last_selections(0);
    QCOMPARE(sels.size(), sels_b.size());
    int differ_true = 0, far_blocks = 0;
    for (size_t i = 0; i < sels.size(); ++i) {
        const sl::Selection& sel = sels[i];
        QCOMPARE(sel.blocks, sels_b[i].blocks);
        const int g = sel.kv_head;
        const int64_t local = sel.q_pos0 / B;
        if (local < top_k) continue;
        // Reference score of each candidate block: the max over the query block's queries (and
        // group's heads, or their mean) of q · k at the remapped (and at the true) positions.
        std::vector<std::pair<double, int32_t>> remapped, truepos;
        for (int32_t b = 0; b < local; ++b) {
            double best = -1e300, best_true = -1e300;
            const int64_t last = static_cast<int64_t>(b) * B + B - 1;
            for (int64_t p = sel.q_pos0; p < sel.q_pos0 + sel.n_queries; ++p) {
                const bool far = p - last >= W;
                far_blocks += far;
                std::vector<std::vector<float>> qs;
                for (int hh = 0; hh < G; ++hh) {
                    const float* src = q0.data() + ((p - pos0) * n_head + g * G + hh) * hd;
                    qs.emplace_back(src, src + hd);
                }
                if (group_mean) {
                    std::vector<float> mean(hd, 0.0f);
                    for (auto& x : qs)
                        for (int d = 0; d < hd; ++d) mean[static_cast<size_t>(d)] += x[static_cast<size_t>(d)] / G;
                    qs = {mean};
                }
                for (const auto& qq : qs) {
                    std::vector<float> at_true = qq, at_remap = qq;
                    sl::kernels::rope(at_true.data(), 1, hd, rope_dim, p, 10000.0f, 1.0f, style);
                    sl::kernels::rope(at_remap.data(), 1, hd, rope_dim, far ? b * B + W : p, 10000.0f, 1.0f, style);
                    if (scoring == static_cast<int>(sl::BlockScoring::MeanKey)) {
                        double st = 0, sr = 0;
                        for (int j = 0; j < B; ++j)
                            for (int d = 0; d < hd; ++d) {
                                const float kk = kv.k(0, b * B + j)[g * hd + d];
                                st += static_cast<double>(at_true[static_cast<size_t>(d)]) * kk / B;
                                sr += static_cast<double>(at_remap[static_cast<size_t>(d)]) * kk / B;
                            }
                        best = std::max(best, sr);
                        best_true = std::max(best_true, st);
                        continue;
                    }
                    for (int j = 0; j < B; ++j) {
                        double st = 0, sr = 0;
                        for (int d = 0; d < hd; ++d) {
                            const float kk = kv.k(0, b * B + j)[g * hd + d];
                            st += static_cast<double>(at_true[static_cast<size_t>(d)]) * kk;
                            sr += static_cast<double>(at_remap[static_cast<size_t>(d)]) * kk;
                        }
                        best = std::max(best, sr);
                        best_true = std::max(best_true, st);
                    }
                }
            }
            remapped.emplace_back(best, b);
            truepos.emplace_back(best_true, b);
        }
        auto by_score = [](auto& x, auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); };
        std::sort(remapped.begin(), remapped.end(), by_score);
        std::sort(truepos.begin(), truepos.end(), by_score);
        const size_t m = static_cast<size_t>(top_k - 1);  // the local block is forced
        // Every picked candidate scores >= the m-th best (to rounding), every other one <= it.
        const double kth = remapped[m - 1].first, tol = 1e-4 * (1.0 + std::fabs(kth));
        std::set<int32_t> picked(sel.blocks.begin(), sel.blocks.end());
        picked.erase(static_cast<int32_t>(local));
        QCOMPARE(picked.size(), m);
        for (const auto& [score, b] : remapped) {
            if (picked.count(b)) QVERIFY2(score >= kth - tol, qPrintable(QStringLiteral("picked block %1 scores %2 < %3").arg(b).arg(score).arg(kth)));
            else QVERIFY2(score <= kth + tol, qPrintable(QStringLiteral("block %1 scores %2 > %3, not picked").arg(b).arg(score).arg(kth)));
        }
        std::set<int32_t> want_true;
        for (size_t j = 0; j < m; ++j) want_true.insert(truepos[j].second);
        differ_true += want_true != picked;
    }
    qInfo("%zu selections, %d far (query, block) pairs; %d selections differ from true-position ranking", sels.size(),
          far_blocks, differ_true);
    QVERIFY(far_blocks > 0);
    QVERIFY(differ_true > 0);
}

void TstMsaAttention::tokenMass() {
    // MsaConfig::token_mass: a decode call records, per selected block, each token's softmax
    // probability averaged over the group's heads (double-precision reference over the selected
    // blocks), summing to the block's mass; prefill calls record none; off by default.
    const int n_head = 6, n_kv = 2, G = n_head / n_kv, hd = 24, B = 16, n_ctx = 16 * 11 + 7;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, B);
    kv.set_n_past(n_ctx);
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = 4;
    sl::MsaAttention msa(cfg);
    sl::ThreadPool pool(2);
    const auto qp = sl::test::random_floats(static_cast<size_t>(8 * n_head * hd));
    std::vector<float> out(qp.size());
    msa.forward(make_call(n_head, n_kv, hd, n_ctx - 9, 8, qp.data(), out.data()), kv, pool);  // prefill: none
    for (const auto& sel : msa.last_selections(0)) QVERIFY(sel.token_mass.empty());
    const auto q = sl::test::random_floats(static_cast<size_t>(n_head * hd));
    const auto call = make_call(n_head, n_kv, hd, n_ctx - 1, 1, q.data(), out.data());
    msa.forward(call, kv, pool);
    for (const auto& sel : msa.last_selections(0)) QVERIFY(sel.token_mass.empty());  // off
    msa.set_token_mass(true);
    msa.forward(call, kv, pool);
    const auto& sels = msa.last_selections(0);
    QCOMPARE(sels.size(), size_t{n_kv});
    double worst = 0;
    for (const auto& sel : sels) {
        QCOMPARE(sel.token_mass.size(), sel.blocks.size() * B);
        std::vector<double> ref(sel.token_mass.size(), 0.0);
        for (int hh = 0; hh < G; ++hh) {
            const int h = sel.kv_head * G + hh;
            std::vector<double> sc(ref.size(), -1e300);
            double mx = -1e300;
            for (size_t bi = 0; bi < sel.blocks.size(); ++bi)
                for (int j = 0; j < B; ++j) {
                    const int64_t p = static_cast<int64_t>(sel.blocks[bi]) * B + j;
                    if (p > call.pos0) continue;
                    double d = 0;
                    for (int i = 0; i < hd; ++i) d += static_cast<double>(q[static_cast<size_t>(h * hd + i)]) * kv.k(0, p)[sel.kv_head * hd + i];
                    sc[bi * B + static_cast<size_t>(j)] = d * call.scale;
                    mx = std::max(mx, d * call.scale);
                }
            double z = 0;
            for (double& x : sc) z += x = x < -1e299 ? 0.0 : std::exp(x - mx);
            for (size_t i = 0; i < ref.size(); ++i) ref[i] += sc[i] / z / G;
        }
        for (size_t bi = 0; bi < sel.blocks.size(); ++bi) {
            double sum = 0;
            for (int j = 0; j < B; ++j) {
                const size_t i = bi * B + static_cast<size_t>(j);
                worst = std::max(worst, std::fabs(sel.token_mass[i] - ref[i]));
                sum += sel.token_mass[i];
            }
            QVERIFY2(std::fabs(sum - sel.mass[bi]) < 1e-5, qPrintable(QString::number(sum - sel.mass[bi])));
        }
    }
    qInfo("token mass vs reference: max abs error %.2e", worst);
    QVERIFY2(worst < 1e-5, qPrintable(QString::number(worst)));
}

void TstMsaAttention::lastQuerySelectsAlone() {
    // The last query of a call (whose logits the model returns) gets the selection a decode call of
    // that position makes, not its query block's shared one: a prefill call of n queries gives the
    // last row exactly what a call of n - 1 followed by a call of 1 gives it. The shared selection
    // differs for some group here, so a shared last query fails this.
    const int n_head = 6, n_kv = 2, hd = 24, B = 16, top_k = 3, n_ctx = 16 * 11 + 9;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, B);
    kv.set_n_past(n_ctx);
    const int pos0 = 16 * 10 + 5, nt = n_ctx - pos0;  // two query blocks, the last holding 9 queries
    auto q = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd), -2, 2);
    sl::ThreadPool pool(2);
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = top_k;
    sl::MsaAttention whole(cfg), split(cfg);
    std::vector<float> out(q.size()), out_s(q.size());
    whole.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
    std::vector<std::vector<int32_t>> shared;  // the last query block's selection per group, the last query excluded
    const auto& sels = whole.last_selections(0);
    QCOMPARE(static_cast<int>(sels.size()), 3 * n_kv);
    for (const auto& s : sels) {
        if (s.q_pos0 == 16 * 11) {
            QCOMPARE(s.n_queries, 8);
            shared.push_back(s.blocks);
        }
    }
    QCOMPARE(static_cast<int>(shared.size()), n_kv);
    split.forward(make_call(n_head, n_kv, hd, pos0, nt - 1, q.data(), out_s.data()), kv, pool);
    const size_t last = static_cast<size_t>(nt - 1) * n_head * hd;
    split.forward(make_call(n_head, n_kv, hd, n_ctx - 1, 1, q.data() + last, out_s.data() + last), kv, pool);
    int differs = 0;
    for (int g = 0; g < n_kv; ++g) {
        const sl::Selection& own = sels[static_cast<size_t>(2 * n_kv + g)];
        const sl::Selection& decode = split.last_selections(0)[static_cast<size_t>(g)];
        QCOMPARE(own.q_pos0, int64_t{n_ctx - 1});
        QCOMPARE(own.n_queries, 1);
        QCOMPARE(own.blocks, decode.blocks);
        differs += own.blocks != shared[static_cast<size_t>(g)];
    }
    QVERIFY2(differs > 0, "the inputs must make the shared and the own selection differ");
    for (size_t i = last; i < q.size(); ++i) QCOMPARE(out[i], out_s[i]);
}

void TstMsaAttention::parseScoring() {
    sl::MsaConfig c;
    sl::parse_msa_scoring("hybrid8/group-mean", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.hybrid_factor == 8 && c.index_query == sl::IndexQuery::GroupMean);
    sl::parse_msa_scoring("block-max", c);
    QVERIFY(c.scoring == sl::BlockScoring::BlockMax && c.index_query == sl::IndexQuery::HeadMax);
    sl::parse_msa_scoring("hybrid", c);  // keeps the factor it has
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.hybrid_factor == 8);
    QVERIFY(c.decode_hybrid_factor == 0);
    sl::parse_msa_scoring("hybrid8d4/group-mean", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.hybrid_factor == 8 && c.decode_hybrid_factor == 4);
    sl::parse_msa_scoring("mean-key/head-max", c);
    QVERIFY(c.scoring == sl::BlockScoring::MeanKey && c.decode_hybrid_factor == 0);
    sl::parse_msa_scoring("hybrid8d4/group-mean/w32", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.hybrid_factor == 8 && c.decode_hybrid_factor == 4 &&
            c.index_query == sl::IndexQuery::GroupMean && c.window_blocks == 32);
    QVERIFY(!c.sink);
    sl::parse_msa_scoring("block-max/w3", c);
    QVERIFY(c.scoring == sl::BlockScoring::BlockMax && c.index_query == sl::IndexQuery::HeadMax && c.window_blocks == 3);
    sl::parse_msa_scoring("hybrid8/group-mean/sink/w16", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.index_query == sl::IndexQuery::GroupMean && c.sink &&
            c.window_blocks == 16);
    sl::parse_msa_scoring("mean-key/sink", c);
    QVERIFY(c.scoring == sl::BlockScoring::MeanKey && c.index_query == sl::IndexQuery::HeadMax && c.sink && c.window_blocks == 0);
    sl::parse_msa_scoring("hybrid8/group-mean/sink/w16/p95", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.sink && c.window_blocks == 16 && c.top_p == 0.95f && c.top_p_grow == 4);
    sl::parse_msa_scoring("block-max/p90x8", c);
    QVERIFY(c.scoring == sl::BlockScoring::BlockMax && !c.sink && c.window_blocks == 0 && c.top_p == 0.9f && c.top_p_grow == 8);
    QCOMPARE(c.top_p_full_ctx, 0);
    sl::parse_msa_scoring("hybrid8/group-mean/sink/w16/p98x8/c32k", c);
    QVERIFY(c.scoring == sl::BlockScoring::Hybrid && c.sink && c.window_blocks == 16 && c.top_p == 0.98f && c.top_p_grow == 8);
    QCOMPARE(c.top_p_full_ctx, 32768);
    QVERIFY(sl::MsaAttention(c).signature().find(" p98x8 full32768 ") != std::string::npos);
    sl::parse_msa_scoring("hybrid8/group-mean/sink/w16/p98x8", c);
    QCOMPARE(c.top_p_full_ctx, 0);
    sl::parse_msa_scoring("mean-key", c);  // no window without /wN, no sink without /sink, no growth without /pN
    QVERIFY(c.scoring == sl::BlockScoring::MeanKey && c.window_blocks == 0 && !c.sink && c.top_p == 0.0f);
    for (const char* bad : {"", "hybridx", "hybrid0", "hybrid8d", "hybrid8d0", "hybridd4", "hybrid8dx", "hybrid99999",
                            "block-max/", "dense", "mean-key/group", "block-max/w", "block-max/wx",
                            "hybrid8/group-mean/w-1", "block-max/w1/head-max", "/w4", "block-max/w123456",
                            "block-max/w4/sink", "/sink", "block-max/sinks", "sink", "block-max/p", "block-max/p0",
                            "block-max/p101", "block-max/px4", "block-max/p95x", "block-max/p95x0", "block-max/p9.5",
                            "block-max/p95/w4", "hybrid8/p95/sink", "block-max/c32k", "block-max/w4/c32k",
                            "block-max/p95/c", "block-max/p95/c32", "block-max/p95/c0k", "block-max/p95/ck",
                            "block-max/p95/c32kk", "block-max/p95/c32k/sink", "block-max/c32k/p95"}) {
        sl::MsaConfig d = c;
        try {
            sl::parse_msa_scoring(bad, d);
            QFAIL(qPrintable(QStringLiteral("accepted '%1'").arg(QString::fromLatin1(bad))));
        } catch (const sl::Error& e) {
            QVERIFY(std::string(e.what()).find(bad) != std::string::npos);
        }
        QVERIFY(d.scoring == c.scoring && d.hybrid_factor == c.hybrid_factor && d.window_blocks == c.window_blocks &&
                d.sink == c.sink && d.top_p == c.top_p);  // unchanged on error
    }
}

void TstMsaAttention::decodeShortlistFactor() {
    // MsaConfig::decode_hybrid_factor applies to calls of one query only. A decode factor of 1
    // shortlists exactly the blocks to select, so decode selects as mean-key scoring does, while a
    // prefill call keeps the prefill factor's selection.
    const int n_head = 8, n_kv = 4, hd = 24, B = 16, top_k = 3, n_ctx = 16 * 40 + 9;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, B);
    kv.set_n_past(n_ctx);
    const int pos0 = n_ctx - 20, nt = 19;
    auto q = sl::test::random_floats(static_cast<size_t>((nt + 1) * n_head * hd), -2, 2);
    sl::ThreadPool pool(2);
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = top_k;
    cfg.scoring = sl::BlockScoring::Hybrid;
    cfg.hybrid_factor = 8;
    sl::MsaConfig dec = cfg, mk = cfg;
    dec.decode_hybrid_factor = 1;
    mk.scoring = sl::BlockScoring::MeanKey;
    sl::MsaAttention a(dec), h8(cfg), mean_key(mk);
    QVERIFY(a.signature() != h8.signature());
    std::vector<float> out(q.size());
    auto blocks = [](const sl::MsaAttention& m) {
        std::vector<std::vector<int32_t>> b;
        for (const auto& s : m.last_selections(0)) b.push_back(s.blocks);
        return b;
    };
    a.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
    h8.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
    QCOMPARE(blocks(a), blocks(h8));  // prefill: the prefill factor, whatever the decode one
    // Decode: every query selects as mean-key does. One query's shortlist of 8 x 3 of 40 blocks can
    // hold mean-key's top 3 by chance (about one query in ten), so several fresh queries are tried and
    // at least one must tell the two factors apart.
    const size_t row = static_cast<size_t>(n_head) * hd;
    int differs = 0;
    const int n_decode = 12;
    for (int t = 0; t < n_decode; ++t) {
        auto qd = sl::test::random_floats(row, -2, 2);
        std::vector<float> od(row);
        for (sl::MsaAttention* m : {&a, &h8, &mean_key})
            m->forward(make_call(n_head, n_kv, hd, n_ctx - 1, 1, qd.data(), od.data()), kv, pool);
        QCOMPARE(blocks(a), blocks(mean_key));
        differs += blocks(a) != blocks(h8);
    }
    qInfo("decode queries whose selection differs between factor 1 and factor 8: %d of %d", differs, n_decode);
    QVERIFY2(differs > 0, "the inputs must make the two factors select differently in decode");
}


// BlockIndex::update split over a pool (a restored context's first call summarizes every block)
// gives the serial summaries bit for bit, relative ones included, for a whole build and for an
// update from inside the context (the partial last block re-summarized). F16 pages of 16: every
// block's keys are converted into the thread's scratch.
void TstMsaAttention::indexSameOnAPool() {
    const int n_kv = 3, hd = 48, B = 16, n_ctx = 1000;
    sl::KvCacheOptions f16;
    f16.type = sl::KvType::F16;
    f16.block_size = B;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd, f16);
    fill_structured(kv, 0, n_ctx, B);
    const sl::RopeShift rope(hd, 32, 10000.0f, 1.0f, true);
    sl::BlockIndex serial(B, n_kv, hd, rope);
    serial.update(kv, 0, 0, 611);
    serial.update(kv, 0, 600, 997);
    for (int threads : {2, 3, 5}) {
        sl::ThreadPool pool(threads);
        sl::BlockIndex split(B, n_kv, hd, rope);
        split.update(kv, 0, 0, 611, &pool);
        split.update(kv, 0, 600, 997, &pool);
        QCOMPARE(split.n_blocks(), serial.n_blocks());
        for (int64_t b = 0; b < serial.n_blocks(); ++b)
            for (int h = 0; h < n_kv; ++h) {
                QVERIFY(std::equal(split.kmin(b, h), split.kmin(b, h) + 3 * hd, serial.kmin(b, h)));
                QVERIFY(std::equal(split.rkmin(b, h), split.rkmin(b, h) + 3 * hd, serial.rkmin(b, h)));
                QCOMPARE(split.kabs_max(b, h), serial.kabs_max(b, h));
                QCOMPARE(split.rkabs_max(b, h), serial.rkabs_max(b, h));
            }
    }
}

// The sparse branch splits its work by rows and blocks into parts claimed by free threads: every
// output row must come out bitwise the same with 1, 2, 3, 5 or 32 threads (each row's online softmax
// runs over its blocks in the same order whatever the split), the selections the same, the masses
// equal to rounding. Prefill of a chunk (remapped positions, sink, window and growth), then decode.
void TstMsaAttention::sameForEveryThreadCount() {
    // Blocks of 32: 8 query blocks x 3 groups, so 32 threads split a selection's tokens into
    // parts of fewer than 16 rows, 1 thread not at all.
    const int n_head = 9, n_kv = 3, hd = 64, B = 32, n_ctx = 517, pos0 = 260;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_structured(kv, 0, n_ctx, B);
    Roped r(kv, n_head, pos0, hd, true);
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = 3;
    parse_msa_scoring("hybrid4/group-mean/sink/w2/p90x3", cfg);
    cfg.positions = sl::PositionMode::Remap;
    cfg.remap_window = 64;
    std::vector<float> first_out, first_dec;
    std::vector<sl::Selection> first_sel;
    for (int threads : {1, 2, 3, 5, 32}) {
        sl::ThreadPool pool(threads);
        sl::MsaAttention msa(cfg);
        // The chunk [pos0, n_ctx - 1) as prefill, then the last token as decode.
        sl::AttentionCall pre = r.call;
        pre.n_tokens = n_ctx - 1 - pos0;
        msa.forward(pre, kv, pool);
        sl::AttentionCall dec = r.call;
        dec.pos0 = n_ctx - 1;
        dec.n_tokens = 1;
        dec.q = r.q.data() + static_cast<size_t>(pre.n_tokens) * n_head * hd;
        std::vector<float> dout(static_cast<size_t>(n_head) * hd);
        dec.out = dout.data();
        const std::vector<float> out(r.out.begin(), r.out.begin() + static_cast<std::ptrdiff_t>(pre.n_tokens) * n_head * hd);
        const auto pre_sel = msa.last_selections(0);
        msa.forward(dec, kv, pool);
        if (threads == 1) {
            first_out = out;
            first_dec = dout;
            first_sel = pre_sel;
            QVERIFY(pre_sel.size() > 3);
            continue;
        }
        QVERIFY2(out == first_out, qPrintable(QString("prefill output differs with %1 threads").arg(threads)));
        QVERIFY2(dout == first_dec, qPrintable(QString("decode output differs with %1 threads").arg(threads)));
        QCOMPARE(pre_sel.size(), first_sel.size());
        for (size_t i = 0; i < pre_sel.size(); ++i) {
            QCOMPARE(pre_sel[i].blocks, first_sel[i].blocks);
            QCOMPARE(pre_sel[i].mass.size(), first_sel[i].mass.size());
            for (size_t b = 0; b < pre_sel[i].mass.size(); ++b)
                QVERIFY(std::fabs(pre_sel[i].mass[b] - first_sel[i].mass[b]) < 1e-6f);
        }
    }
}

QTEST_APPLESS_MAIN(TstMsaAttention)
#include "tst_msa_attention.moc"
