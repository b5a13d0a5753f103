// The CUDA backend: device 0 through kernels/cuda. Created only by backend_for() after the probe
// said the device is usable. Owns nothing on the device (a Session's CudaLlamaRunner does); it
// reports the device and what the kernels cover.
#pragma once

#include <memory>

#include "core/runtime/backend.h"
#include "kernels/cuda/cuda_device.h"

namespace sl {

// Whether SIGHTLINE_CUDA_MODEL=1 is set: the whole model runs on the device (BackendCaps::full_model)
// only then, until a Session on the device has passed its checks on one (tests/gpu/run.sh).
bool cuda_model_opted_in();

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
