// Quantized tensor kernels: dequantize, activation quantizers, vec_dot and matmul, every type on
// every ISA tier against the scalar reference (bitwise where the math is the same) or against a
// float64 reference computed from the dequantized operands. Fresh random blocks every run.
#include <QTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/tensor_types.h"
#include "tests/common/test_support.h"

using namespace sl::kernels;

namespace {

const TensorType kWeightTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                                   TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                   TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                   TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

size_t row_bytes(TensorType t, int64_t n) {
    const TensorTypeInfo info = tensor_type_info(t);
    return static_cast<size_t>(n / info.block_size) * info.type_size;
}

// Alignment a buffer of this type needs (its block struct's).
size_t type_align(TensorType t) { return (t == TensorType::F32 || t == TensorType::Q8_K) ? 4 : 2; }

// A byte buffer whose data starts `offset` bytes past a 64-byte boundary (misaligned on purpose).
struct Buf {
    std::vector<uint8_t> storage;
    uint8_t* p = nullptr;
    Buf(size_t bytes, size_t offset) : storage(bytes + 128) {
        auto addr = reinterpret_cast<uintptr_t>(storage.data());
        p = storage.data() + ((64 - addr % 64) % 64) + offset;
    }
};

std::vector<float> gaussian(size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(sl::test::rng());
    return v;
}

uint16_t random_half(float scale) {
    std::uniform_real_distribution<float> u(-scale, scale);
    return f32_to_f16(u(sl::test::rng()));
}

// n elements of `type` with random quant bits and finite random scales, written at dst.
void fill_random(TensorType type, int64_t n, uint8_t* dst) {
    auto& g = sl::test::rng();
    const size_t bytes = row_bytes(type, n);
    for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(g());
    const TensorTypeInfo info = tensor_type_info(type);
    const int64_t nb = n / info.block_size;
    auto put16 = [&](int64_t b, size_t off, uint16_t v) { std::memcpy(dst + b * info.type_size + off, &v, 2); };
    for (int64_t b = 0; b < nb; ++b) {
        switch (type) {
            case TensorType::F32: {
                const float f = std::uniform_real_distribution<float>(-2.0f, 2.0f)(g);
                std::memcpy(dst + 4 * b, &f, 4);
                break;
            }
            case TensorType::F16: put16(b, 0, random_half(2.0f)); break;
            case TensorType::BF16: {
                const uint16_t h = f32_to_bf16(std::uniform_real_distribution<float>(-2.0f, 2.0f)(g));
                put16(b, 0, h);
                break;
            }
            case TensorType::Q4_0: case TensorType::Q5_0: case TensorType::Q8_0: case TensorType::IQ4_NL:
            case TensorType::IQ4_XS: put16(b, 0, random_half(0.1f)); break;
            case TensorType::Q4_1: case TensorType::Q5_1: case TensorType::Q4_K: case TensorType::Q5_K:
                put16(b, 0, random_half(0.1f));
                put16(b, 2, random_half(0.1f));
                break;
            case TensorType::Q2_K:
                put16(b, offsetof(BlockQ2_K, d), random_half(0.1f));
                put16(b, offsetof(BlockQ2_K, dmin), random_half(0.1f));
                break;
            case TensorType::Q3_K: put16(b, offsetof(BlockQ3_K, d), random_half(0.01f)); break;
            case TensorType::Q6_K: put16(b, offsetof(BlockQ6_K, d), random_half(0.01f)); break;
            default: break;
        }
    }
}

void quantize_acts_ref(TensorType atype, const float* x, void* dst, int64_t n) {
    switch (atype) {
        case TensorType::Q8_0: return ref::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), n);
        case TensorType::Q8_1: return ref::quantize_row_q8_1(x, static_cast<BlockQ8_1*>(dst), n);
        case TensorType::Q8_K: return ref::quantize_row_q8_K(x, static_cast<BlockQ8_K*>(dst), n);
        default: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
    }
}

