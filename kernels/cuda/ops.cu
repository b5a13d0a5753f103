// Small operators: one CTA per row for the row-wise ones, one thread per element otherwise.
#include <cmath>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/ops.cuh"

namespace sl::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr unsigned kMaxGrid = 65535u * 32u;  // grid-stride loops cover the rest

unsigned grid_for(int64_t n, int threads) {
    const int64_t b = (n + threads - 1) / threads;
    return static_cast<unsigned>(b < static_cast<int64_t>(kMaxGrid) ? b : kMaxGrid);
}
unsigned row_grid(int64_t rows) {
    return static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
}

__global__ void rms_norm_kernel(float* out, const float* x, const float* w, int64_t rows, int64_t n, float eps) {
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * n;
        float* yr = out + r * n;
        float ss = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
        ss = dev::block_sum(ss, red);
        const float scale = rsqrtf(ss / static_cast<float>(n) + eps);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
        __syncthreads();  // out may alias x: every read of this row is done before the next row's
    }
}

// One thread per (row, rotation pair i); it rotates pair i of every head of the row.
__global__ void rope_kernel(float* x, int64_t rows, int n_heads, int head_dim, int rot_dim, int64_t pos0,
                            const int64_t* positions, float base, float freq_scale, int style,
                            const float* freq_factors) {
    const int half = rot_dim / 2;
    const int64_t total = rows * half;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = e / half;
        const int i = static_cast<int>(e % half);
        const int64_t pos = positions ? positions[r] : pos0 + r;
        double inv_freq = pow(static_cast<double>(base), -2.0 * i / rot_dim);
        if (freq_factors) inv_freq /= static_cast<double>(freq_factors[i]);
        const double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) * inv_freq;
        double sd, cd;
        sincos(theta, &sd, &cd);
        const float c = static_cast<float>(cd), s = static_cast<float>(sd);
        const int a = style == 0 ? 2 * i : i;
        const int b = style == 0 ? 2 * i + 1 : i + half;
        float* row = x + r * static_cast<int64_t>(n_heads) * head_dim;
        for (int h = 0; h < n_heads; ++h) {
            float* v = row + static_cast<int64_t>(h) * head_dim;
            const float x0 = v[a], x1 = v[b];
            v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));  // no FMA: as the CPU rounds
            v[b] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
        }
    }
}

__global__ void silu_mul_kernel(float* out, const float* gate, const float* up, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] += x[i];
}

__global__ void softmax_rows_kernel(float* x, int64_t rows, int64_t n) {
    __shared__ float red[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* xr = x + r * n;
        float mx = -INFINITY;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, xr[i]);
        mx = dev::block_max(mx, red);
        float sum = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = expf(xr[i] - mx);
            xr[i] = e;
            sum += e;
        }
        sum = dev::block_sum(sum, red);
        const float inv = 1.0f / sum;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] *= inv;
        __syncthreads();
    }
}

