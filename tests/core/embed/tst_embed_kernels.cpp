// The encoder's kernels. kernels::gemm_f32 (its matmul) on every ISA tier the CPU has against the
// scalar reference and against a double-precision product: random inputs, odd sizes (token counts
// that leave every partial register tile, column counts off the 16/32 grid, column sub-ranges
// starting on a panel), row strides larger than the row, with and without bias; the three packings;
// and kernels::gelu_erf's fast erf against std::erf on a dense grid and on random values.
#include <QTest>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm_f32.h"
#include "tests/common/test_support.h"

using sl::kernels::Isa;

class TstEmbedKernels : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void pack();
    void matchesReference_data();
    void matchesReference();
    void gelu();
};

void TstEmbedKernels::pack() {
    const int64_t d = 37, n = 70, P = sl::kernels::kGemmPanel;
    const auto W = sl::test::random_floats(static_cast<size_t>(d * n));
    QCOMPARE(sl::kernels::packed_size(d, n), size_t(64 * 70));
    std::vector<float> Wp(sl::kernels::packed_size(d, n), 9.0f);
    sl::kernels::pack_panels(W.data(), d, n, Wp.data());
    for (int64_t j = 0; j < 64; ++j)
        for (int64_t k = 0; k < n; ++k) {
            const float want = j < d ? W[static_cast<size_t>(j * n + k)] : 0.0f;  // zero padding
            QCOMPARE(Wp[static_cast<size_t>((j / P * n + k) * P + j % P)], want);
        }
    // From rows ldw apart, and from the transpose (rows of d, ldw apart): the same panels.
    const int64_t ldw = n + 9;
    std::vector<float> strided(static_cast<size_t>(d * ldw), -1.0f),
        tr(static_cast<size_t>(n * (d + 4)), -1.0f);
    for (int64_t j = 0; j < d; ++j)
        for (int64_t k = 0; k < n; ++k) {
            strided[static_cast<size_t>(j * ldw + k)] = W[static_cast<size_t>(j * n + k)];
            tr[static_cast<size_t>(k * (d + 4) + j)] = W[static_cast<size_t>(j * n + k)];
        }
    std::vector<float> a(Wp.size(), 9.0f), b(Wp.size(), 9.0f);
    sl::kernels::pack_panels(strided.data(), ldw, d, n, a.data());
    sl::kernels::pack_panels_transposed(tr.data(), d + 4, n, d, b.data());
    QCOMPARE(a, Wp);
    QCOMPARE(b, Wp);
}

void TstEmbedKernels::matchesReference_data() {
    QTest::addColumn<int>("isa");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("d");
    QTest::addColumn<int>("c0");
    QTest::addColumn<int>("c1");
    QTest::addColumn<bool>("bias");
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(sl::kernels::max_supported_isa())) continue;
        const char* name = sl::kernels::isa_name(isa);
        const int i = static_cast<int>(isa);
        for (int t : {1, 2, 3, 4, 5, 6, 7, 13, 131})
            QTest::addRow("%s t=%d 384x384", name, t) << i << t << 384 << 384 << 0 << 384 << true;
        QTest::addRow("%s odd 37x53", name) << i << 11 << 37 << 53 << 0 << 53 << true;
        QTest::addRow("%s odd no bias", name) << i << 9 << 129 << 67 << 0 << 67 << false;
        QTest::addRow("%s sub-range", name) << i << 8 << 100 << 200 << 32 << 137 << true;
        QTest::addRow("%s ffn 1536", name) << i << 19 << 384 << 1536 << 0 << 1536 << true;
        QTest::addRow("%s ffn down", name) << i << 17 << 1536 << 384 << 0 << 384 << true;
        QTest::addRow("%s narrow", name) << i << 6 << 5 << 3 << 0 << 3 << true;
    }
}

