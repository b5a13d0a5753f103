// MSA's index branch on the device: group-mean index queries, the fused block-scoring kernel
// (tensor cores: one CTA per (query block, group) and run of KV blocks), the top-k selection, and
// the paged write of new K/V rows.
#include <cfloat>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/msa.cuh"
#include "kernels/cuda/ops.cuh"

namespace sl::cuda {

namespace {

constexpr int kIndexWarps = 8;
constexpr int kIndexThreads = kIndexWarps * 32;
constexpr int kBlocksPerCta = 8;

__global__ void group_mean_kernel(const float* q, int64_t n_q, int n_head, int n_kv_head, int D, float* iq) {
    const int G = n_head / n_kv_head;
    const int64_t total = n_q * n_kv_head * D;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(e % D);
        const int g = static_cast<int>((e / D) % n_kv_head);
        const int64_t t = e / (static_cast<int64_t>(D) * n_kv_head);
        const float* row = q + (t * n_head + static_cast<int64_t>(g) * G) * D + i;
        float s = 0.0f;
        for (int h = 0; h < G; ++h) s += row[static_cast<int64_t>(h) * D];
        iq[e] = s / static_cast<float>(G);
    }
}

// Scores KV blocks [blockIdx.x * kBlocksPerCta, +kBlocksPerCta) for task blockIdx.y. The query
// block's rows (B of them; rows past the block's queries repeat its first query, which leaves every
// max unchanged) live as bf16 A fragments in registers, one 16-row tile per warp; each KV block's
// keys are staged in shared memory and every warp takes the max of its 16 x B score tile (warps whose
// tile holds no query of the block sit out the products).
template <int D, int B>
__global__ void __launch_bounds__(kIndexThreads) index_scores_kernel(MsaShape s, const float* iq, int64_t iq_stride,
                                                                     PagedView keys, bool sink, float* scores) {
    constexpr int LD = D + 8;  // bf16 row pitch of the staging tile: conflict-free fragment loads
    constexpr int KC = D / 16;
    __shared__ __align__(16) __nv_bfloat16 tile[B * LD];
    __shared__ float red[kIndexWarps];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int64_t task = blockIdx.y;
    const int g = static_cast<int>(task % s.n_kv_head);
    const int64_t qb = s.first_qblock() + task / s.n_kv_head;
    const int64_t t_begin = (qb * B > s.pos0 ? qb * B : s.pos0) - s.pos0;
    const int64_t t_end = ((qb + 1) * B < s.n_kv() ? (qb + 1) * B : s.n_kv()) - s.pos0;
    const int nq = static_cast<int>(t_end - t_begin);
    const int64_t n_blocks = s.n_kv_blocks();
    const int64_t b_begin = static_cast<int64_t>(blockIdx.x) * kBlocksPerCta;
    const int64_t b_end = b_begin + kBlocksPerCta < n_blocks ? b_begin + kBlocksPerCta : n_blocks;
    float* out = scores + task * n_blocks;

    // Forced and invisible blocks need no keys.
    bool any_scored = false;
    for (int64_t b = b_begin; b < b_end; ++b) {
        const bool forced_sink = sink && b == 0 && qb != 0;
        if (b < qb && !forced_sink) any_scored = true;
        if (threadIdx.x == 0 && !(b < qb && !forced_sink))
            out[b] = b == qb ? INFINITY : forced_sink ? FLT_MAX : -INFINITY;
    }
    if (!any_scored) return;  // uniform over the CTA

    // Stage the index queries as bf16 and pick up this warp's A fragments.
    for (int idx = threadIdx.x; idx < B * D; idx += kIndexThreads) {
        const int r = idx / D, i = idx % D;
        const int64_t t = t_begin + (r < nq ? r : 0);
        tile[r * LD + i] = __float2bfloat16_rn(iq[t * iq_stride + static_cast<int64_t>(g) * D + i]);
    }
    __syncthreads();
    // Row tiles past the block's queries only repeat its first query: skip them (decode has one).
    const bool has_rows = warp * 16 < (nq < B ? nq : B);
    uint32_t qa[KC][4];
    if (has_rows) {
        const __nv_bfloat16* r0 = tile + (warp * 16 + gid) * LD + 2 * tig;
        const __nv_bfloat16* r8 = r0 + 8 * LD;
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
            qa[kc][0] = *reinterpret_cast<const uint32_t*>(r0 + kc * 16);
            qa[kc][1] = *reinterpret_cast<const uint32_t*>(r8 + kc * 16);
            qa[kc][2] = *reinterpret_cast<const uint32_t*>(r0 + kc * 16 + 8);
            qa[kc][3] = *reinterpret_cast<const uint32_t*>(r8 + kc * 16 + 8);
        }
    }

