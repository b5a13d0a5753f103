// Device-side conversions. Pointers are device memory; launches are asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sl::cuda {

// out_dev (n) f32 <- in_dev (n) IEEE half.
cudaError_t launch_f16_to_f32(float* out_dev, const uint16_t* in_dev, size_t n, cudaStream_t stream);

}  // namespace sl::cuda
