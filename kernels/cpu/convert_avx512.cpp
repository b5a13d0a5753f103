// AVX-512 variants of convert.h. Compiled with AVX-512 flags; called only when
// active_isa() == Isa::Avx512.
#include <immintrin.h>

#include "kernels/cpu/convert.h"

namespace sl::kernels::avx512 {

void f16_to_f32(float* out, const uint16_t* in, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m256i h = _mm256_maskz_loadu_epi16(m, in + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
    }
}

void bf16_to_f32(float* out, const uint16_t* in, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
        const __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16);
        _mm512_storeu_ps(out + i, _mm512_castsi512_ps(w));
    }
    for (; i < n; ++i) out[i] = kernels::bf16_to_f32(in[i]);
}

}  // namespace sl::kernels::avx512
