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
                            const int64_t* positions, float base, float freq_scale, int style) {
    const int half = rot_dim / 2;
    const int64_t total = rows * half;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = e / half;
        const int i = static_cast<int>(e % half);
        const int64_t pos = positions ? positions[r] : pos0 + r;
        const double inv_freq = pow(static_cast<double>(base), -2.0 * i / rot_dim);
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

// (va, ia) ranks before (vb, ib): larger value, then lower index. ia < 0 is "nothing".
__device__ __forceinline__ bool ranks_before(float va, int64_t ia, float vb, int64_t ib) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    return va > vb || (va == vb && ia < ib);
}

// One CTA per row. Entries are taken in rank order, so each thread keeps the best of its own
// entries that ranks after the last one taken; after each round only the winner's thread rescans.
__global__ void topk_rows_kernel(const float* x, int64_t rows, int64_t n, int k, bool by_index, int32_t* idx,
                                 float* val) {
    __shared__ float w_val[32];
    __shared__ int64_t w_idx[32];
    __shared__ float s_val[kMaxTopK];
    __shared__ int64_t s_idx[kMaxTopK];
    __shared__ int s_count;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * n;
        // Thread-local best ranking strictly after (bound_v, bound_i); bound_i < 0: no bound.
        auto scan = [&](float bound_v, int64_t bound_i, float& best_v, int64_t& best_i) {
            best_v = -INFINITY;
            best_i = -1;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                const float v = xr[i];
                if (isnan(v) || v == -INFINITY) continue;
                if (bound_i >= 0 && !ranks_before(bound_v, bound_i, v, i)) continue;
                if (ranks_before(v, i, best_v, best_i)) {
                    best_v = v;
                    best_i = i;
                }
            }
        };
        float my_v;
        int64_t my_i;
        scan(0.0f, -1, my_v, my_i);
        if (threadIdx.x == 0) s_count = 0;
        for (int round = 0; round < k; ++round) {
            float bv = my_v;
            int64_t bi = my_i;
            for (int o = 16; o > 0; o >>= 1) {
                const float ov = __shfl_xor_sync(dev::kFullMask, bv, o);
                const int64_t oi = __shfl_xor_sync(dev::kFullMask, bi, o);
                if (ranks_before(ov, oi, bv, bi)) {
                    bv = ov;
                    bi = oi;
                }
            }
            __syncthreads();  // w_* of the previous round are read
            if (lane == 0) {
                w_val[warp] = bv;
                w_idx[warp] = bi;
            }
            __syncthreads();
            bv = w_val[0];
            bi = w_idx[0];
            for (int w = 1; w < n_warps; ++w)
                if (ranks_before(w_val[w], w_idx[w], bv, bi)) {
                    bv = w_val[w];
                    bi = w_idx[w];
                }
            if (bi < 0) break;  // uniform: every thread read the same winner
            if (threadIdx.x == 0) {
                s_val[round] = bv;
                s_idx[round] = bi;
                s_count = round + 1;
            }
            if (my_i == bi) scan(bv, bi, my_v, my_i);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            const int c = s_count;
            if (by_index) {  // insertion sort of at most kMaxTopK ids
                for (int a = 1; a < c; ++a) {
                    const int64_t ti = s_idx[a];
                    const float tv = s_val[a];
                    int b = a - 1;
                    while (b >= 0 && s_idx[b] > ti) {
                        s_idx[b + 1] = s_idx[b];
                        s_val[b + 1] = s_val[b];
                        --b;
                    }
                    s_idx[b + 1] = ti;
                    s_val[b + 1] = tv;
                }
            }
            for (int j = 0; j < k; ++j) {
                idx[r * k + j] = j < c ? static_cast<int32_t>(s_idx[j]) : -1;
                if (val) val[r * k + j] = j < c ? s_val[j] : -INFINITY;
            }
        }
        __syncthreads();
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
                 const int64_t* positions, float base, float freq_scale, int style, cudaStream_t stream) {
    if (!x || rows < 0 || n_heads <= 0 || head_dim <= 0 || rot_dim <= 0 || rot_dim > head_dim || rot_dim % 2 ||
        (style != 0 && style != 1))
        return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    rope_kernel<<<grid_for(rows * (rot_dim / 2), 128), 128, 0, stream>>>(x, rows, n_heads, head_dim, rot_dim, pos0,
                                                                         positions, base, freq_scale, style);
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
