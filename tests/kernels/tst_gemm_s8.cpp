// kernels::gemm_s8 (int8 weights and activations, per-row and per-token scales): the packing and
// its compensation sums, the activation quantizer's tiers bit-identical, the AVX-512 VNNI product
// equal to the scalar reference (the integer sums are exact: only the final scaling rounds), and
// both near the float64 product of the dequantized operands and near the float product, on fresh
// random inputs of odd sizes (every partial register tile, columns off the 32 grid, sub-ranges,
// n not a multiple of 4, inputs with outliers).
#include <QTest>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_s8.h"
#include "tests/common/test_support.h"

using sl::kernels::Isa;

class TstGemmS8 : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void weightsRoundTrip();
    void quantizerTiersAgree();
    void matchesReference_data();
    void matchesReference();
};

void TstGemmS8::weightsRoundTrip() {
    const int64_t d = 37, n = 70;
    auto W = sl::test::random_floats(static_cast<size_t>(d * n));
    W[5] = 0.0f;
    for (int64_t k = 0; k < n; ++k) W[static_cast<size_t>(3 * n + k)] = 0.0f;  // an all-zero row
    const sl::kernels::S8Weights q = sl::kernels::quantize_weights(W.data(), n, d, n);
    QCOMPARE(q.packed.size(), size_t(64 * 72));  // two panels, n rounded up to 72
    for (int64_t j = 0; j < d; ++j) {
        float amax = 0.0f;
        int32_t sum = 0;
        for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(W[static_cast<size_t>(j * n + k)]));
        for (int64_t k = 0; k < n; ++k) {
            const float w = W[static_cast<size_t>(j * n + k)];
            const float got = sl::kernels::s8_weight(q, j, k);
            // Within half a step of the row's scale; the row's largest weight exact up to rounding.
            QVERIFY2(std::fabs(got - w) <= 0.5f * q.scale[static_cast<size_t>(j)] + 1e-7f,
                     qPrintable(QStringLiteral("row %1 col %2: %3 vs %4").arg(j).arg(k).arg(got).arg(w)));
            sum += static_cast<int32_t>(std::lround(got / q.scale[static_cast<size_t>(j)]));
        }
        QCOMPARE(q.comp[static_cast<size_t>(j)], 128 * sum);
        if (j == 3) QCOMPARE(q.scale[3], 1.0f);
        else QCOMPARE(q.scale[static_cast<size_t>(j)], 1.0f / (127.0f / amax));
    }
    // Padding (columns 37..63, k 70..71) is zero.
    for (int64_t j = 0; j < 64; ++j)
        for (int64_t k = 0; k < 72; ++k)
            if (j >= d || k >= n)
                QCOMPARE(int(q.packed[static_cast<size_t>((j / 32) * 32 * 72 + ((k / 4) * 32 + j % 32) * 4 + k % 4)]), 0);
}

void TstGemmS8::quantizerTiersAgree() {
    for (const int64_t n : {1, 5, 16, 37, 384, 1537}) {
        const int64_t tokens = 7, ldx = n + 3, n4 = sl::kernels::s8_row_bytes(n);
        auto X = sl::test::random_floats(static_cast<size_t>(tokens * ldx), -3.0f, 3.0f);
        for (int64_t k = 0; k < n; ++k) X[static_cast<size_t>(2 * ldx + k)] = 0.0f;  // a zero row
        X[static_cast<size_t>(4 * ldx)] = 40.0f;                                   // an outlier
        std::vector<uint8_t> a(static_cast<size_t>(tokens * n4), 1), b(a.size(), 2);
        std::vector<float> sa(static_cast<size_t>(tokens)), sb(sa.size());
        const Isa before = sl::kernels::active_isa();
        sl::kernels::set_active_isa(Isa::Scalar);
        sl::kernels::quantize_tokens(X.data(), ldx, tokens, n, a.data(), sa.data());
        sl::kernels::set_active_isa(sl::kernels::max_supported_isa());
        sl::kernels::quantize_tokens(X.data(), ldx, tokens, n, b.data(), sb.data());
        sl::kernels::set_active_isa(before);
        QCOMPARE(a, b);
        QCOMPARE(sa, sb);
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t k = 0; k < n4; ++k) {
                const uint8_t q = a[static_cast<size_t>(t * n4 + k)];
                QVERIFY(q >= 1);  // |Xq| <= 127
                if (k >= n || t == 2) QCOMPARE(int(q), 128);
                else
                    QVERIFY(std::fabs((q - 128) * sa[static_cast<size_t>(t)] -
                                      X[static_cast<size_t>(t * ldx + k)]) <=
                            0.5f * sa[static_cast<size_t>(t)] * 1.0001f);
            }
    }
}

