// The CUDA backend: device 0 through kernels/cuda. Created only by backend_for() after the probe
// said the device is usable. Owns nothing on the device yet (the device-side model lands with the
// Session integration); it reports the device and what the kernels cover.
#pragma once

#include <memory>

#include "core/runtime/backend.h"
#include "kernels/cuda/cuda_device.h"

namespace sl {

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(cuda::DeviceStatus status) : status_(std::move(status)) {}
    DeviceKind kind() const override { return DeviceKind::Cuda; }
    const char* name() const override { return "cuda"; }
    std::string description() const override { return status_.message; }
    BackendCaps caps() const override;
    const cuda::DeviceStatus& status() const { return status_; }

private:
    cuda::DeviceStatus status_;
};

}  // namespace sl