void TstEmbedKernels::matchesReference() {
    QFETCH(int, isa);
    QFETCH(int, tokens);
    QFETCH(int, n);
    QFETCH(int, d);
    QFETCH(int, c0);
    QFETCH(int, c1);
    QFETCH(bool, bias);
    const int64_t ldx = n + 3, ldy = d + 5;  // strides larger than the rows
    const auto X = sl::test::random_floats(static_cast<size_t>(tokens * ldx));
    const auto W = sl::test::random_floats(static_cast<size_t>(n * d));  // (d, n)
    std::vector<float> Wp(sl::kernels::packed_size(d, n));
    sl::kernels::pack_panels(W.data(), d, n, Wp.data());
    const auto b = sl::test::random_floats(static_cast<size_t>(d));
    const float* bp = bias ? b.data() : nullptr;
    std::vector<float> got(static_cast<size_t>(tokens * ldy), 7.0f), ref(got.size(), 7.0f);
    const Isa before = sl::kernels::active_isa();
    sl::kernels::set_active_isa(static_cast<Isa>(isa));
    sl::kernels::gemm_f32(X.data(), ldx, tokens, n, Wp.data(), d, bp, got.data(), ldy, c0, c1);
    sl::kernels::set_active_isa(before);
    sl::kernels::ref::gemm_f32(X.data(), ldx, tokens, n, Wp.data(), d, bp, ref.data(), ldy, c0, c1);
    // Outside [c0, c1) and the row padding: untouched.
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < ldy; ++j)
            if (j < c0 || j >= c1) QCOMPARE(got[static_cast<size_t>(t * ldy + j)], 7.0f);
    // Inside: the reference to float rounding, and both near the exact (double) product.
    std::vector<float> g, r, exact;
    for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = c0; j < c1; ++j) {
            double s = bias ? b[static_cast<size_t>(j)] : 0.0;
            for (int64_t k = 0; k < n; ++k)
                s +=
                    double(X[static_cast<size_t>(t * ldx + k)]) * W[static_cast<size_t>(j * n + k)];
            exact.push_back(static_cast<float>(s));
            g.push_back(got[static_cast<size_t>(t * ldy + j)]);
            r.push_back(ref[static_cast<size_t>(t * ldy + j)]);
        }
    const double e_ref = sl::test::normalized_error(g.data(), r.data(), g.size());
    const double e_exact = sl::test::normalized_error(g.data(), exact.data(), g.size());
    QVERIFY2(e_ref < 1e-5, qPrintable(QStringLiteral("vs reference %1").arg(e_ref)));
    QVERIFY2(e_exact < 1e-5, qPrintable(QStringLiteral("vs exact %1").arg(e_exact)));
}

void TstEmbedKernels::gelu() {
    // A dense grid over [-12, 12] (beyond +-4 sqrt 2 erf is +-1 in f32) and odd-sized random input.
    std::vector<float> x;
    for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
    for (float v : sl::test::random_floats(1001, -6.0f, 6.0f)) x.push_back(v);
    std::vector<float> fast = x, ref = x;
    sl::kernels::gelu_erf(fast.data(), static_cast<int64_t>(fast.size()));
    sl::kernels::ref::gelu_erf(ref.data(), static_cast<int64_t>(ref.size()));
    double worst_erf = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        // gelu = 0.5 x (1 + erf): the erf error is the gelu difference over 0.5 |x|.
        if (std::abs(x[i]) > 1e-2f)
            worst_erf =
                std::max(worst_erf, std::abs(double(fast[i]) - ref[i]) / (0.5 * std::abs(x[i])));
        QVERIFY(std::abs(fast[i] - ref[i]) <= 2e-6f * std::max(1.0f, std::abs(x[i])));
    }
    qInfo("fast erf: worst absolute error %.3g", worst_erf);
    QVERIFY(worst_erf < 1e-6);
    QVERIFY(sl::test::normalized_error(fast.data(), ref.data(), fast.size()) < 1e-6);
}

QTEST_GUILESS_MAIN(TstEmbedKernels)
#include "tst_embed_kernels.moc"
