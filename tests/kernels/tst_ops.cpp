// Per-token operators against double-precision references; dispatched dot/axpy on every ISA tier.
#include <QTest>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"
#include "tests/common/test_support.h"

using namespace sl::kernels;

class TstOps : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void rmsNorm();
    void ropeStyles();
    void ropeIsAnIsometry();
    void softmaxSumsToOne();
    void siluMul();
    void expShiftedSumTiers_data() { dotAxpyTiers_data(); }
    void expShiftedSumTiers();
    void maxTiers_data() { dotAxpyTiers_data(); }
    void maxTiers();
    void attentionRowsTiers_data() { dotAxpyTiers_data(); }
    void attentionRowsTiers();
    void dotAxpyTiers_data();
    void dotAxpyTiers();
    void cleanup() { set_active_isa(max_supported_isa()); }
};

void TstOps::rmsNorm() {
    for (int n : {1, 7, 64, 577}) {
        auto x = sl::test::random_floats(static_cast<size_t>(n), -3, 3);
        auto w = sl::test::random_floats(static_cast<size_t>(n), 0.5f, 1.5f);
        std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
        double ss = 0;
        for (float v : x) ss += static_cast<double>(v) * v;
        const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
        for (int i = 0; i < n; ++i) ref[static_cast<size_t>(i)] = static_cast<float>(x[static_cast<size_t>(i)] * inv * w[static_cast<size_t>(i)]);
        rms_norm(out.data(), x.data(), w.data(), n, 1e-6f);
        QVERIFY(sl::test::normalized_error(out.data(), ref.data(), out.size()) < 1e-6);
    }
}

void TstOps::ropeStyles() {
    // Against the rotation written out directly in double precision.
    const int heads = 3, hd = 64, rot = 64;
    const float base = 100000.0f;
    // Llama 3.1's rope_freqs: per-dimension divisors of the frequency (1 for the fast dims, up to 8).
    std::vector<float> factors(rot / 2);
    for (int i = 0; i < rot / 2; ++i) factors[static_cast<size_t>(i)] = 1.0f + 7.0f * static_cast<float>(i) / (rot / 2);
    for (const float* ff : {static_cast<const float*>(nullptr), static_cast<const float*>(factors.data())})
    for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
        for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{8191}}) {
            auto x = sl::test::random_floats(static_cast<size_t>(heads * hd));
            std::vector<float> ref(x.size());
            for (int h = 0; h < heads; ++h) {
                for (int i = 0; i < rot / 2; ++i) {
                    const double th = static_cast<double>(pos) * std::pow(static_cast<double>(base), -2.0 * i / rot) /
                                      (ff ? static_cast<double>(ff[i]) : 1.0);
                    const int a = h * hd + (style == RopeStyle::Norm ? 2 * i : i);
                    const int b = h * hd + (style == RopeStyle::Norm ? 2 * i + 1 : i + rot / 2);
                    ref[static_cast<size_t>(a)] = static_cast<float>(x[static_cast<size_t>(a)] * std::cos(th) - x[static_cast<size_t>(b)] * std::sin(th));
                    ref[static_cast<size_t>(b)] = static_cast<float>(x[static_cast<size_t>(a)] * std::sin(th) + x[static_cast<size_t>(b)] * std::cos(th));
                }
            }
            rope(x.data(), heads, hd, rot, pos, base, 1.0f, style, ff);
            QVERIFY2(sl::test::normalized_error(x.data(), ref.data(), x.size()) < 1e-5, style == RopeStyle::Norm ? "norm" : "neox");
        }
    }
}

