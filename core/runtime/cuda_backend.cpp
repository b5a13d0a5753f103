#include "core/runtime/cuda_backend.h"

namespace sl {

BackendCaps CudaBackend::caps() const {
    BackendCaps c;
    c.linear = true;
    c.small_ops = true;
    c.msa = true;
    // CudaLlamaRunner (cuda_backend_model.h) runs the model, but Session does not route to it yet and
    // it has not run on a device; turn this on with the Session integration, after tst_cuda_model
    // passed on a GPU machine.
    c.full_model = false;
    return c;
}

}  // namespace sl
