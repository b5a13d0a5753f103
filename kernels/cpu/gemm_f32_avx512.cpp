// AVX-512 tier of gemm_f32: 6 tokens x 32 columns (12 zmm accumulators) per register tile, the
// weights streamed from one packed panel (64 contiguous bytes x 2 per k).
#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"

namespace sl::kernels::avx512 {

namespace {

// Y[0 .. MT) x [j, j+32) from panel `w`; m0, m1 mask the columns past col_end (bias and stores;
// the panel itself is zero-padded, so its loads need no mask).
template <int MT>
void tile(const float* X, int64_t ldx, int64_t n, const float* w, const float* b, float* Y,
          int64_t ldy, int64_t j, __mmask16 m0, __mmask16 m1) {
    __m512 acc0[MT], acc1[MT];
    const __m512 b0 = b ? _mm512_maskz_loadu_ps(m0, b + j) : _mm512_setzero_ps();
    const __m512 b1 = b ? _mm512_maskz_loadu_ps(m1, b + j + 16) : _mm512_setzero_ps();
    for (int t = 0; t < MT; ++t) acc0[t] = b0, acc1[t] = b1;
    for (int64_t k = 0; k < n; ++k, w += kGemmPanel) {
        const __m512 w0 = _mm512_loadu_ps(w);
        const __m512 w1 = _mm512_loadu_ps(w + 16);
        for (int t = 0; t < MT; ++t) {
            const __m512 x = _mm512_set1_ps(X[t * ldx + k]);
            acc0[t] = _mm512_fmadd_ps(x, w0, acc0[t]);
            acc1[t] = _mm512_fmadd_ps(x, w1, acc1[t]);
        }
    }
    for (int t = 0; t < MT; ++t) {
        _mm512_mask_storeu_ps(Y + t * ldy + j, m0, acc0[t]);
        _mm512_mask_storeu_ps(Y + t * ldy + j + 16, m1, acc1[t]);
    }
}

__mmask16 mask(int64_t left) {
    return left >= 16  ? __mmask16{0xFFFF}
           : left <= 0 ? __mmask16{0}
                       : static_cast<__mmask16>((1u << left) - 1u);
}

}  // namespace

void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    for (int64_t j = col_begin; j < col_end; j += kGemmPanel) {
        const float* w = Wp + (j / kGemmPanel) * n * kGemmPanel;
        const __mmask16 m0 = mask(col_end - j), m1 = mask(col_end - j - 16);
        int64_t t = 0;
        for (; t + 6 <= n_tokens; t += 6)
            tile<6>(X + t * ldx, ldx, n, w, b, Y + t * ldy, ldy, j, m0, m1);
        const float* x = X + t * ldx;
        float* y = Y + t * ldy;
        switch (n_tokens - t) {
            case 5:
                tile<5>(x, ldx, n, w, b, y, ldy, j, m0, m1);
                break;
            case 4:
                tile<4>(x, ldx, n, w, b, y, ldy, j, m0, m1);
                break;
            case 3:
                tile<3>(x, ldx, n, w, b, y, ldy, j, m0, m1);
                break;
            case 2:
                tile<2>(x, ldx, n, w, b, y, ldy, j, m0, m1);
                break;
            case 1:
                tile<1>(x, ldx, n, w, b, y, ldy, j, m0, m1);
                break;
            default:
                break;
        }
    }
}

}  // namespace sl::kernels::avx512
