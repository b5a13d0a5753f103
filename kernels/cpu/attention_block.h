// Hot loops of MSA's index branch (core/attention/block_select.cpp): Quest upper bounds of a block's
// q·k and the exact max of q·k over a block's keys. Scalar references in `ref`, AVX2 / AVX-512
// variants in attention_block_avx2.cpp / attention_block_avx512.cpp, dispatched at run time like
// ops.h. All pure and thread-safe.
#pragma once

#include <cstdint>

namespace sl::kernels {

// out (n_rows): for each query row r of q (n_rows, q_stride floats apart, d used),
// Σ_i max(q_ri * kmin_i, q_ri * kmax_i): an upper bound of q_r · k for every k with
// kmin <= k <= kmax channel-wise (Quest). Each term is rounded from the exact products, so only the
// summation rounds differently from a dot product; callers add a slack for that.
void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d);

// max over j in [0, n_keys) of q (d) · k_j, k_j = k + j * k_stride. n_keys >= 1. Deterministic for
// given inputs and ISA (the exact block score compared by the pruned and brute-force selections).
float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d);

namespace ref {
void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d);
float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d);
}  // namespace ref

namespace avx2 {
void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d);
float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d);
}  // namespace avx2

namespace avx512 {
void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d);
float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d);
}  // namespace avx512

}  // namespace sl::kernels
