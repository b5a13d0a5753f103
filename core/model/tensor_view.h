// A weight matrix as stored in the model file (possibly quantized), not owned.
#pragma once

#include <cstdint>

#include "kernels/cpu/tensor_types.h"

namespace sl {

// ggml order: ne0 is the row length (inputs of a linear layer), ne1 the number of rows (outputs).
// Rows are contiguous, each ne0 / block_size blocks of the type.
struct TensorView {
    kernels::TensorType type = kernels::TensorType::F32;
    const void* data = nullptr;  // valid while the model file is mapped
    int64_t ne0 = 0;
    int64_t ne1 = 1;

    bool empty() const { return data == nullptr; }
    // Bytes of one row.
    int64_t row_bytes() const {
        const auto info = kernels::tensor_type_info(type);
        return ne0 / info.block_size * info.type_size;
    }
    const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * row_bytes(); }
};

}  // namespace sl
