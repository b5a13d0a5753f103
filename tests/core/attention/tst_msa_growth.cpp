// MSA's mass-adaptive growth (SelectParams::mass, MsaConfig::top_p): the grown selection against an
// independent greedy growth from the cache's keys, focused and diffuse cases, and the attention with
// growth against dense.
#include <QTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/attention/block_index.h"
#include "core/attention/block_select.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "tests/common/test_support.h"
#include "tests/core/attention/host_kv.h"
#include "tests/core/attention/msa_fixtures.h"

using sl::test::fill_random;
using sl::test::fill_structured;
using sl::test::make_call;

class TstMsaGrowth : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void massGrowth();
    void massGrowthAttention();
    void growthRoomShrinksPastFull();
};

void TstMsaGrowth::massGrowth() {
    // SelectParams::mass: the top-k selection grown by the blocks of most estimated mass until it
    // holds the target, at most top_k * (grow - 1) blocks more. The estimate, computed here from the
    // cache's keys (not the block index): per row, n_b exp(scale q · mean key of b) normalized over
    // the visible blocks, averaged over kMassRows rows spread over the rows (the last included).
    const int n_kv = 2, hd = 40, B = 16, n_blocks = 45;
    const int n = n_blocks * B;
    sl::test::HostKv kv(1, n, n_kv, hd);
    fill_structured(kv, 0, n, B);
    kv.set_n_past(n);
    sl::BlockIndex index(B, n_kv, hd);
    index.update(kv, 0, 0, n);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<double> kmean(static_cast<size_t>(n_blocks * n_kv * hd), 0.0);
    std::vector<float> buf(static_cast<size_t>(B * hd));
    for (int b = 0; b < n_blocks; ++b)
        for (int g = 0; g < n_kv; ++g) {
            const float* K = kv.cache().k_span(0, g, static_cast<int64_t>(b) * B, B, buf.data());
            const size_t at = static_cast<size_t>((b * n_kv + g) * hd);
            for (int j = 0; j < B; ++j)
                for (int i = 0; i < hd; ++i) kmean[at + static_cast<size_t>(i)] += K[j * hd + i] / double(B);
        }
    sl::SelectScratch scratch;
    sl::SelectStats st;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int grown = 0, capped = 0, stopped = 0;
    for (int trial = 0; trial < 36; ++trial) {
        const int g = trial % n_kv;
        const int64_t local = n_blocks - 1 - trial % 4;
        const int n_rows = std::array{1, 5, 36}[static_cast<size_t>(trial % 3)];
        sl::SelectParams base;
        base.top_k = 3 + trial % 4;
        base.window = trial % 5 == 1 ? 3 : 0;
        base.sink = trial % 4 == 1;
        base.scoring = trial % 2 ? sl::BlockScoring::Hybrid : sl::BlockScoring::BlockMax;
        sl::SelectParams p = base;
        p.mass = 0.5f + 0.1f * static_cast<float>(trial % 5);
        p.grow = 2 + trial % 3;
        p.scale = scale;
        p.mass_rows_per_query = n_rows == 36 && trial % 4 == 0 ? 3 : 1;  // 12 queries of 3 heads
        const float amp = trial % 6 < 2 ? 0.3f : 2.0f;  // small queries: flat estimates
        std::vector<float> rows(static_cast<size_t>(n_rows * hd));
        for (auto& x : rows) x = amp * nd(sl::test::rng());
        std::vector<int32_t> a, b;
        sl::select_blocks(index, kv, 0, g, rows.data(), n_rows, hd, local, base, scratch, a, st);
        sl::select_blocks(index, kv, 0, g, rows.data(), n_rows, hd, local, p, scratch, b, st);
        QVERIFY(std::is_sorted(b.begin(), b.end()));
        QVERIFY(std::includes(b.begin(), b.end(), a.begin(), a.end()));
        // The reference estimate and the greedy growth.
        const int per = p.mass_rows_per_query, nq = n_rows / per;
        const int R = std::min(nq, sl::kMassRows) * per;
        std::vector<double> imp(static_cast<size_t>(local + 1), 0.0), e(imp.size());
        for (int i = 0; i < R; ++i) {
            const float* q = rows.data() + (((i / per + 1) * nq / (R / per) - 1) * per + i % per) * hd;
            double mx = -1e300, z = 0;
            for (int64_t blk = 0; blk <= local; ++blk) {
                double d = 0;
                for (int x = 0; x < hd; ++x) d += double(q[x]) * kmean[static_cast<size_t>((blk * n_kv + g) * hd + x)];
                e[static_cast<size_t>(blk)] = scale * d + std::log(double(B));
                mx = std::max(mx, e[static_cast<size_t>(blk)]);
            }
            for (auto& x : e) z += x = std::exp(x - mx);
            for (size_t blk = 0; blk < e.size(); ++blk) imp[blk] += e[blk] / z / R;
        }
        double have = 0;
        for (const int32_t blk : a) have += imp[static_cast<size_t>(blk)];
        std::vector<std::pair<double, int32_t>> rest;
        for (int64_t blk = 0; blk <= local; ++blk)
            if (!std::binary_search(a.begin(), a.end(), static_cast<int32_t>(blk))) rest.emplace_back(imp[static_cast<size_t>(blk)], static_cast<int32_t>(blk));
        std::sort(rest.begin(), rest.end(), [](auto& x, auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });
        const size_t room = static_cast<size_t>(p.top_k * (p.grow - 1));
        std::vector<int32_t> want = a;
        bool near_target = std::fabs(have - p.mass) < 1e-4;
        for (size_t i = 0; i < std::min(room, rest.size()) && have < p.mass; ++i) {
            want.push_back(rest[i].second);
            have += rest[i].first;
            near_target = near_target || std::fabs(have - p.mass) < 1e-4;
        }
        std::sort(want.begin(), want.end());
        if (!near_target) QCOMPARE(b, want);
        else QVERIFY(std::abs(static_cast<int>(b.size()) - static_cast<int>(want.size())) <= 1);  // rounding at the target
        QVERIFY(b.size() <= a.size() + room);
        grown += b.size() > a.size();
        capped += b.size() == a.size() + room;
        stopped += b.size() > a.size() && b.size() < a.size() + room;
    }
    qInfo("36 selections: %d grown, %d of them to the cap, %d stopped at the target", grown, capped, stopped);
    QVERIFY(grown > 0 && capped > 0 && stopped > 0);  // the focused case below does not grow

    // Focused: one block whose keys are a large multiple of the query holds nearly all of the
    // estimate: nothing is added. Diffuse: identical keys everywhere: the full room is added.
    sl::test::HostKv flat(1, n, 1, hd);
    const auto u = sl::test::random_floats(static_cast<size_t>(hd), -1, 1);
    for (int pos = 0; pos < n; ++pos) {
        float* k = flat.k(0, pos);
        for (int i = 0; i < hd; ++i) k[i] = pos / B == 9 ? 20.0f * u[static_cast<size_t>(i)] : 0.01f * u[static_cast<size_t>(i)];
    }
    flat.set_n_past(n);
    sl::BlockIndex fi(B, 1, hd);
    fi.update(flat, 0, 0, n);
    sl::SelectParams p;
    p.top_k = 4;
    p.mass = 0.9f;
    p.grow = 3;
    p.scale = scale;
    std::vector<float> q(u.begin(), u.end());
    for (auto& x : q) x *= 20.0f;
    std::vector<int32_t> sel;
    sl::select_blocks(fi, flat, 0, 0, q.data(), 1, hd, n_blocks - 1, p, scratch, sel, st);
    QCOMPARE(static_cast<int>(sel.size()), 4);
    QVERIFY(std::binary_search(sel.begin(), sel.end(), 9));
    for (int pos = 0; pos < n; ++pos) std::copy(u.begin(), u.end(), flat.k(0, pos));
    flat.set_n_past(n);
    fi.update(flat, 0, 0, n);
    sl::select_blocks(fi, flat, 0, 0, q.data(), 1, hd, n_blocks - 1, p, scratch, sel, st);
    QCOMPARE(static_cast<int>(sel.size()), 12);
}

