// Shared inner pieces of the AVX2 attention kernels (ops_avx2.cpp, attention_block_avx2.cpp):
// dot products of one query row with 8 keys at a time, reduced together. Include only from
// *_avx2.cpp files (compiled with -mavx2 -mfma).
//
// Every dot product comes out of the same arithmetic whether its key is in a tile of 8 or scored
// alone: one 8-lane accumulator per key, fused multiply-adds over d in chunks of 8 in order, the
// lanes summed as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the d % 8 tail added in order. So a
// score does not depend on where its key falls in a call (the MSA index compares block scores
// computed by different calls bitwise).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace sl::kernels::avx2::tile {

// r[j] = the sum of the 8 lanes of v[j], j < 8, in the order above: 6 hadds, 2 permutes, 1 add
// for 8 sums instead of 8 separate reductions.
inline __m256 reduce8(const __m256* v) {
    const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
    // Per 128-bit half h: [v0, v1, v2, v3] (u0) and [v4, v5, v6, v7] (u1), each lane the sum of
    // that vector's 4 elements in half h.
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The sum of v's 8 lanes, in the order of reduce8.
inline float reduce1(__m256 v) {
    const __m256 t = _mm256_hadd_ps(v, v);
    const __m256 u = _mm256_hadd_ps(t, t);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

// out[t] = q (d) · k_t, k_t = k + t * k_stride, t < 8.
inline void dot8(float* out, const float* q, const float* k, int64_t k_stride, int d) {
    __m256 acc[8];
    for (int t = 0; t < 8; ++t) acc[t] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= d; c += 8) {
        const __m256 qc = _mm256_loadu_ps(q + c);
        for (int t = 0; t < 8; ++t) acc[t] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k + t * k_stride + c), acc[t]);
    }
    _mm256_storeu_ps(out, reduce8(acc));
    for (int t = 0; t < 8; ++t)
        for (int i = c; i < d; ++i) out[t] += q[i] * k[t * k_stride + i];
}

// q (d) · k (d), as one key of dot8.
inline float dot1(const float* q, const float* k, int d) {
    __m256 acc = _mm256_setzero_ps();
    int c = 0;
    for (; c + 8 <= d; c += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(k + c), acc);
    float s = reduce1(acc);
    for (int i = c; i < d; ++i) s += q[i] * k[i];
    return s;
}

}  // namespace sl::kernels::avx2::tile
