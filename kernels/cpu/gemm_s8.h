// int8 matrix product with one scale per weight row and one per token (CTranslate2's "int8"
// compute type on the CPU): the weights quantized once at load, the activations per call; the
// sums are exact in int32 and scaled once at the end.
//
//   W  (d, n) f32 -> quantize_weights: Wq[j, k] = round(W[j, k] * 127 / max_k |W[j, k]|), ws[j] its inverse
//   X  (n_tokens, n) f32 -> quantize_tokens: Xq[t, k] = round(X[t, k] * 127 / max |X[t, :]|), xs[t] likewise
//   (CTranslate2's arithmetic: the factor 127 / amax computed first; rounding to nearest even)
//   Y[t, j] = b[j] + xs[t] * ws[j] * sum_k Xq[t, k] Wq[j, k]          (|q| <= 127, the sum in int32)
//
// Layouts (owned by the caller, sizes from the *_size functions):
//   S8Weights: n4 = n rounded up to 4; panels of kS8Panel = 32 columns; for panel p, k-quad q,
//     column c, r in 0..3: packed[((p * n4/4 + q) * 32 + c) * 4 + r] = Wq[32p + c, 4q + r]
//     (zeros past d and past n); comp[j] = 128 * sum_k Wq[j, k] (the activations are stored as
//     u8 = Xq + 128, which vpdpbusd multiplies with the s8 weights; comp removes the shift).
//   Activations: (n_tokens, n4) bytes, Xq + 128 (128 past n), and xs (n_tokens).
//
// Tiers: the scalar reference (ref::) and AVX-512 VNNI (vpdpbusd, 8 tokens x 32 columns per
// register tile). The integer sums are exact in every tier, so the tiers agree with the reference
// to float rounding of the final scaling only. Without AVX-512 (Isa below Avx512) the reference
// runs: callers that care about speed check s8_gemm_fast() and keep f32 weights otherwise.
// Threading contract: pure; workers given disjoint column ranges never write the same Y element.
// col_begin must be a multiple of kS8Panel; any alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sl::kernels {

constexpr int64_t kS8Panel = 32;

struct S8Weights {
    int64_t d = 0, n = 0;         // W's shape (d output rows, n inputs)
    std::vector<int8_t> packed;   // the panels above
    std::vector<float> scale;     // ws (d)
    std::vector<int32_t> comp;    // 128 * row sums (d)
    bool empty() const { return d == 0; }
};

// The bytes of one token's quantized activations (n rounded up to 4).
inline int64_t s8_row_bytes(int64_t n) { return (n + 3) / 4 * 4; }

// W (d, n) row-major, rows ldw >= n floats apart.
S8Weights quantize_weights(const float* W, int64_t ldw, int64_t d, int64_t n);
// The weight of row j, column k as the product sees it (ws[j] * Wq[j, k]); for tests.
float s8_weight(const S8Weights& w, int64_t j, int64_t k);

// X (n_tokens, n) rows ldx apart -> Xq (n_tokens, s8_row_bytes(n)), xs (n_tokens).
void quantize_tokens(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, uint8_t* Xq,
                     float* xs);

// Y (n_tokens, d) rows ldy apart, columns [col_begin, col_end); b may be nullptr.
void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);

// Whether gemm_s8 runs a vector tier on this CPU (AVX-512 VNNI, not lowered by SIGHTLINE_ISA).
bool s8_gemm_fast();

namespace ref {
void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);
}  // namespace ref
namespace avx512 {
void gemm_s8(const uint8_t* Xq, const float* xs, int64_t n_tokens, const S8Weights& W,
             const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);
}  // namespace avx512

}  // namespace sl::kernels