void TstGemmS8::matchesReference_data() {
    QTest::addColumn<int>("isa");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("d");
    QTest::addColumn<int>("c0");
    QTest::addColumn<int>("c1");
    QTest::addColumn<bool>("bias");
    for (Isa isa : {Isa::Scalar, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(sl::kernels::max_supported_isa())) {
            qInfo("%s: not supported by this CPU, its rows are skipped", sl::kernels::isa_name(isa));
            continue;
        }
        const char* name = sl::kernels::isa_name(isa);
        const int i = static_cast<int>(isa);
        for (int t : {1, 2, 3, 5, 7, 8, 9, 15, 97, 203})
            QTest::addRow("%s t=%d 384x384", name, t) << i << t << 384 << 384 << 0 << 384 << true;
        QTest::addRow("%s odd 37x53", name) << i << 11 << 37 << 53 << 0 << 53 << true;
        QTest::addRow("%s odd no bias", name) << i << 9 << 129 << 67 << 0 << 67 << false;
        QTest::addRow("%s sub-range", name) << i << 8 << 100 << 200 << 32 << 137 << true;
        QTest::addRow("%s ffn 1536", name) << i << 19 << 384 << 1536 << 0 << 1536 << true;
        QTest::addRow("%s ffn down", name) << i << 17 << 1537 << 384 << 0 << 384 << true;
        QTest::addRow("%s narrow", name) << i << 6 << 5 << 3 << 0 << 3 << true;
        QTest::addRow("%s vocab-like", name) << i << 2 << 384 << 5187 << 0 << 5187 << false;
    }
}

void TstGemmS8::matchesReference() {
    QFETCH(int, isa);
    QFETCH(int, tokens);
    QFETCH(int, n);
    QFETCH(int, d);
    QFETCH(int, c0);
    QFETCH(int, c1);
    QFETCH(bool, bias);
    const int64_t ldx = n + 3, ldy = d + 5, n4 = sl::kernels::s8_row_bytes(n);
    auto X = sl::test::random_floats(static_cast<size_t>(tokens * ldx));
    X[0] = 9.0f;  // an outlier in the first token
    const auto W = sl::test::random_floats(static_cast<size_t>(n * d));  // (d, n)
    const auto b = sl::test::random_floats(static_cast<size_t>(d));
    const float* bp = bias ? b.data() : nullptr;
    const sl::kernels::S8Weights q = sl::kernels::quantize_weights(W.data(), n, d, n);
    std::vector<uint8_t> Xq(static_cast<size_t>(tokens * n4));
    std::vector<float> xs(static_cast<size_t>(tokens));
    sl::kernels::quantize_tokens(X.data(), ldx, tokens, n, Xq.data(), xs.data());

    std::vector<float> got(static_cast<size_t>(tokens * ldy), 7.0f), ref(got.size(), 7.0f);
    const Isa before = sl::kernels::active_isa();
    sl::kernels::set_active_isa(static_cast<Isa>(isa));
    sl::kernels::gemm_s8(Xq.data(), xs.data(), tokens, q, bp, got.data(), ldy, c0, c1);
    sl::kernels::set_active_isa(before);
    sl::kernels::ref::gemm_s8(Xq.data(), xs.data(), tokens, q, bp, ref.data(), ldy, c0, c1);
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < ldy; ++j)
            if (j < c0 || j >= c1) QCOMPARE(got[static_cast<size_t>(t * ldy + j)], 7.0f);
    // vs the reference: the same integer sums, the same scaling: equal up to float rounding. vs
    // float64 over the dequantized operands: float rounding. vs the float product: the
    // quantization error (int8 x int8 of uniform values: ~1 % relative RMS; up to ~3.5 % for a
    // single token, whose outlier of 9 coarsens its scale; a wrong sum is off by ~100 %).
    std::vector<float> g, r, deq, exact;
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = c0; j < c1; ++j) {
            double s = bias ? b[static_cast<size_t>(j)] : 0.0, e = s;
            for (int64_t k = 0; k < n; ++k) {
                s += double((Xq[static_cast<size_t>(t * n4 + k)] - 128) * xs[static_cast<size_t>(t)]) *
                     sl::kernels::s8_weight(q, j, k);
                e += double(X[static_cast<size_t>(t * ldx + k)]) * W[static_cast<size_t>(j * n + k)];
            }
            deq.push_back(static_cast<float>(s));
            exact.push_back(static_cast<float>(e));
            g.push_back(got[static_cast<size_t>(t * ldy + j)]);
            r.push_back(ref[static_cast<size_t>(t * ldy + j)]);
        }
    const double e_ref = sl::test::normalized_error(g.data(), r.data(), g.size());
    const double e_deq = sl::test::normalized_error(g.data(), deq.data(), g.size());
    const double e_exact = sl::test::normalized_error(g.data(), exact.data(), g.size());
    // The tile and the reference scale and add the bias in their own order: a couple of float
    // roundings apart per element, which on a handful of outputs (the narrow row: 18) can reach
    // ~1 float epsilon in normalized error (1.05e-7 seen in CI); a wrong sum is off by ~1.
    constexpr double kRounding = 4.0 * std::numeric_limits<float>::epsilon();
    QVERIFY2(e_ref < kRounding, qPrintable(QStringLiteral("vs reference %1").arg(e_ref)));
    QVERIFY2(e_deq < 1e-6, qPrintable(QStringLiteral("vs dequantized %1").arg(e_deq)));
    QVERIFY2(e_exact < 8e-2, qPrintable(QStringLiteral("vs float %1").arg(e_exact)));
}

QTEST_GUILESS_MAIN(TstGemmS8)
#include "tst_gemm_s8.moc"
