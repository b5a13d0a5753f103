// Y = X @ W^T for a quantized weight matrix: the entry points the transformer runtime calls.
//
//   const void* W;  // (d, n): d rows of n elements in `wtype`'s block format (GGUF row-major)
//   const float* X; // (n_tokens, n)
//   float* Y;       // (n_tokens, d), row stride ldy >= d
//
// Two steps, so the caller can spread the work over its own threads:
//   1. quantize_activations(): X -> Xq, once per call, in vec_dot_type(wtype) (Q8_0 / Q8_1 / Q8_K,
//      or plain f32 for F32/F16/BF16 weights). Token rows are independent: a caller may split
//      this step by token ranges (offset X by t0 * n floats, Xq by t0 * activation_row_bytes()).
//   2. matmul_rows(): rows [row_begin, row_end) of W against all tokens of Xq.
//
// Threading contract: W and Xq are shared read-only by all workers; each worker writes only
// Y[t * ldy + r] for r in its own [row_begin, row_end), so disjoint row ranges never race. Give
// workers ranges that are multiples of 16 rows to keep them off each other's Y cache lines.
// matmul_rows allocates nothing (its scratch is on the stack) and may run on any thread; the caller
// owns Xq (activation_row_bytes(wtype, n) * n_tokens bytes, 4-byte aligned) and keeps W, Xq and Y
// alive until every worker has returned. Dispatch uses active_isa(), read on each call.
//
// For n_tokens > 1 (prefill) each weight row is decoded once per group of kMaxDotTokens tokens
// and rows are walked in small tiles whose weights stay in L1 while all tokens pass over them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

// Bytes of one activation row of n elements in the format matmul_rows expects for `wtype`.
// Throws std::invalid_argument when wtype has no kernel or n is not a whole number of its blocks.
size_t activation_row_bytes(TensorType wtype, int64_t n);

// Xq (n_tokens rows of activation_row_bytes(wtype, n)) <- X (n_tokens, n). For F32/F16/BF16
// weights the format is f32 and this is a copy: callers may skip it and pass X as Xq.
void quantize_activations(TensorType wtype, const float* X, int64_t n_tokens, int64_t n, void* Xq);

// Y[t * ldy + r] = W_r · Xq_t for r in [row_begin, row_end), t in [0, n_tokens).
void matmul_rows(TensorType wtype, const void* W, int64_t n, const void* Xq, int64_t n_tokens, float* Y,
                 int64_t ldy, int64_t row_begin, int64_t row_end);

// The single-threaded whole product: Y (n_tokens, d) = X (n_tokens, n) @ W (d, n)^T, ldy = d.
// Allocates the quantized activations itself.
void matmul(TensorType wtype, const void* W, int64_t d, int64_t n, const float* X, int64_t n_tokens, float* Y);

namespace ref {
// The same product through the scalar reference kernels, one row and one token at a time.
void matmul(TensorType wtype, const void* W, int64_t d, int64_t n, const float* X, int64_t n_tokens, float* Y);
}  // namespace ref

}  // namespace sl::kernels
