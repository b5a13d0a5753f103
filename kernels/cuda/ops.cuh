// The transformer's small per-token operators on the device, mirroring kernels/cpu/ops.h (the CPU
// functions are the references the GPU tests compare with). All pointers are device memory; all
// launches are asynchronous on `stream` and return the launch error (cudaErrorInvalidValue for bad
// sizes, checked before launching). In-place use (out == x) is allowed where the CPU allows it.
// Host-callable from plain C++ (this header has no device code).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sl::cuda {

// out (rows, n) = x / rms(x) * w per row; w (n) may be null. f32 accumulation of the squares.
cudaError_t rms_norm(float* out, const float* x, const float* w, int64_t rows, int64_t n, float eps,
                     cudaStream_t stream);

// x (rows, n_heads, head_dim), in place: row r at position pos0 + r (positions == nullptr) or
// positions[r]; the same rotation as kernels::rope (style: 0 = Norm, 1 = Neox), angles in double.
// freq_factors: rot_dim / 2 device floats dividing the frequencies (Llama 3.1's rope_freqs), or null.
cudaError_t rope(float* x, int64_t rows, int n_heads, int head_dim, int rot_dim, int64_t pos0,
                 const int64_t* positions, float base, float freq_scale, int style, cudaStream_t stream,
                 const float* freq_factors = nullptr);

// out (n) = silu(gate) * up.
cudaError_t silu_mul(float* out, const float* gate, const float* up, int64_t n, cudaStream_t stream);

// y (n) += x (n).
cudaError_t add(float* y, const float* x, int64_t n, cudaStream_t stream);

// x (rows, n) <- softmax of each row, in place.
cudaError_t softmax_rows(float* x, int64_t rows, int64_t n, cudaStream_t stream);

// Per row of x (rows, n): the top k (1 <= k <= kMaxTopK) entries, ordered by value descending
// (ties: lower index first) or, with by_index, by index ascending. NaN and -inf entries are never
// chosen; a row with fewer candidates pads idx with -1 and val with -inf at its end.
// idx, val: (rows, k); val may be null. With k == 1 this is argmax.
// 256: a grown MSA selection's shortlist and growth (msa.cuh) at top-k 32 (the CPU's hybrid8 at
// effort high shortlists 242 blocks).
constexpr int kMaxTopK = 256;
cudaError_t topk_rows(const float* x, int64_t rows, int64_t n, int k, bool by_index, int32_t* idx, float* val,
                      cudaStream_t stream);

// out (n) f32 <- in (n) bf16 bits, and the reverse (round to nearest even; the prefill GEMM's
// activations, cuda_backend_model.cpp).
cudaError_t bf16_to_f32(float* out, const uint16_t* in, int64_t n, cudaStream_t stream);
cudaError_t f32_to_bf16(uint16_t* out, const float* in, int64_t n, cudaStream_t stream);

// x (n) <- uniform values in [lo, hi) from a counter-based hash of (seed, i): reproducible, for
// benchmarks and tests that need large device inputs without a host round trip.
cudaError_t fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

}  // namespace sl::cuda
