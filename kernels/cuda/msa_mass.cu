// The attention mass of a call of one query (decode) over its selected blocks, per token, for
// citations (msa.cuh, msa_token_mass). One CTA per KV group: for each head of the group in turn,
// the scores of every selected token (f32 query, bf16 keys) go to shared memory, a block-wide max
// and sum give the softmax, and each thread adds its tokens' probabilities / G to the output it
// alone owns (no atomics; the same token -> thread mapping for every head).
#include <cfloat>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/msa.cuh"

namespace sl::cuda {

namespace {

constexpr int kThreads = 256;

template <int D>
__global__ void __launch_bounds__(kThreads)
    token_mass_kernel(MsaShape s, const float* q, float scale, const int32_t* sel, int top_k, PagedView kk, float* mass) {
    extern __shared__ float sm[];
    const int B = s.block_size;
    const int n = top_k * B;
    float* sc = sm;            // (top_k, B) scores, then exponentials
    float* qs = sm + n;        // the head's query, scaled
    float* red = qs + D;       // 32 floats of reduction scratch
    const int g = static_cast<int>(blockIdx.x);
    const int G = s.n_head / s.n_kv_head;
    const int64_t qpos = s.pos0;  // n_q == 1
    const int32_t* my = sel + static_cast<int64_t>(g) * top_k;
    float* out = mass + static_cast<int64_t>(g) * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 0.0f;
    for (int hh = 0; hh < G; ++hh) {
        const int head = g * G + hh;
        __syncthreads();  // every thread is done with the previous head's query
        for (int i = threadIdx.x; i < D; i += blockDim.x) qs[i] = q[static_cast<int64_t>(head) * D + i] * scale;
        __syncthreads();
        float mx = -INFINITY;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const int si = i / B, t = i % B;
            const int32_t b = my[si];
            float v = -INFINITY;
            if (b >= 0) {
                const int64_t pos = static_cast<int64_t>(b) * B + t;
                const int32_t phys = kk.table[b];
                if (pos <= qpos && phys >= 0) {
                    const uint16_t* kr = kk.base + static_cast<int64_t>(phys) * kk.block_stride + g * kk.head_stride +
                                         static_cast<int64_t>(t) * kk.head_dim;
                    float acc = 0.0f;
#pragma unroll 8
                    for (int d = 0; d < D; d += 2) {
                        const float2 kf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(kr + d));
                        acc = fmaf(qs[d], kf.x, acc);
                        acc = fmaf(qs[d + 1], kf.y, acc);
                    }
                    v = acc;
                }
            }
            sc[i] = v;
            mx = fmaxf(mx, v);
        }
        mx = dev::block_max(mx, red);
        float sum = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const float e = sc[i] == -INFINITY ? 0.0f : __expf(sc[i] - mx);
            sc[i] = e;
            sum += e;
        }
        sum = dev::block_sum(sum, red);
        const float w = sum > 0.0f ? 1.0f / (sum * static_cast<float>(G)) : 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] += sc[i] * w;
    }
}

}  // namespace

cudaError_t msa_token_mass(const MsaShape& s, const float* q, float scale, const int32_t* sel, int top_k,
                           const PagedView& k, float* mass, cudaStream_t stream) {
    if (s.n_q != 1 || s.n_kv_head <= 0 || s.n_head % s.n_kv_head != 0 || top_k < 1 ||
        static_cast<int64_t>(top_k) * s.block_size > kMaxMassTokens || (s.head_dim != 64 && s.head_dim != 128) ||
        k.head_dim != s.head_dim || k.block_size != s.block_size)
        return cudaErrorInvalidValue;
    const size_t smem = (static_cast<size_t>(top_k) * s.block_size + s.head_dim + 32) * sizeof(float);
    const dim3 grid(static_cast<unsigned>(s.n_kv_head));
    if (s.head_dim == 64)
        token_mass_kernel<64><<<grid, kThreads, smem, stream>>>(s, q, scale, sel, top_k, k, mass);
    else
        token_mass_kernel<128><<<grid, kThreads, smem, stream>>>(s, q, scale, sel, top_k, k, mass);
    return cudaGetLastError();
}

}  // namespace sl::cuda
