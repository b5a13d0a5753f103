// AVX-512 activation quantizers (quantize.h). Compiled with AVX-512 flags; called only when
// active_isa() == Isa::Avx512. Same output bytes as the ref:: functions (see quantize_avx2.cpp).
#include <immintrin.h>

#include "kernels/cpu/quant_common.h"
#include "kernels/cpu/quantize.h"

namespace sl::kernels::avx512 {

namespace {

// roundf (half away from zero) of values with |t| < 2^23, then to int32.
inline __m512i roundf_epi32(__m512 t) {
    const __m512 tr = _mm512_roundscale_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(t, tr));  // exact
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(t, _mm512_set1_ps(-0.0f)));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(tr, up, tr, one));
}

inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 mul = _mm512_set1_ps(id);
    const __m512i q0 = roundf_epi32(_mm512_mul_ps(v0, mul));
    const __m512i q1 = roundf_epi32(_mm512_mul_ps(v1, mul));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
    if (sum) *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    return d;
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
    const int64_t nb = n / kQK8_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        y[i].d = to_fp16(quantize_block32(x, y[i].qs, nullptr));
    }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
    const int64_t nb = n / kQK8_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
        int sum = 0;
        const float d = quantize_block32(x, y[i].qs, &sum);
        y[i].d = to_fp16(d);
        y[i].s = to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        __m512 amaxv = _mm512_setzero_ps();
        for (int k = 0; k < kQK_K; k += 16) amaxv = _mm512_max_ps(amaxv, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
        const float amax = _mm512_reduce_max_ps(amaxv);
        if (amax == 0.0f) {
            y[i].d = 0.0f;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            std::memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        // The reference keeps the first value of largest magnitude (its sign matters).
        float max = 0.0f;
        for (int k = 0; k < kQK_K; k += 16) {
            const __mmask16 m =
                _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m) {
                max = x[k + __builtin_ctz(static_cast<unsigned>(m))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 mul = _mm512_set1_ps(iscale);
        const __m512i lim = _mm512_set1_epi32(127);
        for (int g = 0; g < kQK_K / 16; ++g) {
            const __m512i q = _mm512_min_epi32(lim, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), mul)));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * g), _mm512_cvtsepi32_epi8(q));
            y[i].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
        }
        y[i].d = 1.0f / iscale;
    }
}

}  // namespace sl::kernels::avx512
