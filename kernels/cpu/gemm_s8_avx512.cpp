// AVX-512 VNNI tier of gemm_s8 (gemm_s8.h): up to 8 tokens x 32 columns per register tile (16
// zmm int32 accumulators); per k-quad one 4-byte broadcast per token and two 64-byte loads of the
// packed panel feed 16 vpdpbusd (u8 activations x s8 weights -> s32). The activations' quantizer
// is here too (the same arithmetic as the reference: x * (127 / amax) rounded to nearest even).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm_s8.h"

namespace sl::kernels::avx512 {

namespace {

__mmask16 mask(int64_t left) {
    return left >= 16  ? __mmask16{0xFFFF}
           : left <= 0 ? __mmask16{0}
                       : static_cast<__mmask16>((1u << left) - 1u);
}

// Y[0 .. MT) x [j, j + 32) from panel `w` (n4 / 4 quads of 128 bytes).
template <int MT>
void tile(const uint8_t* X, int64_t n4, const float* xs, const int8_t* w, const float* ws,
          const int32_t* comp, const float* b, float* Y, int64_t ldy, int64_t j, __mmask16 m0,
          __mmask16 m1) {
    __m512i acc0[MT], acc1[MT];
    for (int t = 0; t < MT; ++t) acc0[t] = _mm512_setzero_si512(), acc1[t] = _mm512_setzero_si512();
    for (int64_t k = 0; k < n4; k += 4, w += 4 * kS8Panel) {
        const __m512i w0 = _mm512_loadu_si512(w);
        const __m512i w1 = _mm512_loadu_si512(w + 64);
        for (int t = 0; t < MT; ++t) {
            int32_t quad;
            std::memcpy(&quad, X + t * n4 + k, 4);
            const __m512i x = _mm512_set1_epi32(quad);
            acc0[t] = _mm512_dpbusd_epi32(acc0[t], x, w0);
            acc1[t] = _mm512_dpbusd_epi32(acc1[t], x, w1);
        }
    }
    const __m512i c0 = _mm512_maskz_loadu_epi32(m0, comp + j);
    const __m512i c1 = _mm512_maskz_loadu_epi32(m1, comp + j + 16);
    const __m512 s0 = _mm512_maskz_loadu_ps(m0, ws + j);
    const __m512 s1 = _mm512_maskz_loadu_ps(m1, ws + j + 16);
    const __m512 b0 = b ? _mm512_maskz_loadu_ps(m0, b + j) : _mm512_setzero_ps();
    const __m512 b1 = b ? _mm512_maskz_loadu_ps(m1, b + j + 16) : _mm512_setzero_ps();
    for (int t = 0; t < MT; ++t) {
        const __m512 st = _mm512_set1_ps(xs[t]);
        // (acc - comp) * (ws * xs) + b: the reference's order of operations.
        const __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc0[t], c0)),
                                        _mm512_mul_ps(s0, st));
        const __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc1[t], c1)),
                                        _mm512_mul_ps(s1, st));
        _mm512_mask_storeu_ps(Y + t * ldy + j, m0, b ? _mm512_add_ps(v0, b0) : v0);
        _mm512_mask_storeu_ps(Y + t * ldy + j + 16, m1, b ? _mm512_add_ps(v1, b1) : v1);
    }
}

template <int MT>
void tiles(const uint8_t* X, int64_t n4, const float* xs, int64_t n_tokens, const S8Weights& W,
           const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    for (int64_t j = col_begin; j < col_end; j += kS8Panel) {
        const int8_t* w = W.packed.data() + (j / kS8Panel) * kS8Panel * n4;
        const __mmask16 m0 = mask(col_end - j), m1 = mask(col_end - j - 16);
        for (int64_t t = 0; t + MT <= n_tokens; t += MT)
            tile<MT>(X + t * n4, n4, xs + t, w, W.scale.data(), W.comp.data(), b, Y + t * ldy, ldy,
                     j, m0, m1);
    }
}

}  // namespace

void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    const int64_t n4 = s8_row_bytes(W.n);
    col_end = std::min(col_end, W.d);
    // Blocks of tokens whose activations stay in L2 while every panel passes over them.
    constexpr int64_t kBlock = 96;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kBlock) {
        const int64_t nt = std::min(kBlock, n_tokens - t0);
        const uint8_t* X = Xq + t0 * n4;
        const float* s = xs + t0;
        float* y = Y + t0 * ldy;
        const int64_t full = nt / 8 * 8;
        if (full > 0) tiles<8>(X, n4, s, full, W, b, y, ldy, col_begin, col_end);
        X += full * n4, s += full, y += full * ldy;
        switch (nt - full) {
            case 7: tiles<7>(X, n4, s, 7, W, b, y, ldy, col_begin, col_end); break;
            case 6: tiles<6>(X, n4, s, 6, W, b, y, ldy, col_begin, col_end); break;
            case 5: tiles<5>(X, n4, s, 5, W, b, y, ldy, col_begin, col_end); break;
            case 4: tiles<4>(X, n4, s, 4, W, b, y, ldy, col_begin, col_end); break;
            case 3: tiles<3>(X, n4, s, 3, W, b, y, ldy, col_begin, col_end); break;
            case 2: tiles<2>(X, n4, s, 2, W, b, y, ldy, col_begin, col_end); break;
            case 1: tiles<1>(X, n4, s, 1, W, b, y, ldy, col_begin, col_end); break;
            default: break;
        }
    }
}

void quantize_tokens(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, uint8_t* Xq,
                     float* xs) {
    const int64_t n4 = s8_row_bytes(n);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i shift = _mm512_set1_epi32(128);
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* x = X + t * ldx;
        uint8_t* q = Xq + t * n4;
        __m512 m = _mm512_setzero_ps();
        for (int64_t k = 0; k < n; k += 16)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask(n - k), x + k)));
        const float amax = _mm512_reduce_max_ps(m);
        const float inv_s = amax > 0.0f ? 127.0f / amax : 1.0f;
        const float s = 1.0f / inv_s;
        const __m512 inv = _mm512_set1_ps(inv_s);
        for (int64_t k = 0; k < n; k += 16) {
            const __mmask16 mk = mask(n - k);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + k), inv));
            v = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(v, lo), hi), shift);
            _mm_mask_storeu_epi8(q + k, mk, _mm512_cvtepi32_epi8(v));
        }
        std::fill(q + n, q + n4, uint8_t{128});
        xs[t] = s;
    }
}

}  // namespace sl::kernels::avx512
