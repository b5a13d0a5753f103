// AVX-512 variants of attention_block.h. Called only when active_isa() == Isa::Avx512.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention_block.h"

namespace sl::kernels::avx512 {

namespace {

inline float dot(const float* a, const float* b, int d) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= d; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= d; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < d) {
        const __mmask16 m = static_cast<__mmask16>((1u << (d - i)) - 1u);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

}  // namespace

void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* qr = q + r * q_stride;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int i = 0;
        for (; i + 32 <= d; i += 32) {
            const __m512 q0 = _mm512_loadu_ps(qr + i), q1 = _mm512_loadu_ps(qr + i + 16);
            s0 = _mm512_add_ps(s0, _mm512_max_ps(_mm512_mul_ps(q0, _mm512_loadu_ps(kmin + i)),
                                                 _mm512_mul_ps(q0, _mm512_loadu_ps(kmax + i))));
            s1 = _mm512_add_ps(s1, _mm512_max_ps(_mm512_mul_ps(q1, _mm512_loadu_ps(kmin + i + 16)),
                                                 _mm512_mul_ps(q1, _mm512_loadu_ps(kmax + i + 16))));
        }
        for (; i + 16 <= d; i += 16) {
            const __m512 q0 = _mm512_loadu_ps(qr + i);
            s0 = _mm512_add_ps(s0, _mm512_max_ps(_mm512_mul_ps(q0, _mm512_loadu_ps(kmin + i)),
                                                 _mm512_mul_ps(q0, _mm512_loadu_ps(kmax + i))));
        }
        if (i < d) {
            const __mmask16 m = static_cast<__mmask16>((1u << (d - i)) - 1u);
            const __m512 q0 = _mm512_maskz_loadu_ps(m, qr + i);
            s1 = _mm512_add_ps(s1, _mm512_max_ps(_mm512_mul_ps(q0, _mm512_maskz_loadu_ps(m, kmin + i)),
                                                 _mm512_mul_ps(q0, _mm512_maskz_loadu_ps(m, kmax + i))));
        }
        out[r] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
}

float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d) {
    float best = dot(q, k, d);
    for (int64_t j = 1; j < n_keys; ++j) best = std::max(best, dot(q, k + j * k_stride, d));
    return best;
}

}  // namespace sl::kernels::avx512
