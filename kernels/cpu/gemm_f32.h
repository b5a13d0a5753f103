// f32 matrix product for encoder-style batches (many tokens through one weight matrix), with the
// weights packed once into column panels so the inner loop broadcasts activations and streams one
// contiguous run of weights: no horizontal sums, outputs stored as whole vectors.
//
//   const float* X;   // (n_tokens, n), row stride ldx >= n
//   const float* W;   // (d, n): a Linear weight, row-major (PyTorch / ggml order)
//   const float* Wp;  // W packed by pack_panels: for panel p = j / kGemmPanel,
//                     //   Wp[(p * n + k) * kGemmPanel + j % kGemmPanel] = W[j * n + k]
//                     //   (the last panel zero-padded); packed_size(d, n) floats
//   const float* b;   // (d) bias, or nullptr
//   float* Y;         // (n_tokens, d), row stride ldy >= d
//   Y[t, j] = b[j] + sum_k X[t, k] * W[j, k]   for j in [col_begin, col_end), all t
//
// Register tiles: AVX-512 6 tokens x 32 columns, AVX2 6 x 16; the scalar reference (ref::) sums
// in the same k order per output, so tiers agree with it to float rounding (FMA), not bitwise.
// Threading contract: pure; workers given disjoint column ranges never write the same Y element.
// col_begin must be a multiple of kGemmPanel (split work in multiples of 32 columns); any
// alignment of X, Wp, b, Y. Dispatch uses active_isa(), read on each call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::kernels {

constexpr int64_t kGemmPanel = 32;
// The dispatcher runs the tiers on blocks of this many tokens (a multiple of both tiles' 6).
constexpr int64_t kGemmTokenBlock = 96;

// Floats that pack_panels writes for a (d, n) weight.
size_t packed_size(int64_t d, int64_t n);
void pack_panels(const float* W, int64_t d, int64_t n, float* Wp);
// The same from a W (d, n) whose rows are ldw >= n floats apart (a head's slice of K).
void pack_panels(const float* W, int64_t ldw, int64_t d, int64_t n, float* Wp);
// The same from W's transpose: Wt (n, d), rows ldw >= d floats apart (a head's slice of V is the
// transpose of the weight that P V needs).
void pack_panels_transposed(const float* Wt, int64_t ldw, int64_t n, int64_t d, float* Wp);

void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t d,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);

namespace ref {
void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t d,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);
}  // namespace ref
namespace avx2 {
void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t d,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);
}  // namespace avx2
namespace avx512 {
void gemm_f32(const float* X, int64_t ldx, int64_t n_tokens, int64_t n, const float* Wp, int64_t d,
              const float* b, float* Y, int64_t ldy, int64_t col_begin, int64_t col_end);
}  // namespace avx512

}  // namespace sl::kernels
