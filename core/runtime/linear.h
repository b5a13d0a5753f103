// Linear layers and embedding lookups over weights in any supported tensor type.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/tensor_view.h"

namespace sl {

class ThreadPool;

// Y (n_tokens, W.ne1) = X (n_tokens, W.ne0) @ W^T. X is quantized once into `quant_scratch` (the
// activation format of W's type, 8-bit as in llama.cpp) and the rows of W are split across `pool`.
// Runs on the calling thread; `quant_scratch` is owned by the caller's session and reused.
// With exact activations on (set_exact_activations or SIGHTLINE_EXACT_ACTIVATIONS=1), weights are
// dequantized row by row and multiplied with the f32 activations instead: slow, but free of
// activation rounding, for checking the model against a float reference.
void linear(const TensorView& W, const float* X, int n_tokens, float* Y, ThreadPool& pool,
            std::vector<uint8_t>& quant_scratch);

void set_exact_activations(bool on);
bool exact_activations();

// out (W.ne0) = row `row` of W, dequantized.
void embed_row(const TensorView& W, int64_t row, float* out);

}  // namespace sl
