// AVX2 dequantizers (dequantize.h). Compiled with AVX2/FMA/F16C; called only when
// active_isa() >= Isa::Avx2. Same bits as the reference: separate multiply and add, same order.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx2 {

namespace {

// 8 unsigned bytes (low half of b) -> floats.
inline __m256 u8_to_ps(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)); }
inline __m256 i8_to_ps(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }
inline __m128i load8(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }
inline __m128i load16(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

void deq_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m256 eight = _mm256_set1_ps(8.0f);
    for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d));
        const __m128i q = load16(x[i].qs);
        const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
        // (q - 8) is exact in float, as in the reference's integer subtraction.
        _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_sub_ps(u8_to_ps(lo), eight), d));
        _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_sub_ps(u8_to_ps(_mm_srli_si128(lo, 8)), eight), d));
        _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_sub_ps(u8_to_ps(hi), eight), d));
        _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_sub_ps(u8_to_ps(_mm_srli_si128(hi, 8)), eight), d));
    }
}

void deq_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d)), m = _mm256_set1_ps(fp16(x[i].m));
        const __m128i q = load16(x[i].qs);
        const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
        _mm256_storeu_ps(y + 0, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(lo), d), m));
        _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(_mm_srli_si128(lo, 8)), d), m));
        _mm256_storeu_ps(y + 16, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(hi), d), m));
        _mm256_storeu_ps(y + 24, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(_mm_srli_si128(hi, 8)), d), m));
    }
}

// Bits 0..31 of the little-endian uint32 at qh -> 32 bytes, 0xFF where the bit is set
// (ggml's bytes_from_bits_32).
inline __m256i bits_to_bytes(const uint8_t* qh) {
    uint32_t x32;
    std::memcpy(&x32, qh, sizeof x32);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf);
    return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
}

// A Q5 block's 32 q values (0..31) as bytes, in element order.
inline __m256i q5_bytes(const uint8_t* qs, const uint8_t* qh) {
    const __m128i b = load16(qs);
    const __m256i lo4 = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(lo4, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}

void deq_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d));
        // q - 16 as int8 (exact), then to float and times d, as the reference.
        const __m256i q = _mm256_sub_epi8(q5_bytes(x[i].qs, x[i].qh), _mm256_set1_epi8(16));
        const __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(y + 0, _mm256_mul_ps(i8_to_ps(q0), d));
        _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8_to_ps(_mm_srli_si128(q0, 8)), d));
        _mm256_storeu_ps(y + 16, _mm256_mul_ps(i8_to_ps(q1), d));
        _mm256_storeu_ps(y + 24, _mm256_mul_ps(i8_to_ps(_mm_srli_si128(q1, 8)), d));
    }
}

void deq_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
        const __m256 d = _mm256_set1_ps(fp16(x[i].d)), m = _mm256_set1_ps(fp16(x[i].m));
        const __m256i q = q5_bytes(x[i].qs, x[i].qh);
        const __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(y + 0, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(q0), d), m));
        _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(_mm_srli_si128(q0, 8)), d), m));
        _mm256_storeu_ps(y + 16, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(q1), d), m));
        _mm256_storeu_ps(y + 24, _mm256_add_ps(_mm256_mul_ps(u8_to_ps(_mm_srli_si128(q1, 8)), d), m));
    }
}

// 32 int8 at qs, times d.
inline void deq_i8x32(const int8_t* qs, float d_, float* y) {
    const __m256 d = _mm256_set1_ps(d_);
    for (int k = 0; k < 32; k += 8) _mm256_storeu_ps(y + k, _mm256_mul_ps(i8_to_ps(load8(qs + k)), d));
}