    const uint16_t* head_base = keys.base + static_cast<int64_t>(g) * keys.head_stride;
    for (int64_t b = b_begin; b < b_end; ++b) {
        if (b >= qb || (sink && b == 0)) continue;  // written above; uniform
        const int32_t phys = keys.table[b];
        if (phys < 0) {  // not resident: never selected (documented in msa.cuh)
            if (threadIdx.x == 0) out[b] = -INFINITY;
            continue;
        }
        __syncthreads();  // the previous block's tile and red are consumed
        const uint16_t* src = head_base + static_cast<int64_t>(phys) * keys.block_stride;
        for (int idx = threadIdx.x; idx < B * (D / 8); idx += kIndexThreads) {
            const int r = idx / (D / 8), c8 = idx % (D / 8);
            *reinterpret_cast<uint4*>(tile + r * LD + c8 * 8) =
                *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * D + c8 * 8);
        }
        __syncthreads();
        float mx = -INFINITY;
        if (has_rows) {
#pragma unroll 2
            for (int nt = 0; nt < B / 8; ++nt) {
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                const __nv_bfloat16* kr = tile + (nt * 8 + gid) * LD + 2 * tig;
#pragma unroll
                for (int kc = 0; kc < KC; ++kc) {
                    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr + kc * 16);
                    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + kc * 16 + 8);
                    dev::mma_bf16_16816(acc, qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b0, b1);
                }
                mx = fmaxf(mx, fmaxf(fmaxf(acc[0], acc[1]), fmaxf(acc[2], acc[3])));
            }
        }
        mx = dev::warp_max(mx);
        if (lane == 0) red[warp] = mx;
        __syncthreads();
        if (threadIdx.x == 0) {
            float m = red[0];
            for (int w = 1; w < kIndexWarps; ++w) m = fmaxf(m, red[w]);
            out[b] = m;
        }
    }
}

__global__ void write_paged_kernel(PagedView dst, int n_heads, const float* rows, int64_t pos0, int64_t n) {
    const int D = dst.head_dim;
    const int64_t total = n * n_heads * D;
    __nv_bfloat16* base = reinterpret_cast<__nv_bfloat16*>(const_cast<uint16_t*>(dst.base));
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(e % D);
        const int h = static_cast<int>((e / D) % n_heads);
        const int64_t pos = pos0 + e / (static_cast<int64_t>(D) * n_heads);
        const int32_t phys = dst.table[pos / dst.block_size];
        if (phys < 0) continue;
        base[phys * dst.block_stride + h * dst.head_stride + (pos % dst.block_size) * D + i] =
            __float2bfloat16_rn(rows[e]);
    }
}

__global__ void select_all_kernel(MsaShape s, int top_k, int32_t* sel) {
    const int64_t total = s.n_tasks() * top_k;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t task = e / top_k, j = e % top_k;
        const int64_t qb = s.first_qblock() + task / s.n_kv_head;
        sel[e] = j <= qb ? static_cast<int32_t>(j) : -1;
    }
}