// The float64 dot of one weight row with one activation row, from their dequantized values. For
// Q4_1·Q8_1 and Q5_1·Q8_1 the format's s = d * sum(q) field (an f16) replaces d * sum(q) in the
// min term, exactly as ggml (and every tier) computes it.
double reference_dot(TensorType wtype, int64_t n, const void* w, const void* a) {
    const TensorType atype = vec_dot_type(wtype);
    std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
    ref::dequantize_row(wtype, w, wf.data(), n);
    ref::dequantize_row(atype, a, af.data(), n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(wf[i]) * af[i];
    if (wtype == TensorType::Q4_1 || wtype == TensorType::Q5_1) {
        static_assert(offsetof(BlockQ4_1, m) == offsetof(BlockQ5_1, m));
        const size_t wsize = tensor_type_info(wtype).type_size;
        const auto* ab = static_cast<const BlockQ8_1*>(a);
        for (int64_t b = 0; b < n / 32; ++b) {
            uint16_t m;
            const auto* blk = static_cast<const uint8_t*>(w) + static_cast<size_t>(b) * wsize;
            std::memcpy(&m, blk + offsetof(BlockQ4_1, m), 2);
            double sa = 0.0;
            for (int j = 0; j < 32; ++j) sa += af[b * 32 + j];
            sum += static_cast<double>(f16_to_f32(m)) * (f16_to_f32(ab[b].s) - sa);
        }
    }
    return sum;
}

double normalized(const std::vector<float>& got, const std::vector<double>& want) {
    std::vector<float> w(want.begin(), want.end());
    return sl::test::normalized_error(got.data(), w.data(), got.size());
}

std::vector<int64_t> lengths(TensorType t) {
    switch (tensor_type_info(t).block_size) {
        case 1: return {1, 7, 33, 100, 771};
        case 32: return {32, 96, 160, 544};
        default: return {256, 768, 1536};
    }
}

void add_type_isa_rows(const std::vector<TensorType>& types) {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("isa");
    for (TensorType t : types) {
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (static_cast<int>(isa) > static_cast<int>(max_supported_isa())) continue;
            QTest::addRow("%s/%s", tensor_type_info(t).name, isa_name(isa)) << static_cast<int>(t) << static_cast<int>(isa);
        }
    }
}

}  // namespace

class TstQuant : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void referenceLayouts();
    void dequantizeMatchesReference_data();
    void dequantizeMatchesReference();
    void activationQuantizersMatchReference_data();
    void activationQuantizersMatchReference();
    void activationQuantizersRoundLikeGgml();
    void quantizeRoundTripError_data();
    void quantizeRoundTripError();
    void vecDotMatchesFloat64_data();
    void vecDotMatchesFloat64();
    void matmulMatchesFloat64_data();
    void matmulMatchesFloat64();
    void tileEqualsRowKernel();
    void rejectsBadInput();
    void cleanup() { set_active_isa(max_supported_isa()); }
};

