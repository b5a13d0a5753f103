// Dot products of one weight row with quantized activation rows: where decode spends its time.
//
// Each weight type pairs with one activation format (vec_dot_type): Q4_0·Q8_0, Q5_0·Q8_0,
// Q8_0·Q8_0, IQ4_NL·Q8_0, Q4_1·Q8_1, Q5_1·Q8_1, Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_XS·Q8_K, and F32/F16/BF16
// weights · F32
// activations. The scalar reference (ref::) follows ggml's integer-exact block math; ISA tiers
// accumulate in a different order, so they agree with it to float rounding, not bitwise.
//
// All functions are pure and thread-safe; rows need only their block struct's alignment (2 bytes;
// 4 for Q8_K activations; 4 for f32). `n` is the row length in elements, a multiple of the
// weight type's block size (any n >= 0 for F32/F16/BF16).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

// The most activation rows one VecDotFn call takes (tokens sharing one pass over a weight row).
constexpr int kMaxDotTokens = 4;
// The most activation rows one DotTileFn call takes (matmul groups prefill tokens by this where a
// type has a tile kernel).
constexpr int kMaxTileTokens = 8;

// out[t * out_stride] = w · act_t for t in [0, nt), 1 <= nt <= kMaxDotTokens, where
// act_t = (const char*)act + t * act_stride (bytes) is one activation row of n elements.
// Each weight block is decoded once for all nt rows: the matrix-matrix (prefill) building block.
using VecDotFn = void (*)(int64_t n, const void* w, const void* act, size_t act_stride, int nt, float* out,
                          size_t out_stride);

// out[t * out_stride + r] = w_r · act_t for r in [0, rows), t in [0, nt): `rows` weight rows
// (w_r = (const char*)w + r * w_stride bytes) against nt activation rows, 1 <= nt <= kMaxTileTokens.
// A tier may offer it for types whose per-activation-block work (scale conversions) is worth
// sharing across rows; matmul uses it where it exists, VecDotFn row by row elsewhere. Results
// equal the VecDotFn's of the same tier.
using DotTileFn = void (*)(int64_t n, const void* w, size_t w_stride, int rows, const void* act, size_t act_stride,
                           int nt, float* out, size_t out_stride);

// The activation format for a weight type; throws std::invalid_argument when there is none.
TensorType vec_dot_type(TensorType wtype);
bool can_vec_dot(TensorType wtype);

// One weight row · one activation row (in vec_dot_type(wtype)), dispatched on active_isa().
float vec_dot(TensorType wtype, int64_t n, const void* w_row, const void* act_row);

// The multi-row kernel for a tier (Isa::Scalar gives the reference); nullptr when unsupported.
VecDotFn vec_dot_fn(TensorType wtype, Isa isa);
// The tile kernel for a tier; nullptr when the tier has none for the type.
DotTileFn dot_tile_fn(TensorType wtype, Isa isa);

namespace ref {
VecDotFn vec_dot_fn(TensorType wtype);
float vec_dot(TensorType wtype, int64_t n, const void* w_row, const void* act_row);
}  // namespace ref
namespace avx2 {
VecDotFn vec_dot_fn(TensorType wtype);
}  // namespace avx2
namespace avx512 {
VecDotFn vec_dot_fn(TensorType wtype);
DotTileFn dot_tile_fn(TensorType wtype);  // dot_tile_avx512.cpp: Q4_0, Q5_0, Q8_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K
// dot_kquant_avx512.cpp: Q4_K, Q5_K and Q6_K, tokens in pairs; nullptr for other types.
DotTileFn kquant_tile_fn(TensorType wtype);
VecDotFn kquant_vec_dot_fn(TensorType wtype);
}  // namespace avx512

}  // namespace sl::kernels
