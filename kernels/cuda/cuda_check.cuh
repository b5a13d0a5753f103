// Error helpers shared by the .cu files. Host-only; never aborts.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace sl::cuda {

// "what: cudaErrorX (description)" for error reports.
inline std::string cuda_error_text(const char* what, cudaError_t err) {
    return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace sl::cuda
