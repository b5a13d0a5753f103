// AVX2 tier of gemm_f32: 6 tokens x 16 columns (12 ymm accumulators) per register tile, half a
// packed panel at a time; columns past col_end are computed into a stack row and not stored.
#include <algorithm>
#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"

namespace sl::kernels::avx2 {

namespace {

// Y[0 .. MT) x [j, j + cols) (cols <= 16) from half-panel `w` (stride kGemmPanel per k).
template <int MT>
void tile(const float* X, int64_t ldx, int64_t n, const float* w, const float* b, float* Y,
          int64_t ldy, int64_t j, int64_t cols) {
    __m256 acc0[MT], acc1[MT];
    alignas(32) float bias[16] = {};
    if (b) std::copy(b + j, b + j + cols, bias);
    const __m256 b0 = _mm256_load_ps(bias), b1 = _mm256_load_ps(bias + 8);
    for (int t = 0; t < MT; ++t) acc0[t] = b0, acc1[t] = b1;
    for (int64_t k = 0; k < n; ++k, w += kGemmPanel) {
        const __m256 w0 = _mm256_loadu_ps(w);
        const __m256 w1 = _mm256_loadu_ps(w + 8);
        for (int t = 0; t < MT; ++t) {
            const __m256 x = _mm256_broadcast_ss(X + t * ldx + k);
            acc0[t] = _mm256_fmadd_ps(x, w0, acc0[t]);
            acc1[t] = _mm256_fmadd_ps(x, w1, acc1[t]);
        }
    }
    for (int t = 0; t < MT; ++t) {
        if (cols == 16) {
            _mm256_storeu_ps(Y + t * ldy + j, acc0[t]);
            _mm256_storeu_ps(Y + t * ldy + j + 8, acc1[t]);
        } else {
            alignas(32) float row[16];
            _mm256_store_ps(row, acc0[t]);
            _mm256_store_ps(row + 8, acc1[t]);
            std::copy(row, row + cols, Y + t * ldy + j);
        }
    }
}

}  // namespace

void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    for (int64_t j = col_begin; j < col_end; j += 16) {
        const float* w = Wp + (j / kGemmPanel) * n * kGemmPanel + j % kGemmPanel;
        const int64_t cols = std::min<int64_t>(16, col_end - j);
        int64_t t = 0;
        for (; t + 6 <= n_tokens; t += 6)
            tile<6>(X + t * ldx, ldx, n, w, b, Y + t * ldy, ldy, j, cols);
        const float* x = X + t * ldx;
        float* y = Y + t * ldy;
        switch (n_tokens - t) {
            case 5:
                tile<5>(x, ldx, n, w, b, y, ldy, j, cols);
                break;
            case 4:
                tile<4>(x, ldx, n, w, b, y, ldy, j, cols);
                break;
            case 3:
                tile<3>(x, ldx, n, w, b, y, ldy, j, cols);
                break;
            case 2:
                tile<2>(x, ldx, n, w, b, y, ldy, j, cols);
                break;
            case 1:
                tile<1>(x, ldx, n, w, b, y, ldy, j, cols);
                break;
            default:
                break;
        }
    }
}

}  // namespace sl::kernels::avx2
