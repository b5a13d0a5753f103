// Shared pieces of the GPU suites: the skip when no device is usable, device buffers, CUDA error
// checks that fail the current test with the CUDA error's name.
#pragma once

#include <QTest>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_device.h"

// Skips the current test (QSKIP) with "no CUDA device: <reason>" when no device is usable.
#define REQUIRE_CUDA_DEVICE()                                                                              \
    do {                                                                                                   \
        const sl::cuda::DeviceStatus st_ = sl::cuda::probe();                                              \
        if (!st_.usable) QSKIP(qPrintable(QStringLiteral("no CUDA device: %1").arg(QString::fromStdString(st_.message)))); \
    } while (0)

#if SIGHTLINE_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.cuh"

// QVERIFY that a CUDA call returned cudaSuccess, naming the call and the error.
#define CUDA_OK(expr)                                                                                  \
    do {                                                                                               \
        const cudaError_t e_ = (expr);                                                                 \
        QVERIFY2(e_ == cudaSuccess, sl::cuda::cuda_error_text(#expr, e_).c_str());                     \
    } while (0)

namespace sl::test {

// n elements of device memory (uninitialized); ok() is false when cudaMalloc failed.
template <typename T>
class DevBuf {
public:
    explicit DevBuf(size_t n) : n_(n) {
        if (n && cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)) != cudaSuccess) p_ = nullptr;
    }
    explicit DevBuf(const std::vector<T>& host) : DevBuf(host.size()) {
        if (p_ && cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
            cudaFree(p_);
            p_ = nullptr;
        }
    }
    ~DevBuf() { cudaFree(p_); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    bool ok() const { return n_ == 0 || p_ != nullptr; }
    T* get() const { return p_; }
    size_t size() const { return n_; }
    // Copies the buffer back (synchronous, after all work on the legacy stream).
    std::vector<T> download() const {
        std::vector<T> h(n_);
        if (n_ && cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) h.clear();
        return h;
    }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

}  // namespace sl::test
#endif
