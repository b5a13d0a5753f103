// AVX-512 variants of ops.h. Called only when active_isa() == Isa::Avx512.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/ops.h"

namespace sl::kernels::avx512 {

namespace {

// exp(x) for x <= 88: n = round(x / ln2), r = x - n ln2 (two-step), e^r by its degree-6 Taylor
// polynomial (|r| <= ln2 / 2: truncation < 1.2e-7 relative), times 2^n (scalef). x < -87.3
// (including -inf) gives 0.
inline __m512 exp_ps(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
    const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(p, n));
}

// r[j] = sum of the 16 lanes of v[j], j < 16: pairwise unpack/shuffle tree, 45 operations for
// 16 sums instead of 16 separate reductions.
inline __m512 reduce16(const __m512* v) {
    __m512 quad[4];
    for (int g = 0; g < 4; ++g) {
        const __m512 a = v[4 * g], b = v[4 * g + 1], c = v[4 * g + 2], d = v[4 * g + 3];
        // Per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] and likewise for c, d.
        const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
        // Per lane L: [a_L, b_L, c_L, d_L], the sums of each vector's 4 elements in lane L.
        quad[g] = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    // Sum the four 128-bit lanes of each quad; quad g lands in lane g.
    const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(quad[0], quad[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(quad[0], quad[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 w = _mm512_add_ps(_mm512_shuffle_f32x4(quad[2], quad[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(quad[2], quad[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u, w, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u, w, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace

void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d, float scale) {
    int64_t j = 0;
    if (d % 16 == 0) {
        const __m512 vs = _mm512_set1_ps(scale);
        for (; j + 16 <= n; j += 16) {
            __m512 acc[16];
            for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
            for (int64_t c = 0; c < d; c += 16) {
                const __m512 qc = _mm512_loadu_ps(q + c);
                for (int t = 0; t < 16; ++t)
                    acc[t] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(k + (j + t) * k_stride + c), acc[t]);
            }
            _mm512_storeu_ps(out + j, _mm512_mul_ps(reduce16(acc), vs));
        }
    }
    for (; j < n; ++j) out[j] = dot_f32(q, k + j * k_stride, d) * scale;
}

void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d) {
    int64_t c = 0;
    for (; c + 64 <= d; c += 64) {  // 4 registers of output stay put while every row passes
        __m512 a0 = _mm512_loadu_ps(out + c), a1 = _mm512_loadu_ps(out + c + 16);
        __m512 a2 = _mm512_loadu_ps(out + c + 32), a3 = _mm512_loadu_ps(out + c + 48);
        for (int64_t j = 0; j < n; ++j) {
            const float* r = v + j * v_stride + c;
            const __m512 pj = _mm512_set1_ps(p[j]);
            a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r), a0);
            a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 16), a1);
            a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 32), a2);
            a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(r + 48), a3);
        }
        _mm512_storeu_ps(out + c, a0);
        _mm512_storeu_ps(out + c + 16, a1);
        _mm512_storeu_ps(out + c + 32, a2);
        _mm512_storeu_ps(out + c + 48, a3);
    }
    if (c < d)
        for (int64_t j = 0; j < n; ++j) axpy_f32(out + c, p[j], v + j * v_stride + c, d - c);
}

float exp_shifted_sum(float* x, int64_t n, float shift) {
    const __m512 vs = _mm512_set1_ps(shift);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs));
        _mm512_storeu_ps(x + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
        _mm512_mask_storeu_ps(x + i, m, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(m, e));
    }
    return _mm512_reduce_add_ps(acc);
}

float max_f32(const float* x, int64_t n) {
    // Four accumulators hide the latency of vmaxps; the tail is masked to -inf.
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
    }
    for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(ninf, m, x + i));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

float dot_f32(const float* a, const float* b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void axpy_f32(float* y, float a, const float* x, int64_t n) {
    const __m512 va = _mm512_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 r = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

}  // namespace sl::kernels::avx512
