#include <cublas_api.h>
#include <dlfcn.h>

#include <mutex>

#include "kernels/cuda/blas.cuh"

namespace sl::cuda {

namespace {

std::string status_text(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (no usable driver or device)";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        default: return "cuBLAS status " + std::to_string(static_cast<int>(s));
    }
}

struct Blas {
    void* lib = nullptr;
    cublasHandle_t handle = nullptr;
    decltype(&::cublasCreate_v2) create = nullptr;
    decltype(&::cublasSetStream_v2) set_stream = nullptr;
    using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                      const void*, void*, cudaDataType, int, cublasComputeType_t,
                                      cublasGemmAlgo_t);
    GemmEx gemm_ex = nullptr;
    std::string error;  // why it is unavailable
    std::mutex mutex;   // one handle: serialize set_stream + gemm
};

Blas& blas() {
    static Blas b;
    static std::once_flag once;
    std::call_once(once, [] {
        for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
            b.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (b.lib) break;
        }
        if (!b.lib) {
            const char* e = dlerror();
            b.error = std::string("cuBLAS not found (libcublas.so.13): ") + (e ? e : "dlopen failed");
            return;
        }
        b.create = reinterpret_cast<decltype(b.create)>(dlsym(b.lib, "cublasCreate_v2"));
        b.set_stream = reinterpret_cast<decltype(b.set_stream)>(dlsym(b.lib, "cublasSetStream_v2"));
        b.gemm_ex = reinterpret_cast<decltype(b.gemm_ex)>(dlsym(b.lib, "cublasGemmEx"));
        if (!b.create || !b.set_stream || !b.gemm_ex) {
            b.error = "cuBLAS is missing cublasCreate_v2 / cublasSetStream_v2 / cublasGemmEx";
            return;
        }
        if (cublasStatus_t s = b.create(&b.handle); s != CUBLAS_STATUS_SUCCESS) {
            b.handle = nullptr;
            b.error = "cublasCreate failed: " + status_text(s);
        }
        // The handle lives for the process: destroying it at exit races the CUDA runtime's own
        // teardown, so it is left to the driver.
    });
    return b;
}

}  // namespace

bool blas_available(std::string* why) {
    Blas& b = blas();
    if (b.handle) return true;
    if (why) *why = b.error;
    return false;
}

bool gemm_xwt(GemmType type, const void* X, const void* W, float* Y, int64_t T, int64_t d, int64_t n,
              cudaStream_t stream, std::string* error) {
    Blas& b = blas();
    if (!b.handle) {
        if (error) *error = b.error;
        return false;
    }
    if (T < 0 || d < 0 || n <= 0 || T > INT32_MAX || d > INT32_MAX || n > INT32_MAX || !X || !W || !Y) {
        if (error) *error = "gemm_xwt: bad shape (T " + std::to_string(T) + ", d " + std::to_string(d) + ", n " +
                            std::to_string(n) + ")";
        return false;
    }
    if (T == 0 || d == 0) return true;
    // Column-major view: Y^T (d, T) = W (n, d)^T-as-stored · X^T (n, T), i.e. op(A) = A^T with
    // A = W stored (n x d, lda n) and B = X stored (n x T, ldb n).
    const cudaDataType ab = type == GemmType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float alpha = 1.0f, beta = 0.0f;
    std::lock_guard<std::mutex> lock(b.mutex);
    cublasStatus_t s = b.set_stream(b.handle, stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = b.gemm_ex(b.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(d), static_cast<int>(T),
                      static_cast<int>(n), &alpha, W, ab, static_cast<int>(n), X, ab, static_cast<int>(n), &beta, Y,
                      CUDA_R_32F, static_cast<int>(d), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (error) *error = "cublasGemmEx failed: " + status_text(s);
        return false;
    }
    return true;
}

}  // namespace sl::cuda
