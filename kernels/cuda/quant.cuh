// Quantized weights on the device: dequantization (bit-exact with kernels/cpu's dequantize_row for
// f32 output) and the matrix-vector products of decode. Weight rows use GGUF's block layouts
// (kernels/cpu/tensor_types.h); a weight matrix W is (d rows, n columns), row-major, n a multiple
// of the type's block size (32 for the quantized types here). Device pointers; async on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cpu/tensor_types.h"

namespace sl::cuda {

// Types the device kernels take: F32, F16, BF16, Q4_0, Q4_1, Q8_0.
bool device_supports(kernels::TensorType type);

// Element type of dequantize's output.
enum class OutType { F32, F16, BF16 };

// dst (n) <- src (n values of `type`). n a multiple of the block size; src 2-byte aligned (4 for
// F32). For F32 output the values equal the CPU reference bit for bit (no FMA contraction).
cudaError_t dequantize(kernels::TensorType type, const void* src, void* dst, OutType out_type, int64_t n,
                       cudaStream_t stream);

// Y (n_tokens, d) = X (n_tokens, n) @ W^T with f32 activations (no activation quantization, so it
// is closer to the exact product than the CPU's Q8 path). One warp per weight row, up to 4 tokens
// per pass over the weights; meant for decode (n_tokens small). X 16-byte aligned.
cudaError_t matvec(kernels::TensorType type, const void* W, int64_t d, int64_t n, const float* X, int n_tokens,
                   float* Y, cudaStream_t stream);

}  // namespace sl::cuda