void TstOps::ropeIsAnIsometry() {
    // Partial rotation (rot_dim < head_dim) keeps the norm and leaves the tail alone.
    auto x = sl::test::random_floats(2 * 128);
    const auto before = x;
    rope(x.data(), 2, 128, 64, 1234, 10000.0f, 1.0f, RopeStyle::Neox);
    double n0 = 0, n1 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        n0 += static_cast<double>(before[i]) * before[i];
        n1 += static_cast<double>(x[i]) * x[i];
    }
    QVERIFY(std::abs(n0 - n1) < 1e-4 * n0);
    for (int h = 0; h < 2; ++h)
        for (int i = 64; i < 128; ++i) QCOMPARE(x[static_cast<size_t>(h * 128 + i)], before[static_cast<size_t>(h * 128 + i)]);
}

void TstOps::softmaxSumsToOne() {
    auto x = sl::test::random_floats(1001, -50, 50);
    softmax(x.data(), static_cast<int64_t>(x.size()));
    double s = 0;
    for (float v : x) {
        QVERIFY(v >= 0);
        s += v;
    }
    QVERIFY(std::abs(s - 1.0) < 1e-5);
}

void TstOps::siluMul() {
    auto g = sl::test::random_floats(99, -8, 8), u = sl::test::random_floats(99);
    std::vector<float> out(99), ref(99);
    for (size_t i = 0; i < 99; ++i) ref[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
    silu_mul(out.data(), g.data(), u.data(), 99);
    QVERIFY(sl::test::normalized_error(out.data(), ref.data(), 99) < 1e-6);
}

void TstOps::expShiftedSumTiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    for (int n : {1, 7, 8, 15, 16, 17, 100, 4097}) {
        auto x = sl::test::random_floats(static_cast<size_t>(n), -100.0f, 30.0f);
        x[0] = -INFINITY;  // masked scores
        if (n > 3) x[3] = 30.0f;
        auto want = x;
        const float shift = 30.0f;
        const double want_sum = ref::exp_shifted_sum(want.data(), n, shift);
        const double got_sum = exp_shifted_sum(x.data(), n, shift);
        QCOMPARE(x[0], 0.0f);
        for (int i = 0; i < n; ++i) {
            const double w = want[static_cast<size_t>(i)], g = x[static_cast<size_t>(i)];
            // Relative 4e-7 where exp is representable; flushed to 0 below e^-87.3.
            QVERIFY2(std::abs(g - w) <= 4e-7 * w + 1e-37,
                     qPrintable(QStringLiteral("n=%1 i=%2 got %3 want %4").arg(n).arg(i).arg(g).arg(w)));
        }
        QVERIFY(std::abs(got_sum - want_sum) <= 1e-6 * want_sum + 1e-30);
    }
}

void TstOps::maxTiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    // Every length across the tiers' unrolled blocks and masked tails, the largest at each place
    // (a tail the vector loop skips, the first, the last), -inf entries and all -inf.
    for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1500, 4097}) {
        auto x = sl::test::random_floats(static_cast<size_t>(n), -50.0f, 10.0f);
        if (n > 2) x[1] = -INFINITY;
        for (int at : {0, n / 2, n - 1}) {
            auto y = x;
            y[static_cast<size_t>(at)] = 11.0f + static_cast<float>(at);
            const float want = ref::max_f32(y.data(), n);
            QCOMPARE(want, 11.0f + static_cast<float>(at));
            QCOMPARE(max_f32(y.data(), n), want);
            // An offset start: unaligned loads.
            if (n > 1 && at > 0) QCOMPARE(max_f32(y.data() + 1, n - 1), want);
        }
        QCOMPARE(max_f32(x.data(), n), ref::max_f32(x.data(), n));
        std::vector<float> ninf(static_cast<size_t>(n), -INFINITY);
        QCOMPARE(max_f32(ninf.data(), n), -INFINITY);
    }
}

