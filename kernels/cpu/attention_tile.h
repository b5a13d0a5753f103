// The sparse branch's inner kernel (core/attention/msa_attention.cpp): online-softmax attention of
// a tile of up to kTileRows query rows over one block of keys, the rows sharing each key and value
// as it is loaded (flash attention's Q-tile x K-block step on the CPU). The keys come transposed
// once per block (transpose_keys), so R rows x 16 keys of scores build up in registers with one
// broadcast per row and channel, with no horizontal sums. Scalar reference in `ref`, AVX2 / AVX-512
// variants in attention_tile_avx2.cpp / attention_tile_avx512.cpp, dispatched at run time
// (cpu_features.h): AVX-512 for d % 16 == 0, AVX2 for d % 8 == 0, else the reference. All pure and
// thread-safe.
#pragma once

#include <cstdint>

namespace sl::kernels {

constexpr int kTileRows = 4;

// Columns of a transposed key block of n keys: n rounded up to 16.
inline int64_t tile_ldk(int n) { return (static_cast<int64_t>(n) + 15) / 16 * 16; }

// kt (d, ldk) <- the n keys k_j = k + j * k_stride (each d floats) as columns; columns
// [n, tile_ldk(n)) zero, the rest untouched. ldk >= tile_ldk(n).
void transpose_keys(float* kt, int64_t ldk, const float* k, int64_t k_stride, int n, int d);

// One block for rows r < R (1 <= R <= kTileRows), query q[r] (d floats), running state m[r]
// (max so far, -inf before the first block), l[r] (sum so far), acc + r * d (unnormalized output):
//   s_j = scale * q[r] · k_j for j < n (k_j: column j of kt, (d, ldk));
//   if max_j s_j > m[r]: acc, l scaled by exp(m[r] - max), m[r] = max;
//   p[r * ldp + j] = exp(s_j - m[r]); bsum[r] = Σ_j p_j; l[r] += bsum[r]; acc += Σ_j p_j v_j
// with v_j = v + j * v_stride. p: R rows of ldp >= ldk floats (scratch; holds p_j for j < n after).
// 1 <= n, and ldk, ldp >= tile_ldk(n): the vector kernels read and write whole 16-column groups.
void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum);

// max over rows r < R and keys j < n of q[r] · k_j (k_j: column j of kt, (d, ldk); unscaled): MSA's
// exact block score for many index rows. p: scratch of R rows of ldp >= ldk floats. Each q[r] · k_j
// comes out of the same arithmetic whatever R and j (a chain of fused multiply-adds over the d
// channels in order, per ISA tier), so block scores from different calls compare bitwise.
float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp);

// The same step for one row against row-major keys k_j = k + j * k_stride (no transpose), for rows
// too few to pay for one (decode): p (n floats) as above, returns bsum. Uses ops.h's dispatched rows.
float attend_row(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride, int n, int d,
                 float scale, float& m, float& l, float* acc, float* p);

namespace ref {
void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum);
float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp);
}  // namespace ref

namespace avx2 {
// d % 8 == 0.
void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum);
float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp);
}  // namespace avx2

namespace avx512 {
// d % 16 == 0.
void attend_tile(int R, const float* const* q, const float* kt, int64_t ldk, const float* v, int64_t v_stride, int n,
                 int d, float scale, float* m, float* l, float* acc, float* p, int64_t ldp, float* bsum);
float max_dot_tile(int R, const float* const* q, const float* kt, int64_t ldk, int n, int d, float* p, int64_t ldp);
}  // namespace avx512

}  // namespace sl::kernels