void TstMsaGrowth::massGrowthAttention() {
    // MsaConfig::top_p in the attention: a target of 1 with room for every block selects every
    // visible block of each (query block, group), and the output equals dense attention; a lower
    // target's selections hold at least top_k blocks and at most top_k * top_p_grow.
    const int n_head = 6, n_kv = 2, hd = 32, B = 16, pos0 = 150, nt = 90, n_ctx = pos0 + nt;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_random(kv, 0, 0, n_ctx, -0.2f, 0.2f);  // flat scores: every block holds some mass
    kv.set_n_past(n_ctx);
    auto q = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd), -1, 1);
    std::vector<float> out(q.size()), ref(q.size());
    sl::ThreadPool pool(2);
    sl::DenseAttention dense;
    dense.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), ref.data()), kv, pool);
    for (const char* mode : {"block-max/p100x100", "hybrid8/group-mean/sink/w2/p100x100"}) {
        sl::MsaConfig cfg;
        cfg.block_size = B;
        cfg.top_k = 2;
        sl::parse_msa_scoring(mode, cfg);
        sl::MsaAttention msa(cfg);
        QVERIFY(msa.signature().find(" p100x100") != std::string::npos);
        msa.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
        for (const auto& s : msa.last_selections(0)) QCOMPARE(static_cast<int64_t>(s.blocks.size()), s.q_pos0 / B + 1);
        const double err = sl::test::normalized_error(out.data(), ref.data(), out.size());
        QVERIFY2(err < 1e-5, qPrintable(QStringLiteral("%1: %2").arg(QString::fromLatin1(mode)).arg(err)));
    }
    sl::MsaConfig cfg;
    cfg.block_size = B;
    cfg.top_k = 3;
    sl::parse_msa_scoring("hybrid8/group-mean/p60x2", cfg);
    sl::MsaAttention msa(cfg);
    msa.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
    for (const auto& s : msa.last_selections(0)) {
        const int64_t vis = s.q_pos0 / B + 1;
        QVERIFY(static_cast<int64_t>(s.blocks.size()) >= std::min<int64_t>(3, vis));
        QVERIFY(static_cast<int64_t>(s.blocks.size()) <= std::min<int64_t>(6, vis));
    }
}

