// f16 -> f32 conversion on the device; the first kernel, and the device path's smoke test.
#include <cuda_fp16.h>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_device.h"

namespace sl::cuda {

// out (n) <- in (n); one thread per element.
__global__ void f16_to_f32_kernel(float* __restrict__ out, const __half* __restrict__ in, size_t n) {
    const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __half2float(in[i]);
}

cudaError_t launch_f16_to_f32(float* out_dev, const uint16_t* in_dev, size_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    constexpr unsigned kThreads = 256;
    const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
    f16_to_f32_kernel<<<blocks, kThreads, 0, stream>>>(out_dev, reinterpret_cast<const __half*>(in_dev), n);
    return cudaGetLastError();
}

bool f16_to_f32(float* out, const uint16_t* in, size_t n, std::string* error) {
    const DeviceStatus st = probe();
    if (!st.usable) {
        if (error) *error = st.message;
        return false;
    }
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    cudaError_t e = cudaMalloc(&d_in, n * sizeof(uint16_t));
    if (e == cudaSuccess) e = cudaMalloc(&d_out, n * sizeof(float));
    if (e == cudaSuccess) e = cudaMemcpy(d_in, in, n * sizeof(uint16_t), cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = launch_f16_to_f32(d_out, d_in, n, nullptr);
    if (e == cudaSuccess) e = cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d_in);
    cudaFree(d_out);
    if (e != cudaSuccess) {
        if (error) *error = cuda_error_text("f16_to_f32", e);
        return false;
    }
    return true;
}

}  // namespace sl::cuda