// Hand-made blocks with known values pin the nibble and scale layouts ggml uses.
void TstQuant::referenceLayouts() {
    BlockQ4_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0xF) | ((15 - j) << 4));
    float y[32];
    dequantize_row(TensorType::Q4_0, &b, y, 32);
    QCOMPARE(y[0], -4.0f);   // (0 - 8) * 0.5
    QCOMPARE(y[3], -2.5f);   // element 3: low nibble 3
    QCOMPARE(y[16], 3.5f);   // element 16: high nibble of byte 0 = 15
    QCOMPARE(y[31], -4.0f);  // element 31: high nibble of byte 15 = 0

    // Q5: the high bit of element j is bit j of the little-endian uint32 qh.
    BlockQ5_0 b5{};
    b5.d = f32_to_f16(0.5f);
    for (int j = 0; j < 16; ++j) b5.qs[j] = static_cast<uint8_t>((j & 0xF) | ((15 - j) << 4));
    b5.qh[0] = 0x09;  // elements 0 and 3
    b5.qh[2] = 0x01;  // element 16
    b5.qh[3] = 0x80;  // element 31
    dequantize_row(TensorType::Q5_0, &b5, y, 32);
    QCOMPARE(y[0], 0.0f);    // (16 - 16) * 0.5
    QCOMPARE(y[1], -7.5f);   // (1 - 16) * 0.5
    QCOMPARE(y[3], 1.5f);    // (19 - 16) * 0.5
    QCOMPARE(y[16], 7.5f);   // (31 - 16) * 0.5
    QCOMPARE(y[17], -1.0f);  // (14 - 16) * 0.5
    QCOMPARE(y[31], 0.0f);   // (16 - 16) * 0.5
    BlockQ5_1 b51{};
    b51.d = f32_to_f16(0.5f);
    b51.m = f32_to_f16(-1.0f);
    std::memcpy(b51.qh, b5.qh, 4);
    std::memcpy(b51.qs, b5.qs, 16);
    dequantize_row(TensorType::Q5_1, &b51, y, 32);
    QCOMPARE(y[0], 7.0f);    // 16 * 0.5 - 1
    QCOMPARE(y[1], -0.5f);   // 1 * 0.5 - 1
    QCOMPARE(y[16], 14.5f);  // 31 * 0.5 - 1
    QCOMPARE(y[31], 7.0f);

    BlockQ4_K k{};
    k.d = f32_to_f16(1.0f);
    k.dmin = f32_to_f16(1.0f);
    // Sub-block 5 (j >= 4): scale = (scales[9] & 0xF) | (scales[1] >> 6) << 4, min = scales[9] >> 4 | ...
    k.scales[9] = 0x23;  // scale low 3, min low 2
    k.scales[1] = 0x40;  // scale high bits 1 -> scale 16 + 3 = 19
    k.scales[5] = 0x80;  // min high bits 2 -> min 32 + 2 = 34
    k.qs[64 + 3] = 0x70;  // chunk 2 (elements 128..191), high nibble: element 160 + 3, q = 7
    std::vector<float> yk(256);
    dequantize_row(TensorType::Q4_K, &k, yk.data(), 256);
    QCOMPARE(yk[163], 19.0f * 7 - 34.0f);
    QCOMPARE(yk[160], -34.0f);

    BlockQ6_K s{};
    s.d = f32_to_f16(0.25f);
    for (int g = 0; g < 16; ++g) s.scales[g] = static_cast<int8_t>(g - 8);
    s.ql[5] = 0x0A;   // element 5: low 4 bits 10
    s.qh[5] = 0x02;   // element 5: high 2 bits 2 -> q = 42
    s.ql[64 + 40] = 0xF0;  // second half, ql[32 + 8] high nibble -> element 128 + 96 + 8 = 232
    s.qh[32 + 8] = 0xC0;   // bits 6-7 -> q = 15 | 48 = 63
    std::vector<float> y6(256);
    dequantize_row(TensorType::Q6_K, &s, y6.data(), 256);
    QCOMPARE(y6[5], 0.25f * -8 * (42 - 32));
    QCOMPARE(y6[232], 0.25f * (232 / 16 - 8) * (63 - 32));
    QCOMPARE(y6[0], 0.25f * -8 * -32);
}

void TstQuant::dequantizeMatchesReference_data() {
    std::vector<TensorType> types(std::begin(kWeightTypes), std::end(kWeightTypes));
    types.push_back(TensorType::Q8_1);
    types.push_back(TensorType::Q8_K);
    add_type_isa_rows(types);
}

void TstQuant::dequantizeMatchesReference() {
    QFETCH(int, type);
    QFETCH(int, isa);
    const auto t = static_cast<TensorType>(type);
    set_active_isa(static_cast<Isa>(isa));
    for (int64_t n : lengths(t)) {
        for (size_t off : {size_t{0}, type_align(t), 3 * type_align(t)}) {
            Buf src(row_bytes(t, n), off);
            fill_random(t, n, src.p);
            std::vector<float> want(static_cast<size_t>(n));
            Buf got(static_cast<size_t>(n) * 4, 4 * (off / type_align(t)));
            ref::dequantize_row(t, src.p, want.data(), n);
            dequantize_row(t, src.p, reinterpret_cast<float*>(got.p), n);
            QVERIFY2(std::memcmp(got.p, want.data(), want.size() * 4) == 0, qPrintable(QStringLiteral("n=%1").arg(n)));
        }
    }
}