// Orderable key of a float: a larger float gives a larger key; -0 and +0 give the same key (they
// tie, as they compare equal).
__device__ __forceinline__ uint32_t order_key(float v) {
    const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// order_key of an entry topk_rows may choose, 0 for NaN and -inf (no eligible entry has key 0:
// the smallest, -FLT_MAX, has 0x00800000).
__device__ __forceinline__ uint32_t topk_key(float v) {
    return (isnan(v) || v == -INFINITY) ? 0u : order_key(v);
}

constexpr int kTopkCache = 8192;  // rows up to this long keep their keys in shared memory

// One CTA of exactly 256 threads per row (every loop below runs the same number of iterations in
// all lanes of a warp, for the warp-wide intrinsics). A radix select finds the key T of the kk-th
// best entry (kk = min(k, eligible entries)): four passes of 8 bits, each a histogram of the next
// digit among the entries whose key matches the digits fixed so far (a histogram per warp, so
// atomics contend within a warp only), then
// a suffix sum over the 256 bins (thread t holds bin 255 - t) finds
// the bin where the kk-th best falls. Then the entries above T, and the lowest-indexed entries
// equal to T (a scan in index order), make the top kk, ordered by ranking them in parallel.
// A row of up to kTopkCache entries is read from global memory once: the first pass keeps its
// keys in shared memory (each thread reads back only the entries it wrote).
// The cost is a few passes over the row whatever k is (the former k rounds of block reductions
// made a top-61 over 8,192 blocks take 0.3 ms on one SM).
__global__ void topk_rows_kernel(const float* x, int64_t rows, int64_t n, int k, bool by_index, int32_t* idx,
                                 float* val) {
    __shared__ uint32_t whist[kRowThreads / 32][256];  // one histogram per warp, summed per bin
    __shared__ uint32_t s_prefix, s_mask;
    __shared__ int s_kk, s_remaining, s_count, s_eq_base;
    __shared__ int s_warp[32];
    __shared__ uint32_t s_wsum[32];
    __shared__ float s_val[kMaxTopK];
    __shared__ int64_t s_idx[kMaxTopK];
    __shared__ uint32_t s_keys[kTopkCache];
    const bool cached = n <= kTopkCache;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, n_warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * n;
        if (tid == 0) {
            s_prefix = 0;
            s_mask = 0;
            s_count = 0;
            s_eq_base = 0;
        }
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int e = tid; e < (kRowThreads / 32) * 256; e += blockDim.x) (&whist[0][0])[e] = 0;
            __syncthreads();  // also: s_prefix / s_mask of the previous pass are visible
            const uint32_t prefix = s_prefix, mask = s_mask;
            for (int64_t base = 0; base < n; base += blockDim.x) {
                const int64_t i = base + tid;
                uint32_t bin = 256;  // no entry
                if (i < n) {
                    uint32_t key;
                    if (!cached || shift == 24) {
                        key = topk_key(xr[i]);
                        if (cached) s_keys[i] = key;
                    } else {
                        key = s_keys[i];
                    }
                    if (key != 0 && (key & mask) == prefix) bin = (key >> shift) & 255u;
                }
                if (bin < 256) atomicAdd(&whist[warp][bin], 1u);
            }
            __syncthreads();
            // incl = entries in bins >= bin, excl = in bins > bin.
            const int bin = 255 - tid;
            uint32_t h = 0;
#pragma unroll
            for (int w = 0; w < kRowThreads / 32; ++w) h += whist[w][bin];
            uint32_t v = h;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const uint32_t u = __shfl_up_sync(dev::kFullMask, v, o);
                if (lane >= o) v += u;
            }
            if (lane == 31) s_wsum[warp] = v;
            __syncthreads();
            uint32_t incl = v;
            for (int w = 0; w < warp; ++w) incl += s_wsum[w];
            const int excl = static_cast<int>(incl - h);
            if (shift == 24 && tid == 255) {  // bin 0: incl counts every eligible entry
                s_kk = static_cast<int>(incl) < k ? static_cast<int>(incl) : k;
                s_remaining = s_kk;
            }
            __syncthreads();
            const int rem = s_remaining;
            __syncthreads();  // every thread read s_remaining before the winner rewrites it
            if (rem > 0 && excl < rem && rem <= static_cast<int>(incl)) {  // exactly one bin
                s_prefix = prefix | (static_cast<uint32_t>(bin) << shift);
                s_mask = mask | (255u << shift);
                s_remaining = rem - excl;
            }
            __syncthreads();
            if (s_kk == 0) break;  // uniform: nothing eligible
        }
        const int kk = s_kk;
        if (kk > 0) {
            const uint32_t T = s_prefix;
            const int need_eq = s_remaining, n_above = kk - need_eq;
            for (int64_t i = tid; i < n; i += blockDim.x) {
                if ((cached ? s_keys[i] : topk_key(xr[i])) > T) {  // T >= 0x00800000: ineligible keys never pass
                    const int slot = atomicAdd(&s_count, 1);
                    s_val[slot] = xr[i];
                    s_idx[slot] = i;
                }
            }
            for (int64_t base = 0; base < n; base += blockDim.x) {
                __syncthreads();  // s_eq_base of the previous step
                const int eq_base = s_eq_base;
                if (eq_base >= need_eq) break;  // uniform
                const int64_t i = base + tid;
                const bool eq = i < n && (cached ? s_keys[i] : topk_key(xr[i])) == T;
                const unsigned ballot = __ballot_sync(dev::kFullMask, eq);
                if (lane == 0) s_warp[warp] = __popc(ballot);
                __syncthreads();
                int rank = eq_base + __popc(ballot & ((1u << lane) - 1u));
                for (int w = 0; w < warp; ++w) rank += s_warp[w];
                if (eq && rank < need_eq) {
                    s_val[n_above + rank] = xr[i];
                    s_idx[n_above + rank] = i;
                }
                __syncthreads();  // s_warp is read
                if (tid == 0) {
                    int total = 0;
                    for (int w = 0; w < n_warps; ++w) total += s_warp[w];
                    s_eq_base = eq_base + total;
                }
            }
            __syncthreads();
            // Order the kk entries: each of the first kk threads counts the entries that go before its
            // own (a strict total order: ids are unique), then all write to their places.
            float my_v = 0.0f;
            int64_t my_i = -1;
            int place = 0;
            if (tid < kk) {
                my_v = s_val[tid];
                my_i = s_idx[tid];
                for (int o = 0; o < kk; ++o) {
                    const float ov = s_val[o];
                    const int64_t oi = s_idx[o];
                    place += by_index ? oi < my_i : (ov > my_v || (ov == my_v && oi < my_i));
                }
            }
            __syncthreads();
            if (tid < kk) {
                s_val[place] = my_v;
                s_idx[place] = my_i;
            }
            __syncthreads();
        }
        for (int j = tid; j < k; j += blockDim.x) {
            idx[r * k + j] = j < kk ? static_cast<int32_t>(s_idx[j]) : -1;
            if (val) val[r * k + j] = j < kk ? s_val[j] : -INFINITY;
        }
        __syncthreads();  // the shared state is reused by the next row
    }
}

