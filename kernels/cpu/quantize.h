// f32 -> quantized blocks, bit-compatible with ggml's block layouts (tensor_types.h).
//
// Activation quantizers (Q8_0, Q8_1, Q8_K) follow ggml's reference rounding exactly:
//   Q8_0/Q8_1: d = amax / 127, q = roundf(x / d) (half away from zero), Q8_1 also s = d * sum(q);
//   Q8_K:      d = max / -127 with max the signed value of largest magnitude, q = round-half-even,
//              bsums = sums of 16 consecutive q.
// Their ISA variants produce the same bytes as the reference. Weight quantizers (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) are scalar only: they build test weights and tiny test models; the K-quant ones use
// a plain min/max fit, not ggml's iterative search, but write exactly the layout ggml dequantizes.
//
// All functions are pure and thread-safe; `n` must be a multiple of the type's block size; `dst`
// needs n / block_size blocks and may be at any address (blocks are written with memcpy-safe
// byte access only where the struct is 2-byte aligned; keep `dst` 2-byte aligned, 4 for Q8_K).
#pragma once

#include <cstdint>

#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

namespace ref {
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q2_K(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_K(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n);
}  // namespace ref

// Dispatched activation quantizers (active_isa()); same output bytes on every tier.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);

// Any supported destination type: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K, and the plain F32,
// F16, BF16 (converted). Throws std::invalid_argument for other types or a bad n.
void quantize_row(TensorType type, const float* x, void* dst, int64_t n);

namespace avx2 {
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);
}  // namespace avx2

namespace avx512 {
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);
}  // namespace avx512

}  // namespace sl::kernels
