// The CUDA device as the rest of Sightline sees it. Plain C++ (no CUDA headers), so Qt code and the
// CPU-only build include it freely. In a build without CUDA every call reports that and does nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sl::cuda {

// True when this binary was compiled with the CUDA kernels.
bool compiled_with_cuda();

struct DeviceStatus {
    bool compiled = false;      // built with CUDA
    bool usable = false;        // a device can run our kernels now
    int device_count = 0;
    int driver_version = 0;     // e.g. 13000 for 13.0; 0 when no driver
    int runtime_version = 0;    // the CUDA runtime linked into this binary
    std::string device_name;    // of device 0, when usable
    int compute_major = 0, compute_minor = 0;
    size_t total_memory = 0;    // bytes, device 0
    std::string message;        // why not usable, or a one-line description when usable
};

// Probes the driver and device 0. Safe on machines with no driver or no device: it never throws
// and never aborts, it says why in `message`. Thread-safe; the first call may take ~100 ms.
DeviceStatus probe();

// f16 -> f32 on the device, for round-trip checks of the device path: out (n) <- in (n), both host
// memory. Returns false with `error` set when no device is usable or a CUDA call fails.
bool f16_to_f32(float* out, const uint16_t* in, size_t n, std::string* error);

}  // namespace sl::cuda
