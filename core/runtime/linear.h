// Linear layers and embedding lookups over weights in any supported tensor type.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
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

// One weight of linear_shared: Y (n_tokens, W->ne1).
struct LinearOut {
    const TensorView* W;
    float* Y;
};

// Several linear layers that read the same X (Q, K and V; an FFN's gate and up): X quantized once
// per activation format, and the rows of all the weights split across `pool` in one pass, so
// the workers wait for each other once instead of twice per weight. Each Y equals linear()'s, bit
// for bit (the same activations, the same row kernels). Every W has ne0 == the row length of X.
// `epilogue`, when set, runs on the worker that computed them for each range [r0, r1) of rows
// (multiples of 16 apart from a weight's end) that every weight with ne1 > r0 has done, i.e. the
// weights are split in step: rows [r0, r1) of all of them on one worker, so an elementwise
// combination (SwiGLU of gate and up) runs there, in parallel, on columns [r0, r1) of every token.
// For that the weights must have the same ne1.
void linear_shared(std::span<const LinearOut> outs, const float* X, int n_tokens, ThreadPool& pool,
                   std::vector<uint8_t>& quant_scratch,
                   const std::function<void(int64_t r0, int64_t r1)>& epilogue = {});

void set_exact_activations(bool on);
bool exact_activations();

// out (W.ne0) = row `row` of W, dequantized.
void embed_row(const TensorView& W, int64_t row, float* out);

}  // namespace sl
