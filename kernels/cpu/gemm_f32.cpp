#include "kernels/cpu/gemm_f32.h"

#include <algorithm>

#include "kernels/cpu/cpu_features.h"

namespace sl::kernels {

size_t packed_size(int64_t d, int64_t n) {
    return static_cast<size_t>((d + kGemmPanel - 1) / kGemmPanel * kGemmPanel * n);
}

void pack_panels(const float* W, int64_t d, int64_t n, float* Wp) {
    pack_panels(W, n, d, n, Wp);
}

void pack_panels(const float* W, int64_t ldw, int64_t d, int64_t n, float* Wp) {
    for (int64_t p = 0; p * kGemmPanel < d; ++p) {
        float* out = Wp + p * n * kGemmPanel;
        const int64_t j0 = p * kGemmPanel;
        const int64_t w = std::min(kGemmPanel, d - j0);
        if (w < kGemmPanel) std::fill(out, out + n * kGemmPanel, 0.0f);
        for (int64_t c = 0; c < w; ++c) {
            const float* row = W + (j0 + c) * ldw;
            for (int64_t k = 0; k < n; ++k) out[k * kGemmPanel + c] = row[k];
        }
    }
}

void pack_panels_transposed(const float* Wt, int64_t ldw, int64_t n, int64_t d, float* Wp) {
    for (int64_t p = 0; p * kGemmPanel < d; ++p) {
        float* out = Wp + p * n * kGemmPanel;
        const int64_t j0 = p * kGemmPanel;
        const int64_t w = std::min(kGemmPanel, d - j0);
        for (int64_t k = 0; k < n; ++k) {
            const float* src = Wt + k * ldw + j0;
            float* dst = out + k * kGemmPanel;
            std::copy(src, src + w, dst);
            std::fill(dst + w, dst + kGemmPanel, 0.0f);
        }
    }
}

namespace ref {

void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t j = col_begin; j < col_end; ++j) {
            const float* w = Wp + (j / kGemmPanel) * n * kGemmPanel + j % kGemmPanel;
            float s = b ? b[j] : 0.0f;
            for (int64_t k = 0; k < n; ++k) s += X[t * ldx + k] * w[k * kGemmPanel];
            Y[t * ldy + j] = s;
        }
}

}  // namespace ref

void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t d,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    using Fn = void (*)(const float*, int64_t, int64_t, int64_t, const float*, int64_t,
                        const float*, float*, int64_t, int64_t, int64_t);
    Fn fn = &ref::gemm_f32;
    switch (active_isa()) {
        case Isa::Avx512:
            fn = &avx512::gemm_f32;
            break;
        case Isa::Avx2:
            fn = &avx2::gemm_f32;
            break;
        case Isa::Scalar:
            break;
    }
    // Blocks of tokens whose activations stay in L2 while every panel of W passes over them (a
    // batch of thousands of tokens would otherwise stream X from memory once per panel).
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kGemmTokenBlock)
        fn(X + t0 * ldx, ldx, std::min(kGemmTokenBlock, n_tokens - t0), n, Wp, d, b, Y + t0 * ldy,
           ldy, col_begin, col_end);
}

}  // namespace sl::kernels
