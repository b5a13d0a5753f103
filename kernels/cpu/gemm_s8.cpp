#include "kernels/cpu/gemm_s8.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"

namespace sl::kernels {

namespace avx512 {
void quantize_tokens(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, uint8_t* Xq,
                     float* xs);
}  // namespace avx512

namespace {

// Round to nearest, ties to even, as vcvtps2dq does in the vector tier.
int32_t round_even(float v) { return static_cast<int32_t>(std::nearbyint(v)); }

}  // namespace

S8Weights quantize_weights(const float* W, int64_t ldw, int64_t d, int64_t n) {
    S8Weights w;
    w.d = d;
    w.n = n;
    const int64_t n4 = s8_row_bytes(n);
    const int64_t panels = (d + kS8Panel - 1) / kS8Panel;
    w.packed.assign(static_cast<size_t>(panels * kS8Panel * n4), 0);
    w.scale.assign(static_cast<size_t>(d), 0.0f);
    w.comp.assign(static_cast<size_t>(d), 0);
    std::vector<int8_t> row(static_cast<size_t>(n4), 0);
    for (int64_t j = 0; j < d; ++j) {
        const float* src = W + j * ldw;
        float amax = 0.0f;
        for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(src[k]));
        // CTranslate2's arithmetic: q = round(w * (127 / amax)), the scale its inverse.
        const float inv = amax > 0.0f ? 127.0f / amax : 1.0f;
        const float s = 1.0f / inv;
        int32_t sum = 0;
        for (int64_t k = 0; k < n; ++k) {
            const int32_t q = std::clamp(round_even(src[k] * inv), -127, 127);
            row[static_cast<size_t>(k)] = static_cast<int8_t>(q);
            sum += q;
        }
        w.scale[static_cast<size_t>(j)] = s;
        w.comp[static_cast<size_t>(j)] = 128 * sum;
        const int64_t p = j / kS8Panel, c = j % kS8Panel;
        int8_t* panel = w.packed.data() + p * kS8Panel * n4;
        for (int64_t k = 0; k < n4; ++k)
            panel[((k / 4) * kS8Panel + c) * 4 + k % 4] = row[static_cast<size_t>(k)];
    }
    return w;
}

float s8_weight(const S8Weights& w, int64_t j, int64_t k) {
    const int64_t n4 = s8_row_bytes(w.n);
    const int8_t* panel = w.packed.data() + (j / kS8Panel) * kS8Panel * n4;
    return w.scale[static_cast<size_t>(j)] *
           static_cast<float>(panel[((k / 4) * kS8Panel + j % kS8Panel) * 4 + k % 4]);
}

void quantize_tokens(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, uint8_t* Xq,
                     float* xs) {
    if (active_isa() == Isa::Avx512) {
        avx512::quantize_tokens(X, ldx, n_tokens, n, Xq, xs);
        return;
    }
    const int64_t n4 = s8_row_bytes(n);
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* x = X + t * ldx;
        uint8_t* q = Xq + t * n4;
        float amax = 0.0f;
        for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(x[k]));
        const float inv = amax > 0.0f ? 127.0f / amax : 1.0f;
        const float s = 1.0f / inv;
        for (int64_t k = 0; k < n; ++k)
            q[k] = static_cast<uint8_t>(std::clamp(round_even(x[k] * inv), -127, 127) + 128);
        std::fill(q + n, q + n4, uint8_t{128});
        xs[t] = s;
    }
}

namespace ref {

void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    const int64_t n4 = s8_row_bytes(W.n);
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t j = col_begin; j < col_end; ++j) {
            const int8_t* panel = W.packed.data() + (j / kS8Panel) * kS8Panel * n4;
            int32_t acc = 0;
            for (int64_t k = 0; k < n4; ++k)
                acc += static_cast<int32_t>(Xq[t * n4 + k]) *
                       static_cast<int32_t>(panel[((k / 4) * kS8Panel + j % kS8Panel) * 4 + k % 4]);
            const float v = static_cast<float>(acc - W.comp[static_cast<size_t>(j)]) *
                            (W.scale[static_cast<size_t>(j)] * xs[t]);
            Y[t * ldy + j] = b ? v + b[j] : v;
        }
}

}  // namespace ref

bool s8_gemm_fast() { return active_isa() == Isa::Avx512; }

void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end) {
    if (active_isa() == Isa::Avx512) {
        avx512::gemm_s8(Xq, xs, n_tokens, W, b, Y, ldy, col_begin, col_end);
        return;
    }
    ref::gemm_s8(Xq, xs, n_tokens, W, b, Y, ldy, col_begin, col_end);
}

}  // namespace sl::kernels
