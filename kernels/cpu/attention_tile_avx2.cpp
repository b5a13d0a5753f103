// AVX2 + FMA variant of attention_tile.h (d % 8 == 0). Called only when active_isa() >= Isa::Avx2.
//
// Registers: scores of R rows x NV vectors of 8 keys (R * NV <= 8 accumulators) gather over the
// d channels, each channel one load per key vector and one broadcast per row; P·V keeps R rows x
// NV vectors of 8 output channels while the block's values stream past once.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/ops.h"

namespace sl::kernels::avx2 {

namespace {

// p[r * ldp + j0 + 8 v + i] = scale * q[r] · k_{j0 + 8 v + i}.
template <int R, int NV>
inline void scores(float* p, int64_t ldp, const float* const* q, const float* kt, int64_t ldk, int64_t j0, int d,
                   __m256 vs) {
    __m256 a[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) a[r][v] = _mm256_setzero_ps();
    for (int c = 0; c < d; ++c) {
        const float* kc = kt + c * ldk + j0;
        __m256 k[NV];
        for (int v = 0; v < NV; ++v) k[v] = _mm256_loadu_ps(kc + 8 * v);
        for (int r = 0; r < R; ++r) {
            const __m256 b = _mm256_set1_ps(q[r][c]);
            for (int v = 0; v < NV; ++v) a[r][v] = _mm256_fmadd_ps(b, k[v], a[r][v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) _mm256_storeu_ps(p + r * ldp + j0 + 8 * v, _mm256_mul_ps(a[r][v], vs));
}

// acc[r * d + c0 + 8 v + i] += Σ_j p[r * ldp + j] v_j[c0 + 8 v + i].
template <int R, int NV>
inline void pv(float* acc, int d, const float* p, int64_t ldp, const float* val, int64_t v_stride, int n, int c0) {
    __m256 a[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) a[r][v] = _mm256_loadu_ps(acc + r * d + c0 + 8 * v);
    for (int j = 0; j < n; ++j) {
        const float* vr = val + j * v_stride + c0;
        __m256 x[NV];
        for (int v = 0; v < NV; ++v) x[v] = _mm256_loadu_ps(vr + 8 * v);
        for (int r = 0; r < R; ++r) {
            const __m256 b = _mm256_set1_ps(p[r * ldp + j]);
            for (int v = 0; v < NV; ++v) a[r][v] = _mm256_fmadd_ps(b, x[v], a[r][v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) _mm256_storeu_ps(acc + r * d + c0 + 8 * v, a[r][v]);
}

template <int R>
void tile(const float* const* q, const float* kt, int64_t ldk, const float* val, int64_t v_stride, int n, int d,
          float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum) {
    const __m256 vs = _mm256_set1_ps(scale);
    const int64_t cols = tile_ldk(n);  // a multiple of 16: two vectors of 8 keys at a time
    for (int64_t j0 = 0; j0 < cols; j0 += 16) scores<R, 2>(p, ldp, q, kt, ldk, j0, d, vs);
    for (int r = 0; r < R; ++r) {
        float* pr = p + r * ldp;
        __m256 mx = _mm256_set1_ps(-INFINITY);
        int j = 0;
        for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(pr + j));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, mx);
        float bm = lanes[0];
        for (int i = 1; i < 8; ++i) bm = std::max(bm, lanes[i]);
        for (; j < n; ++j) bm = std::max(bm, pr[j]);
        if (bm > m[r]) {
            const float f = std::exp(m[r] - bm);
            const __m256 vf = _mm256_set1_ps(f);
            float* ar = acc + r * d;
            for (int c = 0; c < d; c += 8) _mm256_storeu_ps(ar + c, _mm256_mul_ps(_mm256_loadu_ps(ar + c), vf));
            l[r] *= f;
            m[r] = bm;
        }
        bsum[r] = exp_shifted_sum(pr, n, m[r]);
        l[r] += bsum[r];
    }
    int c0 = 0;
    for (; c0 + 16 <= d; c0 += 16) pv<R, 2>(acc, d, p, ldp, val, v_stride, n, c0);
    if (c0 < d) pv<R, 1>(acc, d, p, ldp, val, v_stride, n, c0);
}


template <int R>
float max_tile(const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp) {
    const __m256 one = _mm256_set1_ps(1.0f);  // scores unscaled (x 1 is exact)
    const int64_t cols = tile_ldk(n);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) scores<R, 2>(p, ldp, q, kt, ldk, j0, d, one);
    float best = -INFINITY;
    for (int r = 0; r < R; ++r) {
        const float* pr = p + r * ldp;
        __m256 mx = _mm256_set1_ps(-INFINITY);
        int j = 0;
        for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(pr + j));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, mx);
        for (float x : lanes) best = std::max(best, x);
        for (; j < n; ++j) best = std::max(best, pr[j]);
    }
    return best;
}

}  // namespace

void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum) {
    switch (R) {
        case 1: return tile<1>(q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
        case 2: return tile<2>(q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
        case 3: return tile<3>(q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
        default: return tile<4>(q, kt, ldk, v, v_stride, n, d, scale, m, l, acc, p, ldp, bsum);
    }
}

float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp) {
    switch (R) {
        case 1: return max_tile<1>(q, kt, ldk, n, d, p, ldp);
        case 2: return max_tile<2>(q, kt, ldk, n, d, p, ldp);
        case 3: return max_tile<3>(q, kt, ldk, n, d, p, ldp);
        default: return max_tile<4>(q, kt, ldk, n, d, p, ldp);
    }
}

}  // namespace sl::kernels::avx2
