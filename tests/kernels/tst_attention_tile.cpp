// The sparse branch's tile kernel (attention_tile.h) on every ISA tier against attention written
// out in double precision, and the row-by-row path likewise: two blocks in a row (the second rescales the first's state), odd sizes,
// strided values, padded transposed keys.
#include <QTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/common/test_support.h"

using namespace sl::kernels;

class TstAttentionTile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void transposePads();
    void tiers_data();
    void tiers();
    void maxDotTiers_data() { tiers_data(); }
    void maxDotTiers();
    void cleanup() { set_active_isa(max_supported_isa()); }
};

void TstAttentionTile::transposePads() {
    const int n = 21, d = 5, ldk = 40;
    auto k = sl::test::random_floats(static_cast<size_t>(n * 7));
    std::vector<float> kt(static_cast<size_t>(d * ldk), -1.0f);
    transpose_keys(kt.data(), ldk, k.data(), 7, n, d);
    for (int c = 0; c < d; ++c) {
        for (int j = 0; j < n; ++j) QCOMPARE(kt[static_cast<size_t>(c * ldk + j)], k[static_cast<size_t>(j * 7 + c)]);
        for (int j = n; j < 32; ++j) QCOMPARE(kt[static_cast<size_t>(c * ldk + j)], 0.0f);  // to tile_ldk(n)
        for (int j = 32; j < ldk; ++j) QCOMPARE(kt[static_cast<size_t>(c * ldk + j)], -1.0f);  // untouched
    }
}

void TstAttentionTile::tiers_data() {
    QTest::addColumn<int>("isa");
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
        if (static_cast<int>(isa) <= static_cast<int>(max_supported_isa())) QTest::newRow(isa_name(isa)) << static_cast<int>(isa);
}

void TstAttentionTile::tiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    int cases = 0;
    for (int d : {8, 16, 24, 31, 64, 80, 128}) {
        for (int n : {1, 7, 16, 17, 63, 100, 128}) {
            for (int R = 1; R <= kTileRows; ++R) {
                // Two blocks of n keys (the second may be shorter: a local block seen causally).
                const int n2 = std::max(1, n - 5);
                const int64_t ldk = tile_ldk(128) + 16, ldp = ldk + 3, vstride = 3 * d + 5, qstride = 2 * d + 1;
                const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                auto qs = sl::test::random_floats(static_cast<size_t>(R * qstride), -2, 2);
                auto k1 = sl::test::random_floats(static_cast<size_t>(n * d), -2, 2);
                auto k2 = sl::test::random_floats(static_cast<size_t>(n2 * d), -2, 2);
                auto v1 = sl::test::random_floats(static_cast<size_t>(n * vstride));
                auto v2 = sl::test::random_floats(static_cast<size_t>(n2 * vstride));
                if (R > 1) k2[0] += 4.0f;  // a higher max in the second block for some rows: a rescale
                std::vector<const float*> q(static_cast<size_t>(R));
                for (int r = 0; r < R; ++r) q[static_cast<size_t>(r)] = qs.data() + r * qstride;
                std::vector<float> kt(static_cast<size_t>(d * ldk), 7.0f), p(static_cast<size_t>(R * ldp));
                std::vector<float> m(static_cast<size_t>(R), -INFINITY), l(static_cast<size_t>(R), 0.0f);
                std::vector<float> acc(static_cast<size_t>(R * d), 0.0f), bsum(static_cast<size_t>(R));
                transpose_keys(kt.data(), ldk, k1.data(), d, n, d);
                attend_tile(R, q.data(), kt.data(), ldk, v1.data(), vstride, n, d, scale, m.data(), l.data(), acc.data(),
                            p.data(), ldp, bsum.data());
                transpose_keys(kt.data(), ldk, k2.data(), d, n2, d);
                attend_tile(R, q.data(), kt.data(), ldk, v2.data(), vstride, n2, d, scale, m.data(), l.data(), acc.data(),
                            p.data(), ldp, bsum.data());
                // The row-by-row path (attend_row, row-major keys) from a fresh state, for comparison.
                std::vector<float> rm(static_cast<size_t>(R), -INFINITY), rl(static_cast<size_t>(R), 0.0f);
                std::vector<float> racc(static_cast<size_t>(R * d), 0.0f), rp(static_cast<size_t>(n));
                for (int r = 0; r < R; ++r) {
                    const size_t ri = static_cast<size_t>(r);
                    attend_row(q[ri], k1.data(), d, v1.data(), vstride, n, d, scale, rm[ri], rl[ri], racc.data() + r * d, rp.data());
                    const float s2 = attend_row(q[ri], k2.data(), d, v2.data(), vstride, n2, d, scale, rm[ri], rl[ri],
                                                racc.data() + r * d, rp.data());
                    QVERIFY(std::fabs(s2 - bsum[ri]) <= 1e-5f * rl[ri]);
                    QVERIFY(std::fabs(rm[ri] - m[ri]) <= 1e-5f * (1 + std::fabs(m[ri])));  // the same max, to rounding
                }
                std::vector<float> got, want, row_got;
                for (int r = 0; r < R; ++r) {
                    std::vector<double> s;
                    auto score = [&](const std::vector<float>& k, int j) {
                        double x = 0;
                        for (int c = 0; c < d; ++c) x += static_cast<double>(q[static_cast<size_t>(r)][c]) * k[static_cast<size_t>(j * d + c)];
                        return x * scale;
                    };
                    for (int j = 0; j < n; ++j) s.push_back(score(k1, j));
                    for (int j = 0; j < n2; ++j) s.push_back(score(k2, j));
                    const double mx = *std::max_element(s.begin(), s.end());
                    double total = 0, second = 0;
                    std::vector<double> o(static_cast<size_t>(d), 0.0);
                    for (int j = 0; j < n + n2; ++j) {
                        const double e = std::exp(s[static_cast<size_t>(j)] - mx);
                        total += e;
                        if (j >= n) second += e;
                        const float* vr = j < n ? v1.data() + j * vstride : v2.data() + (j - n) * vstride;
                        for (int c = 0; c < d; ++c) o[static_cast<size_t>(c)] += e * vr[c];
                    }
                    // The state: m = the max, l and acc against it; bsum and p of the second block too.
                    QVERIFY(std::fabs(m[static_cast<size_t>(r)] - mx) <= 1e-5 * (1 + std::fabs(mx)));
                    QVERIFY(std::fabs(l[static_cast<size_t>(r)] - total) <= 1e-5 * total);
                    QVERIFY(std::fabs(bsum[static_cast<size_t>(r)] - second) <= 1e-5 * total);
                    for (int j = 0; j < n2; ++j)
                        QVERIFY(std::fabs(p[static_cast<size_t>(r * ldp + j)] - std::exp(s[static_cast<size_t>(n + j)] - mx)) <= 1e-5);
                    for (int c = 0; c < d; ++c) {
                        got.push_back(acc[static_cast<size_t>(r * d + c)] / l[static_cast<size_t>(r)]);
                        row_got.push_back(racc[static_cast<size_t>(r * d + c)] / rl[static_cast<size_t>(r)]);
                        want.push_back(static_cast<float>(o[static_cast<size_t>(c)] / total));
                    }
                }
                const double err = sl::test::normalized_error(got.data(), want.data(), got.size());
                QVERIFY2(err < 1e-5, qPrintable(QStringLiteral("d=%1 n=%2 R=%3 err %4").arg(d).arg(n).arg(R).arg(err)));
                const double row_err = sl::test::normalized_error(row_got.data(), want.data(), row_got.size());
                QVERIFY2(row_err < 1e-5, qPrintable(QStringLiteral("attend_row d=%1 n=%2 err %3").arg(d).arg(n).arg(row_err)));
                ++cases;
            }
        }
    }
    QCOMPARE(cases, 7 * 7 * kTileRows);
}

