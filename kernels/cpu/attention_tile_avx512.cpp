// AVX-512 variant of attention_tile.h (d % 16 == 0). Called only when active_isa() == Isa::Avx512.
//
// Registers: scores of R rows x NV vectors of 16 keys (R * NV <= 16 accumulators) gather over the
// d channels, each channel one load per key vector and one broadcast per row; P·V keeps R rows x
// NV vectors of 16 output channels while the block's values stream past once.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/ops.h"

namespace sl::kernels::avx512 {

namespace {

// p[r * ldp + j0 + 16 v + i] = scale * q[r] · k_{j0 + 16 v + i}.
template <int R, int NV>
inline void scores(float* p, int64_t ldp, const float* const* q, const float* kt, int64_t ldk, int64_t j0, int d,
                   __m512 vs) {
    __m512 a[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) a[r][v] = _mm512_setzero_ps();
    for (int c = 0; c < d; ++c) {
        const float* kc = kt + c * ldk + j0;
        __m512 k[NV];
        for (int v = 0; v < NV; ++v) k[v] = _mm512_loadu_ps(kc + 16 * v);
        for (int r = 0; r < R; ++r) {
            const __m512 b = _mm512_set1_ps(q[r][c]);
            for (int v = 0; v < NV; ++v) a[r][v] = _mm512_fmadd_ps(b, k[v], a[r][v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) _mm512_storeu_ps(p + r * ldp + j0 + 16 * v, _mm512_mul_ps(a[r][v], vs));
}

// acc[r * d + c0 + 16 v + i] += Σ_j p[r * ldp + j] v_j[c0 + 16 v + i].
template <int R, int NV>
inline void pv(float* acc, int d, const float* p, int64_t ldp, const float* val, int64_t v_stride, int n, int c0) {
    __m512 a[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) a[r][v] = _mm512_loadu_ps(acc + r * d + c0 + 16 * v);
    for (int j = 0; j < n; ++j) {
        const float* vr = val + j * v_stride + c0;
        __m512 x[NV];
        for (int v = 0; v < NV; ++v) x[v] = _mm512_loadu_ps(vr + 16 * v);
        for (int r = 0; r < R; ++r) {
            const __m512 b = _mm512_set1_ps(p[r * ldp + j]);
            for (int v = 0; v < NV; ++v) a[r][v] = _mm512_fmadd_ps(b, x[v], a[r][v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + r * d + c0 + 16 * v, a[r][v]);
}

template <int R>
void tile(const float* const* q, const float* kt, int64_t ldk, const float* val, int64_t v_stride, int n, int d,
          float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum) {
    const __m512 vs = _mm512_set1_ps(scale);
    const int64_t cols = tile_ldk(n);
    int64_t j0 = 0;
    for (; j0 + 64 <= cols; j0 += 64) scores<R, 4>(p, ldp, q, kt, ldk, j0, d, vs);
    switch ((cols - j0) / 16) {
        case 3: scores<R, 3>(p, ldp, q, kt, ldk, j0, d, vs); break;
        case 2: scores<R, 2>(p, ldp, q, kt, ldk, j0, d, vs); break;
        case 1: scores<R, 1>(p, ldp, q, kt, ldk, j0, d, vs); break;
        default: break;
    }
    for (int r = 0; r < R; ++r) {
        float* pr = p + r * ldp;
        __m512 mx = _mm512_set1_ps(-INFINITY);
        int j = 0;
        for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(pr + j));
        if (j < n) {
            const auto mask = static_cast<__mmask16>((1u << (n - j)) - 1u);
            mx = _mm512_mask_max_ps(mx, mask, mx, _mm512_maskz_loadu_ps(mask, pr + j));
        }
        const float bm = _mm512_reduce_max_ps(mx);
        if (bm > m[r]) {
            const float f = std::exp(m[r] - bm);
            const __m512 vf = _mm512_set1_ps(f);
            float* ar = acc + r * d;
            for (int c = 0; c < d; c += 16) _mm512_storeu_ps(ar + c, _mm512_mul_ps(_mm512_loadu_ps(ar + c), vf));
            l[r] *= f;
            m[r] = bm;
        }
        bsum[r] = exp_shifted_sum(pr, n, m[r]);
        l[r] += bsum[r];
    }
    int c0 = 0;
    for (; c0 + 64 <= d; c0 += 64) pv<R, 4>(acc, d, p, ldp, val, v_stride, n, c0);
    switch ((d - c0) / 16) {
        case 3: pv<R, 3>(acc, d, p, ldp, val, v_stride, n, c0); break;
        case 2: pv<R, 2>(acc, d, p, ldp, val, v_stride, n, c0); break;
        case 1: pv<R, 1>(acc, d, p, ldp, val, v_stride, n, c0); break;
        default: break;
    }
}


template <int R>
float max_tile(const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp) {
    const __m512 one = _mm512_set1_ps(1.0f);  // scores unscaled (x 1 is exact)
    const int64_t cols = tile_ldk(n);
    int64_t j0 = 0;
    for (; j0 + 64 <= cols; j0 += 64) scores<R, 4>(p, ldp, q, kt, ldk, j0, d, one);
    switch ((cols - j0) / 16) {
        case 3: scores<R, 3>(p, ldp, q, kt, ldk, j0, d, one); break;
        case 2: scores<R, 2>(p, ldp, q, kt, ldk, j0, d, one); break;
        case 1: scores<R, 1>(p, ldp, q, kt, ldk, j0, d, one); break;
        default: break;
    }
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < R; ++r) {
        const float* pr = p + r * ldp;
        int j = 0;
        for (; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(pr + j));
        if (j < n) {
            const auto mask = static_cast<__mmask16>((1u << (n - j)) - 1u);
            mx = _mm512_mask_max_ps(mx, mask, mx, _mm512_maskz_loadu_ps(mask, pr + j));
        }
    }
    return _mm512_reduce_max_ps(mx);
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

}  // namespace sl::kernels::avx512
