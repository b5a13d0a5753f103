// AVX2 + FMA variants of ops.h. Called only when active_isa() >= Isa::Avx2.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/avx2_tile.h"
#include "kernels/cpu/ops.h"

namespace sl::kernels::avx2 {

namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// exp(x) for x <= 88 as in ops_avx512.cpp; 2^n is built in the exponent bits. x < -87.3
// (including -inf) gives 0.
inline __m256 exp_ps(__m256 x) {
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
    const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

// out (R * 8 floats) += sum_j p[j] * v_j: the R registers of output stay put while every row passes.
template <int R>
inline void accumulate_pass(float* out, const float* p, const float* v, int64_t v_stride, int64_t n) {
    __m256 a[R];
    for (int i = 0; i < R; ++i) a[i] = _mm256_loadu_ps(out + 8 * i);
    for (int64_t j = 0; j < n; ++j) {
        const float* r = v + j * v_stride;
        const __m256 pj = _mm256_set1_ps(p[j]);
        for (int i = 0; i < R; ++i) a[i] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(r + 8 * i), a[i]);
    }
    for (int i = 0; i < R; ++i) _mm256_storeu_ps(out + 8 * i, a[i]);
}

}  // namespace

float exp_shifted_sum(float* x, int64_t n, float shift) {
    const __m256 vs = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum(acc);
    for (; i < n; ++i) {
        float tail[8] = {x[i], -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(tail), vs));
        _mm256_storeu_ps(tail, e);
        x[i] = tail[0];
        sum += tail[0];
    }
    return sum;
}

float max_f32(const float* x, int64_t n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
        m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
        m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    const __m256 v = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float mx = lanes[0];
    for (int l = 1; l < 8; ++l) mx = lanes[l] > mx ? lanes[l] : mx;
    for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

float dot_f32(const float* a, const float* b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

void axpy_f32(float* y, float a, const float* x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] += a * x[i];
}

void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d, float scale) {
    const int di = static_cast<int>(d);
    int64_t j = 0;
    const __m256 vs = _mm256_set1_ps(scale);
    for (; j + 8 <= n; j += 8) {  // 8 keys share one reduction (tile::dot8)
        tile::dot8(out + j, q, k + j * k_stride, k_stride, di);
        _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_loadu_ps(out + j), vs));
    }
    for (; j < n; ++j) out[j] = tile::dot1(q, k + j * k_stride, di) * scale;
}

void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d) {
    int64_t c = 0;
    for (; c + 64 <= d; c += 64) accumulate_pass<8>(out + c, p, v + c, v_stride, n);
    for (; c + 32 <= d; c += 32) accumulate_pass<4>(out + c, p, v + c, v_stride, n);
    if (c < d)
        for (int64_t j = 0; j < n; ++j) axpy_f32(out + c, p[j], v + j * v_stride + c, d - c);
}

}  // namespace sl::kernels::avx2
