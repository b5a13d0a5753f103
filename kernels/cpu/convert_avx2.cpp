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

}  // namespace sl::kernels::avx2
