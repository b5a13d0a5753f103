// Quantized blocks -> f32, bit-compatible with ggml's dequantize_row_* (tensor_types.h layouts).
// Every tier computes each value with the same IEEE operations in the same order as the scalar
// reference (no FMA contraction), so all tiers produce identical bits.
// All functions are pure and thread-safe; `n` must be a multiple of the type's block size; `src`
// needs only the alignment of its block struct (2 bytes; 4 for Q8_K), `dst` any float alignment.
#pragma once

#include <cstdint>

#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

// Types with a dequantizer: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// Q8_K, IQ4_NL, IQ4_XS.
bool can_dequantize(TensorType type);

namespace ref {
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
}  // namespace ref

// dst (n) <- src (n values of `type`), dispatched on active_isa(). Throws std::invalid_argument
// for a type without a dequantizer or an n that is not a whole number of blocks.
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n);

// The ISA tiers: return false for types they leave to the reference.
namespace avx2 {
bool dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
}  // namespace avx2
namespace avx512 {
bool dequantize_row(TensorType type, const void* src, float* dst, int64_t n);
}  // namespace avx512

}  // namespace sl::kernels
