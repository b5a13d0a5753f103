// AVX2 + FMA variants of attention_block.h. Called only when active_isa() >= Isa::Avx2.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/avx2_tile.h"

namespace sl::kernels::avx2 {

namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace

void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* qr = q + r * q_stride;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        int i = 0;
        for (; i + 16 <= d; i += 16) {
            const __m256 q0 = _mm256_loadu_ps(qr + i), q1 = _mm256_loadu_ps(qr + i + 8);
            s0 = _mm256_add_ps(s0, _mm256_max_ps(_mm256_mul_ps(q0, _mm256_loadu_ps(kmin + i)),
                                                 _mm256_mul_ps(q0, _mm256_loadu_ps(kmax + i))));
            s1 = _mm256_add_ps(s1, _mm256_max_ps(_mm256_mul_ps(q1, _mm256_loadu_ps(kmin + i + 8)),
                                                 _mm256_mul_ps(q1, _mm256_loadu_ps(kmax + i + 8))));
        }
        for (; i + 8 <= d; i += 8) {
            const __m256 q0 = _mm256_loadu_ps(qr + i);
            s0 = _mm256_add_ps(s0, _mm256_max_ps(_mm256_mul_ps(q0, _mm256_loadu_ps(kmin + i)),
                                                 _mm256_mul_ps(q0, _mm256_loadu_ps(kmax + i))));
        }
        float s = hsum(_mm256_add_ps(s0, s1));
        for (; i < d; ++i) s += std::max(qr[i] * kmin[i], qr[i] * kmax[i]);
        out[r] = s;
    }
}

float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d) {
    // Keys in tiles of 8 (one reduction for 8 scores); every score as tile::dot1 would give it.
    float best = -__builtin_inff();
    int64_t j = 0;
    if (n_keys >= 8) {
        __m256 vbest = _mm256_set1_ps(best);
        alignas(32) float s[8];
        for (; j + 8 <= n_keys; j += 8) {
            tile::dot8(s, q, k + j * k_stride, k_stride, d);
            vbest = _mm256_max_ps(vbest, _mm256_load_ps(s));
        }
        _mm256_store_ps(s, vbest);
        for (float x : s) best = std::max(best, x);
    }
    for (; j < n_keys; ++j) best = std::max(best, tile::dot1(q, k + j * k_stride, d));
    return best;
}

}  // namespace sl::kernels::avx2