void TstQuant::activationQuantizersMatchReference_data() {
    add_type_isa_rows({TensorType::Q8_0, TensorType::Q8_1, TensorType::Q8_K});
}

void TstQuant::activationQuantizersMatchReference() {
    QFETCH(int, type);
    QFETCH(int, isa);
    const auto t = static_cast<TensorType>(type);
    set_active_isa(static_cast<Isa>(isa));
    for (int64_t n : lengths(t)) {
        for (size_t off : {size_t{0}, size_t{4}, size_t{12}}) {
            Buf xb(static_cast<size_t>(n) * 4, off);
            const std::vector<float> x = gaussian(static_cast<size_t>(n), 3.0f);
            std::memcpy(xb.p, x.data(), x.size() * 4);
            Buf got(row_bytes(t, n), off % type_align(t) == 0 ? off : 0);
            std::vector<uint8_t> want(row_bytes(t, n));
            quantize_acts_ref(t, x.data(), want.data(), n);
            quantize_row(t, reinterpret_cast<const float*>(xb.p), got.p, n);
            QVERIFY(std::memcmp(got.p, want.data(), want.size()) == 0);
        }
    }
}

// ggml rounds Q8_0/Q8_1 half away from zero (roundf) and Q8_K half to even (nearest_int).
void TstQuant::activationQuantizersRoundLikeGgml() {
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (static_cast<int>(isa) > static_cast<int>(max_supported_isa())) continue;
        set_active_isa(isa);
        std::vector<float> x(256, 0.0f);
        x[0] = 127.0f;  // d = 1 (Q8_0), iscale = -1 (Q8_K)
        x[1] = 2.5f;
        x[2] = -2.5f;
        x[3] = 0.5f;
        x[4] = -126.5f;
        x[5] = 0.49999997f;
        BlockQ8_0 q0[8];
        quantize_row_q8_0(x.data(), q0, 256);
        QCOMPARE(int(q0[0].qs[1]), 3);
        QCOMPARE(int(q0[0].qs[2]), -3);
        QCOMPARE(int(q0[0].qs[3]), 1);
        QCOMPARE(int(q0[0].qs[4]), -127);
        QCOMPARE(int(q0[0].qs[5]), 0);
        BlockQ8_K qk;
        quantize_row_q8_K(x.data(), &qk, 256);
        QCOMPARE(qk.d, -1.0f);
        QCOMPARE(int(qk.qs[1]), -2);  // -2.5 rounds to even
        QCOMPARE(int(qk.qs[3]), 0);
        QCOMPARE(int(qk.qs[4]), 126);
        QCOMPARE(int(qk.bsums[0]), -127 - 2 + 2 + 0 + 126 + 0);
    }
}

void TstQuant::quantizeRoundTripError_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<double>("bound");
    const struct { TensorType t; double bound; } rows[] = {
        {TensorType::F16, 1e-3},  {TensorType::BF16, 5e-3}, {TensorType::Q8_0, 0.01}, {TensorType::Q8_1, 0.01},
        {TensorType::Q8_K, 0.01}, {TensorType::Q4_0, 0.11}, {TensorType::Q4_1, 0.11}, {TensorType::Q5_0, 0.055},
        {TensorType::Q5_1, 0.055}, {TensorType::Q4_K, 0.12}, {TensorType::Q6_K, 0.03},
        {TensorType::Q2_K, 0.45},  {TensorType::Q3_K, 0.25}, {TensorType::Q5_K, 0.06},
    };
    for (const auto& r : rows) QTest::newRow(tensor_type_info(r.t).name) << static_cast<int>(r.t) << r.bound;
}

