#include "core/runtime/backend.h"

#include <thread>

#include "core/runtime/cuda_backend.h"
#include "core/util/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda/cuda_device.h"

namespace sl {

namespace {

class CpuBackend final : public Backend {
public:
    DeviceKind kind() const override { return DeviceKind::Cpu; }
    const char* name() const override { return "cpu"; }
    std::string description() const override {
        return std::string("CPU (") + kernels::isa_name(kernels::active_isa()) + "), " +
               std::to_string(std::thread::hardware_concurrency()) + " threads";
    }
    BackendCaps caps() const override { return {true, true, true, true}; }
};

}  // namespace

std::shared_ptr<Backend> cpu_backend() {
    static const std::shared_ptr<Backend> cpu = std::make_shared<CpuBackend>();
    return cpu;
}

BackendChoice backend_for(std::string_view device) {
    if (device == "cpu") return {cpu_backend(), "CPU (asked for with --device cpu)"};
    if (device != "auto" && device != "cuda") {
        throw Error("unknown device '" + std::string(device) + "': expected auto, cpu or cuda");
    }
    const cuda::DeviceStatus st = cuda::probe();
    if (st.usable) {
        static const std::shared_ptr<Backend> gpu = std::make_shared<CudaBackend>(st);
        return {gpu, "CUDA: " + st.message};
    }
    if (device == "cuda") throw Error("--device cuda: no usable CUDA device: " + st.message);
    return {cpu_backend(), "CPU: CUDA device not usable: " + st.message};
}

BackendChoice backend_for_model(std::string_view device) {
    BackendChoice c = backend_for(device);
    if (c.backend->caps().full_model) return c;
    return {cpu_backend(), "CPU: " + c.backend->description() + " is usable, but the model forward does not run on " +
                               c.backend->name() + " by default yet (SIGHTLINE_CUDA_MODEL=1 runs it there)"};
}

}  // namespace sl