void TstOps::attentionRowsTiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    for (int d : {16, 17, 48, 64, 128}) {
        for (int n : {1, 15, 16, 17, 33, 300}) {
            const int64_t stride = 3 * d + 5;  // rows of a KV cache: other heads in between
            auto q = sl::test::random_floats(static_cast<size_t>(d));
            auto k = sl::test::random_floats(static_cast<size_t>(n * stride));
            std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
            dot_rows_f32(got.data(), q.data(), k.data(), stride, n, d, 0.125f);
            ref::dot_rows_f32(want.data(), q.data(), k.data(), stride, n, d, 0.125f);
            for (int j = 0; j < n; ++j) {  // f32 against double: bound by the sum of |terms|
                double mag = 0;
                for (int i = 0; i < d; ++i)
                    mag += std::abs(static_cast<double>(q[static_cast<size_t>(i)]) * k[static_cast<size_t>(j * stride + i)]);
                QVERIFY2(std::abs(got[static_cast<size_t>(j)] - want[static_cast<size_t>(j)]) <= 1e-6 * 0.125 * mag + 1e-9,
                         qPrintable(QStringLiteral("dot_rows d=%1 n=%2 j=%3").arg(d).arg(n).arg(j)));
            }
            auto p = sl::test::random_floats(static_cast<size_t>(n), 0.0f, 1.0f);
            auto out = sl::test::random_floats(static_cast<size_t>(d));
            auto out_ref = out;
            accumulate_rows_f32(out.data(), p.data(), k.data(), stride, n, d);
            ref::accumulate_rows_f32(out_ref.data(), p.data(), k.data(), stride, n, d);
            QVERIFY2(sl::test::normalized_error(out.data(), out_ref.data(), out.size()) < 1e-6,
                     qPrintable(QStringLiteral("accumulate_rows d=%1 n=%2").arg(d).arg(n)));
        }
    }
}

void TstOps::dotAxpyTiers_data() {
    QTest::addColumn<int>("isa");
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
        if (static_cast<int>(isa) <= static_cast<int>(max_supported_isa())) QTest::newRow(isa_name(isa)) << static_cast<int>(isa);
}

void TstOps::dotAxpyTiers() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    for (int n : {1, 5, 15, 16, 17, 63, 64, 65, 129, 1000}) {
        for (int off : {0, 1, 3}) {
            auto a = sl::test::random_floats(static_cast<size_t>(n + off)), b = sl::test::random_floats(static_cast<size_t>(n + off));
            const float got = dot_f32(a.data() + off, b.data() + off, n);
            const float want = ref::dot_f32(a.data() + off, b.data() + off, n);
            double norm = 0;
            for (int i = 0; i < n; ++i) norm += std::abs(static_cast<double>(a[static_cast<size_t>(i + off)]) * b[static_cast<size_t>(i + off)]);
            QVERIFY2(std::abs(got - want) <= 1e-5 * norm + 1e-7, qPrintable(QStringLiteral("n=%1 got %2 want %3").arg(n).arg(got).arg(want)));

            auto y = sl::test::random_floats(static_cast<size_t>(n + off));
            const auto y0 = y;
            axpy_f32(y.data() + off, 0.37f, a.data() + off, n);
            // Per element against the exact y0 + 0.37 a: a tier that fuses the multiply-add and the
            // reference that rounds the product first differ by float roundings of the operands'
            // size, which a near-cancelling element (a single one when n = 1) makes large relative
            // to the result; a wrong lane is off by the operands themselves.
            for (int i = 0; i < n + off; ++i) {
                const auto j = static_cast<size_t>(i);
                const double ax = i < off ? 0.0 : static_cast<double>(0.37f) * static_cast<double>(a[j]);
                const double exact = static_cast<double>(y0[j]) + ax;
                const double tol = 2.0 * std::numeric_limits<float>::epsilon() * (std::abs(static_cast<double>(y0[j])) + std::abs(ax));
                QVERIFY2(std::abs(static_cast<double>(y[j]) - exact) <= tol,
                         qPrintable(QStringLiteral("axpy n=%1 off=%2 i=%3: %4, want %5").arg(n).arg(off).arg(i).arg(y[j]).arg(exact)));
            }
        }
    }
}

QTEST_APPLESS_MAIN(TstOps)
#include "tst_ops.moc"