void TstQuant::quantizeRoundTripError() {
    QFETCH(int, type);
    QFETCH(double, bound);
    const auto t = static_cast<TensorType>(type);
    const int64_t n = 256 * 16;
    const std::vector<float> x = gaussian(static_cast<size_t>(n), 0.02f);
    std::vector<uint8_t> q(row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> back(static_cast<size_t>(n));
    dequantize_row(t, q.data(), back.data(), n);
    const double err = sl::test::normalized_error(back.data(), x.data(), x.size());
    qInfo("%s: quantize -> dequantize normalized error %.4f (bound %.3f)", tensor_type_info(t).name, err, bound);
    QVERIFY(err < bound);
    QVERIFY(err > 0.0 || t == TensorType::F32);
}

void TstQuant::vecDotMatchesFloat64_data() {
    add_type_isa_rows(std::vector<TensorType>(std::begin(kWeightTypes), std::end(kWeightTypes)));
}

void TstQuant::vecDotMatchesFloat64() {
    QFETCH(int, type);
    QFETCH(int, isa);
    const auto t = static_cast<TensorType>(type);
    set_active_isa(static_cast<Isa>(isa));
    const TensorType atype = vec_dot_type(t);
    const int rows = 23;
    for (int64_t n : lengths(t)) {
        const size_t wb = row_bytes(t, n), ab = row_bytes(atype, n);
        Buf w(wb * rows, type_align(t));
        fill_random(t, n * rows, w.p);
        std::vector<float> got(rows);
        std::vector<double> want(rows);
        for (int r = 0; r < rows; ++r) {
            const std::vector<float> x = gaussian(static_cast<size_t>(n));
            Buf a(ab, type_align(atype));
            quantize_activations(t, x.data(), 1, n, a.p);
            got[static_cast<size_t>(r)] = vec_dot(t, n, w.p + r * wb, a.p);
            want[static_cast<size_t>(r)] = reference_dot(t, n, w.p + r * wb, a.p);
        }
        const double err = normalized(got, want);
        QVERIFY2(err < 1e-5, qPrintable(QStringLiteral("n=%1 error %2").arg(n).arg(err)));
    }
}

void TstQuant::matmulMatchesFloat64_data() {
    add_type_isa_rows(std::vector<TensorType>(std::begin(kWeightTypes), std::end(kWeightTypes)));
}

void TstQuant::matmulMatchesFloat64() {
    QFETCH(int, type);
    QFETCH(int, isa);
    const auto t = static_cast<TensorType>(type);
    set_active_isa(static_cast<Isa>(isa));
    const int64_t bs = tensor_type_info(t).block_size;
    const int64_t n = bs == 256 ? 512 : bs == 32 ? 96 : 99;
    const int64_t d = 37;
    const size_t wb = row_bytes(t, n), ab = activation_row_bytes(t, n);
    Buf w(wb * d, type_align(t));
    fill_random(t, n * d, w.p);
    for (int64_t nt : {1, 3, 7, 17}) {
        const std::vector<float> x = gaussian(static_cast<size_t>(n * nt));
        std::vector<float> y(static_cast<size_t>(d * nt));
        matmul(t, w.p, d, n, x.data(), nt, y.data());

        // The float64 reference on the same quantized activations.
        std::vector<uint8_t> xq(ab * static_cast<size_t>(nt) + 4);
        void* xqp = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(xq.data()) + 3) & ~uintptr_t{3});
        std::vector<double> want(y.size());
        for (int64_t tok = 0; tok < nt; ++tok) {
            void* a = static_cast<char*>(xqp) + tok * ab;
            quantize_acts_ref(vec_dot_type(t), x.data() + tok * n, a, n);
            for (int64_t r = 0; r < d; ++r) want[static_cast<size_t>(tok * d + r)] = reference_dot(t, n, w.p + r * wb, a);
        }
        const double err = normalized(y, want);
        QVERIFY2(err < 1e-5, qPrintable(QStringLiteral("n_tokens=%1 error %2").arg(nt).arg(err)));

        // Row ranges (as threads would split them) into a wider Y give the same bits.
        const int64_t ldy = d + 5;
        std::vector<float> y2(static_cast<size_t>(ldy * nt), -1.0f);
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 16}, {16, 19}, {19, d}}) {
            matmul_rows(t, w.p, n, xqp, nt, y2.data(), ldy, r0, r1);
        }
        for (int64_t tok = 0; tok < nt; ++tok) {
            QVERIFY(std::memcmp(y2.data() + tok * ldy, y.data() + tok * d, static_cast<size_t>(d) * 4) == 0);
            QCOMPARE(y2[static_cast<size_t>(tok * ldy + d)], -1.0f);
        }

        // The scalar reference path agrees too.
        std::vector<float> yr(y.size());
        ref::matmul(t, w.p, d, n, x.data(), nt, yr.data());
        QVERIFY(normalized(yr, want) < 1e-5);
    }
}

