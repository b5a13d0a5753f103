// Device probing. The CUDA runtime is linked statically and loads the driver on first use, so this
// runs (and reports) on machines without a driver.
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_device.h"

#include <mutex>

namespace sl::cuda {

bool compiled_with_cuda() { return true; }

namespace {

__global__ void probe_kernel() {}

DeviceStatus probe_once() {
    DeviceStatus s;
    s.compiled = true;
    cudaRuntimeGetVersion(&s.runtime_version);
    if (cudaError_t e = cudaDriverGetVersion(&s.driver_version); e != cudaSuccess || s.driver_version == 0) {
        s.message = "no NVIDIA driver found (CUDA runtime " + std::to_string(s.runtime_version / 1000) +
                    "." + std::to_string((s.runtime_version % 1000) / 10) + ")";
        return s;
    }
    if (cudaError_t e = cudaGetDeviceCount(&s.device_count); e != cudaSuccess) {
        s.device_count = 0;
        s.message = cuda_error_text("cudaGetDeviceCount", e);
        return s;
    }
    if (s.device_count == 0) {
        s.message = "no CUDA device present";
        return s;
    }
    cudaDeviceProp prop{};
    if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
        s.message = cuda_error_text("cudaGetDeviceProperties", e);
        return s;
    }
    s.device_name = prop.name;
    s.compute_major = prop.major;
    s.compute_minor = prop.minor;
    s.total_memory = prop.totalGlobalMem;
    if (prop.major < 8) {
        s.message = s.device_name + ": compute capability " + std::to_string(prop.major) + "." +
                    std::to_string(prop.minor) + " is older than the sm_86 this build targets";
        return s;
    }
    // The build's kernels must be there for this device (machine code for its architecture, or
    // PTX it can compile): an sm_80 passes the check above but finds none, and would fail at the
    // first launch ("no kernel image") instead of being reported here.
    cudaFuncAttributes attr{};
    if (cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel); e != cudaSuccess) {
        cudaGetLastError();  // (not sticky)
        s.message = s.device_name + ": compute capability " + std::to_string(prop.major) + "." +
                    std::to_string(prop.minor) + " has no kernels in this build (" + cuda_error_text("cudaFuncGetAttributes", e) +
                    "); rebuild with its architecture in CMAKE_CUDA_ARCHITECTURES";
        return s;
    }
    s.usable = true;
    s.message = s.device_name + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                ", " + std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
    return s;
}

}  // namespace

DeviceStatus probe() {
    static std::once_flag once;
    static DeviceStatus status;
    std::call_once(once, [] { status = probe_once(); });
    return status;
}

}  // namespace sl::cuda