void TstMsaGrowth::growthRoomShrinksPastFull() {
    // SelectParams::grow_full: the whole room top_k * (grow - 1) up to grow_full visible blocks,
    // then room * (grow_full / visible)^2, rounded down, at least 1.
    sl::SelectParams p;
    p.top_k = 16;
    p.grow = 8;
    QCOMPARE(sl::growth_room(p, 1024), int64_t{112});  // grow_full 0: whole at every length
    p.grow_full = 256;
    QCOMPARE(sl::growth_room(p, 100), int64_t{112});
    QCOMPARE(sl::growth_room(p, 256), int64_t{112});
    QCOMPARE(sl::growth_room(p, 1024), int64_t{7});     // 112 / 16
    QCOMPARE(sl::growth_room(p, 512), int64_t{28});
    QCOMPARE(sl::growth_room(p, 257), int64_t{111});    // 112 * (256 / 257)^2 = 111.13
    QCOMPARE(sl::growth_room(p, 8192), int64_t{1});     // 112 / 1024 = 0.11, at least 1
    QCOMPARE(sl::growth_room(p, int64_t{1} << 40), int64_t{1});
    p.grow = 1;
    QCOMPARE(sl::growth_room(p, 1024), int64_t{0});

    // In the attention: diffuse keys (every block holds some mass) and a target of 1, so each
    // selection takes its whole room; past /c1k (1,024 tokens = 64 blocks of 16) it is the shrunk one.
    const int n_head = 6, n_kv = 2, hd = 32, B = 16, pos0 = 1900, nt = 40, n_ctx = pos0 + nt;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd);
    fill_random(kv, 0, 0, n_ctx, -0.05f, 0.05f);
    kv.set_n_past(n_ctx);
    auto q = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd), -0.1f, 0.1f);
    std::vector<float> out(q.size());
    sl::ThreadPool pool(2);
    for (const char* mode : {"hybrid8/group-mean/sink/w2/p100x5", "hybrid8/group-mean/sink/w2/p100x5/c1k"}) {
        sl::MsaConfig cfg;
        cfg.block_size = B;
        cfg.top_k = 4;
        sl::parse_msa_scoring(mode, cfg);
        sl::MsaAttention msa(cfg);
        msa.forward(make_call(n_head, n_kv, hd, pos0, nt, q.data(), out.data()), kv, pool);
        sl::SelectParams sp;
        sp.top_k = 4;
        sp.grow = 5;
        sp.grow_full = cfg.top_p_full_ctx / B;
        for (const auto& s : msa.last_selections(0)) {
            const int64_t vis = s.q_pos0 / B + 1;
            // local + sink + 2 window blocks + 2 more by score, then the room
            const int64_t want = std::min<int64_t>(vis, 4 + 2 + sl::growth_room(sp, vis));
            QCOMPARE(static_cast<int64_t>(s.blocks.size()), want);
        }
        QVERIFY(sp.grow_full == 0 || sl::growth_room(sp, pos0 / B + 1) < 8);
    }
}

QTEST_APPLESS_MAIN(TstMsaGrowth)
#include "tst_msa_growth.moc"