void TstQuant::tileEqualsRowKernel() {
    // The AVX-512 tile kernels (dot_tile_avx512.cpp: the activation scales converted once per
    // tile; Q4_K / Q5_K / Q6_K: 8 tokens per pass) give the row kernels' bits (4 tokens per call): every
    // type that has one, an odd and an even block count and a long row (Q4_K's tile goes over
    // rows of more than 8 blocks in pieces: 11 blocks), tiles of 1..8 rows, 1..8 tokens.
    if (max_supported_isa() != Isa::Avx512) QSKIP("no AVX-512 on this CPU: there are no tile kernels to check");
    int checked = 0;
    for (const TensorType t : kWeightTypes) {
        const DotTileFn tile = dot_tile_fn(t, Isa::Avx512);
        if (!tile) continue;
        const VecDotFn rowfn = vec_dot_fn(t, Isa::Avx512);
        const bool k256 = tensor_type_info(t).block_size == 256;
        const std::array<int64_t, 3> sizes =
            k256 ? std::array<int64_t, 3>{256, 1280, 2816} : std::array<int64_t, 3>{96, 608, 2848};
        for (const int64_t n : sizes) {
            const int64_t d = 8;
            constexpr int kTok = kMaxTileTokens;
            const size_t wb = row_bytes(t, n), ab = activation_row_bytes(t, n);
            Buf w(wb * d, type_align(t));
            fill_random(t, n * d, w.p);
            const std::vector<float> x = gaussian(static_cast<size_t>(n * kTok));
            std::vector<uint8_t> xq(ab * kTok + 4);
            void* xqp = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(xq.data()) + 3) & ~uintptr_t{3});
            quantize_activations(t, x.data(), kTok, n, xqp);
            for (int nt = 1; nt <= kTok; ++nt)
                for (int rows = 1; rows <= d; ++rows) {
                    std::vector<float> a(static_cast<size_t>(kTok * d), 7.0f), b(a.size(), 7.0f);
                    tile(n, w.p, wb, rows, xqp, ab, nt, a.data(), static_cast<size_t>(d));
                    for (int r = 0; r < rows; ++r)
                        for (int t0 = 0; t0 < nt; t0 += kMaxDotTokens)
                            rowfn(n, w.p + static_cast<size_t>(r) * wb, static_cast<const char*>(xqp) + static_cast<size_t>(t0) * ab, ab,
                                  std::min(kMaxDotTokens, nt - t0), b.data() + static_cast<size_t>(t0 * d) + r, static_cast<size_t>(d));
                    QVERIFY2(std::memcmp(a.data(), b.data(), a.size() * 4) == 0,
                             qPrintable(QStringLiteral("%1 n=%2 nt=%3 rows=%4").arg(tensor_type_info(t).name).arg(n).arg(nt).arg(rows)));
                }
            ++checked;
        }
    }
    QCOMPARE(checked, 24);  // Q4_0, Q5_0, Q8_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K x three sizes
}

void TstQuant::rejectsBadInput() {
    std::vector<float> x(100), y(100);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dequantize_row(TensorType::Q4_0, x.data(), y.data(), 33));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dequantize_row(TensorType::IQ2_XS, x.data(), y.data(), 256));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, quantize_row(TensorType::IQ4_XS, x.data(), y.data(), 256));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, activation_row_bytes(TensorType::Q4_K, 96));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, vec_dot_type(TensorType::IQ2_XS));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, quantize_row(TensorType::Q4_0, x.data(), y.data(), 31));
}

QTEST_APPLESS_MAIN(TstQuant)
#include "tst_quant.moc"