// max_dot_tile: the max of the block's scores against double precision, and bitwise the same max
// whichever rows share a tile (the exact block score MSA compares across calls).
void TstAttentionTile::maxDotTiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    for (int d : {8, 17, 24, 64, 128}) {
        for (int n : {1, 9, 16, 45, 128}) {
            const int64_t ldk = tile_ldk(n);
            auto qs = sl::test::random_floats(static_cast<size_t>(kTileRows * d), -2, 2);
            auto k = sl::test::random_floats(static_cast<size_t>(n * d), -2, 2);
            std::vector<float> kt(static_cast<size_t>(d * ldk)), p(static_cast<size_t>(kTileRows * ldk));
            transpose_keys(kt.data(), ldk, k.data(), d, n, d);
            const float* q[kTileRows];
            for (int r = 0; r < kTileRows; ++r) q[r] = qs.data() + r * d;
            double want = -1e300, scale = 0;
            for (int r = 0; r < kTileRows; ++r)
                for (int j = 0; j < n; ++j) {
                    double s = 0, a = 0;
                    for (int c = 0; c < d; ++c) {
                        s += static_cast<double>(q[r][c]) * k[static_cast<size_t>(j * d + c)];
                        a += std::fabs(static_cast<double>(q[r][c]) * k[static_cast<size_t>(j * d + c)]);
                    }
                    want = std::max(want, s);
                    scale = std::max(scale, a);
                }
            const float all = max_dot_tile(kTileRows, q, kt.data(), ldk, n, d, p.data(), ldk);
            QVERIFY2(std::fabs(all - want) <= 1e-6 * scale, qPrintable(QStringLiteral("d=%1 n=%2").arg(d).arg(n)));
            float one_by_one = -INFINITY;
            for (int r = 0; r < kTileRows; ++r) one_by_one = std::max(one_by_one, max_dot_tile(1, q + r, kt.data(), ldk, n, d, p.data(), ldk));
            QCOMPARE(all, one_by_one);
            const float pairs = std::max(max_dot_tile(2, q, kt.data(), ldk, n, d, p.data(), ldk),
                                         max_dot_tile(2, q + 2, kt.data(), ldk, n, d, p.data(), ldk));
            QCOMPARE(all, pairs);
        }
    }
}

QTEST_APPLESS_MAIN(TstAttentionTile)
#include "tst_attention_tile.moc"
