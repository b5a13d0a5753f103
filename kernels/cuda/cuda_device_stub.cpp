// kernels/cuda for builds without a CUDA compiler: every entry point reports that.
#include "kernels/cuda/cuda_device.h"

namespace sl::cuda {

bool compiled_with_cuda() { return false; }

DeviceStatus probe() {
    DeviceStatus s;
    s.message = "built without CUDA";
    return s;
}

bool f16_to_f32(float*, const uint16_t*, size_t, std::string* error) {
    if (error) *error = "built without CUDA";
    return false;
}

}  // namespace sl::cuda