__global__ void bf16_to_f32_kernel(float* out, const __nv_bfloat16* in, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

__global__ void f32_to_bf16_kernel(__nv_bfloat16* out, const float* in, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void fill_uniform_kernel(float* x, int64_t n, uint64_t seed, float lo, float hi) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);  // splitmix64
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        x[i] = lo + (hi - lo) * u;
    }
}

}  // namespace

cudaError_t fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
    if (!x || n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    fill_uniform_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, n, seed, lo, hi);
    return cudaGetLastError();
}

cudaError_t rms_norm(float* out, const float* x, const float* w, int64_t rows, int64_t n, float eps,
                     cudaStream_t stream) {
    if (rows < 0 || n <= 0 || !out || !x) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    rms_norm_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(out, x, w, rows, n, eps);
    return cudaGetLastError();
}

cudaError_t rope(float* x, int64_t rows, int n_heads, int head_dim, int rot_dim, int64_t pos0,
                 const int64_t* positions, float base, float freq_scale, int style, cudaStream_t stream,
                 const float* freq_factors) {
    if (!x || rows < 0 || n_heads <= 0 || head_dim <= 0 || rot_dim <= 0 || rot_dim > head_dim || rot_dim % 2 ||
        (style != 0 && style != 1))
        return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    rope_kernel<<<grid_for(rows * (rot_dim / 2), 128), 128, 0, stream>>>(x, rows, n_heads, head_dim, rot_dim, pos0,
                                                                         positions, base, freq_scale, style,
                                                                         freq_factors);
    return cudaGetLastError();
}

cudaError_t silu_mul(float* out, const float* gate, const float* up, int64_t n, cudaStream_t stream) {
    if (n < 0 || !out || !gate || !up) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    silu_mul_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, gate, up, n);
    return cudaGetLastError();
}

cudaError_t add(float* y, const float* x, int64_t n, cudaStream_t stream) {
    if (n < 0 || !y || !x) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    add_kernel<<<grid_for(n, 256), 256, 0, stream>>>(y, x, n);
    return cudaGetLastError();
}

cudaError_t softmax_rows(float* x, int64_t rows, int64_t n, cudaStream_t stream) {
    if (!x || rows < 0 || n <= 0) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    softmax_rows_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(x, rows, n);
    return cudaGetLastError();
}

cudaError_t topk_rows(const float* x, int64_t rows, int64_t n, int k, bool by_index, int32_t* idx, float* val,
                      cudaStream_t stream) {
    if (!x || !idx || rows < 0 || n <= 0 || n > INT32_MAX || k < 1 || k > kMaxTopK) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    static_assert(kRowThreads == 256, "topk_rows_kernel holds one radix bin per thread");
    topk_rows_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(x, rows, n, k, by_index, idx, val);
    return cudaGetLastError();
}

cudaError_t bf16_to_f32(float* out, const uint16_t* in, int64_t n, cudaStream_t stream) {
    if (n < 0 || !out || !in) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    bf16_to_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, reinterpret_cast<const __nv_bfloat16*>(in), n);
    return cudaGetLastError();
}

cudaError_t f32_to_bf16(uint16_t* out, const float* in, int64_t n, cudaStream_t stream) {
    if (n < 0 || !out || !in) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(reinterpret_cast<__nv_bfloat16*>(out), in, n);
    return cudaGetLastError();
}

}  // namespace sl::cuda
