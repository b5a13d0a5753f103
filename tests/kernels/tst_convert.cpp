// f16 / bf16 conversions: every ISA tier against the scalar reference, which is itself checked
// exhaustively against IEEE semantics.
#include <QTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/common/test_support.h"

using namespace sl::kernels;

class TstConvert : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void referenceKnownValues();
    void referenceRoundTripsEveryHalf();
    void referenceRoundsToNearestEven();
    void tiersMatchReference_data();
    void tiersMatchReference();
    void cleanup() { set_active_isa(max_supported_isa()); }
};

void TstConvert::referenceKnownValues() {
    QCOMPARE(f16_to_f32(uint16_t{0x3c00}), 1.0f);
    QCOMPARE(f16_to_f32(uint16_t{0xc000}), -2.0f);
    QCOMPARE(f16_to_f32(uint16_t{0x7bff}), 65504.0f);
    QCOMPARE(f16_to_f32(uint16_t{0x0001}), std::ldexp(1.0f, -24));  // smallest subnormal
    QVERIFY(std::isinf(f16_to_f32(uint16_t{0x7c00})));
    QVERIFY(std::isnan(f16_to_f32(uint16_t{0x7e00})));
    QCOMPARE(f32_to_f16(65520.0f), uint16_t{0x7c00});  // rounds up to inf
    QCOMPARE(f32_to_f16(std::ldexp(1.0f, -25)), uint16_t{0x0000});  // tie to even: zero
    QCOMPARE(f32_to_f16(std::ldexp(1.5f, -25)), uint16_t{0x0001});
    QCOMPARE(bf16_to_f32(f32_to_bf16(3.140625f)), 3.140625f);
    QCOMPARE(f32_to_bf16(1.00390625f), uint16_t{0x3f80});  // halfway, rounds to even
}

void TstConvert::referenceRoundTripsEveryHalf() {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        QCOMPARE(f32_to_f16(f), static_cast<uint16_t>(h));
    }
}

void TstConvert::referenceRoundsToNearestEven() {
    // Between two adjacent halves, values below the midpoint go down, above go up.
    auto& g = sl::test::rng();
    std::uniform_int_distribution<uint32_t> d(0x0001, 0x7bfe);
    for (int i = 0; i < 20000; ++i) {
        const auto h = static_cast<uint16_t>(d(g));
        const double lo = f16_to_f32(h), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
        const double mid = (lo + hi) / 2;
        QCOMPARE(f32_to_f16(static_cast<float>(lo + (mid - lo) * 0.5)), h);
        QCOMPARE(f32_to_f16(static_cast<float>(mid + (hi - mid) * 0.5)), static_cast<uint16_t>(h + 1));
    }
}

void TstConvert::tiersMatchReference_data() {
    QTest::addColumn<int>("isa");
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(max_supported_isa())) {
            qInfo("%s: not supported by this CPU, not tested", isa_name(isa));
            continue;
        }
        QTest::newRow(isa_name(isa)) << static_cast<int>(isa);
    }
}

void TstConvert::tiersMatchReference() {
    QFETCH(int, isa);
    set_active_isa(static_cast<Isa>(isa));
    auto& g = sl::test::rng();
    std::uniform_int_distribution<uint32_t> bits16(0, 0xffff);
    for (size_t n : {size_t{1}, size_t{7}, size_t{15}, size_t{17}, size_t{33}, size_t{1001}, size_t{4099}}) {
        for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {  // misaligned starts
            std::vector<uint16_t> h(n + offset);
            for (auto& x : h) {
                x = static_cast<uint16_t>(bits16(g));
                if ((x & 0x7c00) == 0x7c00) x &= 0xbfff;  // no NaN/inf: compare by value
            }
            std::vector<float> got(n + offset), want(n + offset);
            f16_to_f32(got.data() + offset, h.data() + offset, n);
            ref::f16_to_f32(want.data() + offset, h.data() + offset, n);
            QVERIFY(std::memcmp(got.data() + offset, want.data() + offset, n * sizeof(float)) == 0);

            bf16_to_f32(got.data() + offset, h.data() + offset, n);
            ref::bf16_to_f32(want.data() + offset, h.data() + offset, n);
            QVERIFY(std::memcmp(got.data() + offset, want.data() + offset, n * sizeof(float)) == 0);

            const std::vector<float> f = sl::test::random_floats(n + offset, -70000.0f, 70000.0f);
            std::vector<uint16_t> hg(n + offset), hw(n + offset);
            f32_to_f16(hg.data() + offset, f.data() + offset, n);
            ref::f32_to_f16(hw.data() + offset, f.data() + offset, n);
            QVERIFY(std::memcmp(hg.data() + offset, hw.data() + offset, n * sizeof(uint16_t)) == 0);

            // f32 -> bf16 over every kind of value: random bit patterns (NaNs, infinities,
            // subnormals, both signs), and ties (low 16 bits 0x8000) to round both ways.
            std::vector<float> fb(n + offset);
            for (size_t i = 0; i < fb.size(); ++i) {
                uint32_t b = (bits16(g) << 16) | bits16(g);
                if (i % 5 == 1) b = (b & 0xffff0000u) | 0x8000u;
                std::memcpy(&fb[i], &b, 4);
            }
            f32_to_bf16(hg.data() + offset, fb.data() + offset, n);
            ref::f32_to_bf16(hw.data() + offset, fb.data() + offset, n);
            QVERIFY(std::memcmp(hg.data() + offset, hw.data() + offset, n * sizeof(uint16_t)) == 0);
        }
    }
}

QTEST_APPLESS_MAIN(TstConvert)
#include "tst_convert.moc"
