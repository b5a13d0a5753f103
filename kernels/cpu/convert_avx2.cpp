// AVX2 + F16C variants of convert.h. Compiled with -mavx2 -mfma -mf16c; called only when
// active_isa() >= Isa::Avx2. Keep this file free of inline library code that the linker could
// share with scalar translation units.
#include <immintrin.h>

#include "kernels/cpu/convert.h"

namespace sl::kernels::avx2 {

void f16_to_f32(float* out, const uint16_t* in, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) out[i] = kernels::f16_to_f32(in[i]);
}

void f32_to_f16(uint16_t* out, const float* in, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
    for (; i < n; ++i) out[i] = kernels::f32_to_f16(in[i]);
}

void bf16_to_f32(float* out, const uint16_t* in, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
        const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
    }
    for (; i < n; ++i) out[i] = kernels::bf16_to_f32(in[i]);
}

// Round to nearest even on the bits: (x + 0x7fff + lsb) >> 16; NaNs keep their top bits, made quiet.
// Two vectors of 8 packed to 16 (packus works per 128-bit lane: the qwords are put back in order).
static inline __m256i bf16_bits(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, q, nan);
}

void f32_to_bf16(uint16_t* out, const float* in, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = bf16_bits(_mm256_loadu_ps(in + i)), b = bf16_bits(_mm256_loadu_ps(in + i + 8));
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), p);
    }
    for (; i < n; ++i) out[i] = kernels::f32_to_bf16(in[i]);
}

}  // namespace sl::kernels::avx2