unsigned elem_grid(int64_t n) {
    const int64_t b = (n + 255) / 256;
    return static_cast<unsigned>(b < 65535 * 32 ? b : 65535 * 32);
}

bool view_ok(const PagedView& v) {
    return v.base && v.table && (v.head_dim == 64 || v.head_dim == 128) && v.block_size > 0 &&
           v.block_stride % 8 == 0 && v.head_stride % 8 == 0 && v.head_stride >= 0 &&
           (reinterpret_cast<uintptr_t>(v.base) % 16) == 0;
}

bool shape_ok(const MsaShape& s) {
    return s.pos0 >= 0 && s.n_q > 0 && s.n_kv_head > 0 && s.n_head > 0 && s.n_head % s.n_kv_head == 0 &&
           (s.block_size == 64 || s.block_size == 128) && (s.head_dim == 64 || s.head_dim == 128);
}

template <int D, int B>
cudaError_t launch_index(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys, bool sink,
                         float* scores, cudaStream_t stream) {
    const int64_t gx = (s.n_kv_blocks() + kBlocksPerCta - 1) / kBlocksPerCta;
    const int64_t gy = s.n_tasks();
    if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
    index_scores_kernel<D, B><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), kIndexThreads, 0, stream>>>(
        s, iq, iq_stride, keys, sink, scores);
    return cudaGetLastError();
}

}  // namespace

cudaError_t msa_group_mean(const float* q, const MsaShape& s, float* iq, cudaStream_t stream) {
    if (!q || !iq || !shape_ok(s)) return cudaErrorInvalidValue;
    const int64_t total = static_cast<int64_t>(s.n_q) * s.n_kv_head * s.head_dim;
    group_mean_kernel<<<elem_grid(total), 256, 0, stream>>>(q, s.n_q, s.n_head, s.n_kv_head, s.head_dim, iq);
    return cudaGetLastError();
}

cudaError_t msa_index_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys, bool sink,
                             float* scores, cudaStream_t stream) {
    if (!iq || !scores || !shape_ok(s) || !view_ok(keys) || keys.block_size != s.block_size ||
        iq_stride < static_cast<int64_t>(s.n_kv_head) * keys.head_dim)
        return cudaErrorInvalidValue;
    const bool d128 = keys.head_dim == 128, b128 = s.block_size == 128;
    if (d128 && b128) return launch_index<128, 128>(s, iq, iq_stride, keys, sink, scores, stream);
    if (d128) return launch_index<128, 64>(s, iq, iq_stride, keys, sink, scores, stream);
    if (b128) return launch_index<64, 128>(s, iq, iq_stride, keys, sink, scores, stream);
    return launch_index<64, 64>(s, iq, iq_stride, keys, sink, scores, stream);
}

cudaError_t msa_select(const float* scores, const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream) {
    if (!shape_ok(s)) return cudaErrorInvalidValue;
    return topk_rows(scores, s.n_tasks(), s.n_kv_blocks(), top_k, /*by_index=*/true, sel, nullptr, stream);
}

cudaError_t msa_select_all(const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream) {
    if (!sel || !shape_ok(s) || top_k < s.n_kv_blocks()) return cudaErrorInvalidValue;
    select_all_kernel<<<elem_grid(s.n_tasks() * top_k), 256, 0, stream>>>(s, top_k, sel);
    return cudaGetLastError();
}

cudaError_t write_paged(const PagedView& dst, int n_heads, const float* rows, int64_t pos0, int64_t n,
                        cudaStream_t stream) {
    if (!rows || !view_ok(dst) || n_heads <= 0 || pos0 < 0 || n < 0 ||
        (n_heads > 1 && dst.head_stride < static_cast<int64_t>(dst.block_size) * dst.head_dim))
        return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    write_paged_kernel<<<elem_grid(n * n_heads * dst.head_dim), 256, 0, stream>>>(dst, n_heads, rows, pos0, n);
    return cudaGetLastError();
}

}  // namespace sl::cuda
