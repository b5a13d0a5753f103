// cuBLAS for the prefill GEMMs, loaded at run time (dlopen of libcublas.so.13, then libcublas.so):
// the binaries keep no link-time dependency on cuBLAS, so a CUDA build still starts on a machine
// without the CUDA libraries and reports why the GPU path is unavailable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace sl::cuda {

enum class GemmType { F16, BF16 };

// True when cuBLAS could be loaded and a handle created; else false with the reason in *why.
// Thread-safe; the library is loaded once.
bool blas_available(std::string* why);

// Y (T, d) f32 = X (T, n) @ W (d, n)^T with X, W row-major in `type`, f32 accumulation
// (CUBLAS_COMPUTE_32F). Device pointers; async on `stream`. Returns false with *error set when
// cuBLAS is unavailable or the call fails. Calls are serialized on one shared handle.
bool gemm_xwt(GemmType type, const void* X, const void* W, float* Y, int64_t T, int64_t d, int64_t n,
              cudaStream_t stream, std::string* error);

}  // namespace sl::cuda