void deq_q4_K(const BlockQ4_K* x, float* y, int64_t nb) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* q = x[i].qs;
        const float d = fp16(x[i].d), dmin = fp16(x[i].dmin);
        for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32, y += 64) {
            uint8_t sc, m;
            q4k_scale_min(is, x[i].scales, &sc, &m);
            const __m256 d1 = _mm256_set1_ps(d * sc), m1 = _mm256_set1_ps(dmin * m);
            q4k_scale_min(is + 1, x[i].scales, &sc, &m);
            const __m256 d2 = _mm256_set1_ps(d * sc), m2 = _mm256_set1_ps(dmin * m);
            for (int h = 0; h < 32; h += 16) {
                const __m128i b = load16(q + h);
                const __m128i lo = _mm_and_si128(b, mask), hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
                _mm256_storeu_ps(y + h, _mm256_sub_ps(_mm256_mul_ps(d1, u8_to_ps(lo)), m1));
                _mm256_storeu_ps(y + h + 8, _mm256_sub_ps(_mm256_mul_ps(d1, u8_to_ps(_mm_srli_si128(lo, 8))), m1));
                _mm256_storeu_ps(y + 32 + h, _mm256_sub_ps(_mm256_mul_ps(d2, u8_to_ps(hi)), m2));
                _mm256_storeu_ps(y + 32 + h + 8,
                                 _mm256_sub_ps(_mm256_mul_ps(d2, u8_to_ps(_mm_srli_si128(hi, 8))), m2));
            }
        }
    }
}

void deq_q6_K(const BlockQ6_K* x, float* y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi32(0xF), m3 = _mm256_set1_epi32(3), k32 = _mm256_set1_epi32(32);
    for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16(x[i].d);
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        for (int k = 0; k < kQK_K; k += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l += 8) {
                const int is = l / 16;
                const __m256i a = _mm256_cvtepu8_epi32(load8(ql + l));
                const __m256i b = _mm256_cvtepu8_epi32(load8(ql + l + 32));
                const __m256i h = _mm256_cvtepu8_epi32(load8(qh + l));
                const __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi32(_mm256_and_si256(h, m3), 4));
                const __m256i q2 = _mm256_or_si256(_mm256_and_si256(b, m4),
                                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), m3), 4));
                const __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(a, 4),
                                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), m3), 4));
                const __m256i q4 = _mm256_or_si256(_mm256_srli_epi32(b, 4), _mm256_slli_epi32(_mm256_srli_epi32(h, 6), 4));
                auto put = [&](float* out, __m256i q, int s) {
                    const __m256 ds = _mm256_set1_ps(d * static_cast<float>(sc[s]));
                    _mm256_storeu_ps(out, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, k32))));
                };
                put(y + l, q1, is);
                put(y + l + 32, q2, is + 2);
                put(y + l + 64, q3, is + 4);
                put(y + l + 96, q4, is + 6);
            }
        }
    }
}

}  // namespace

bool dequantize_row(TensorType type, const void* src, float* dst, int64_t n) {
    switch (type) {
        case TensorType::F16: avx2::f16_to_f32(dst, static_cast<const uint16_t*>(src), static_cast<size_t>(n)); return true;
        case TensorType::BF16: avx2::bf16_to_f32(dst, static_cast<const uint16_t*>(src), static_cast<size_t>(n)); return true;
        case TensorType::Q4_0: deq_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQK4_0); return true;
        case TensorType::Q4_1: deq_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / kQK4_1); return true;
        case TensorType::Q5_0: deq_q5_0(static_cast<const BlockQ5_0*>(src), dst, n / kQK5_0); return true;
        case TensorType::Q5_1: deq_q5_1(static_cast<const BlockQ5_1*>(src), dst, n / kQK5_1); return true;
        case TensorType::Q8_0: {
            const auto* x = static_cast<const BlockQ8_0*>(src);
            for (int64_t i = 0; i < n / kQK8_0; ++i) deq_i8x32(x[i].qs, fp16(x[i].d), dst + i * kQK8_0);
            return true;
        }
        case TensorType::Q8_1: {
            const auto* x = static_cast<const BlockQ8_1*>(src);
            for (int64_t i = 0; i < n / kQK8_1; ++i) deq_i8x32(x[i].qs, fp16(x[i].d), dst + i * kQK8_1);
            return true;
        }
        case TensorType::Q4_K: deq_q4_K(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K); return true;
        case TensorType::Q6_K: deq_q6_K(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K); return true;
        default: return false;  // F32 (a copy), Q8_K: the reference is as good
    }
}

}  // namespace sl::kernels::avx2
