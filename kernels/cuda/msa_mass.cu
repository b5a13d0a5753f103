// The attention mass of a call of one query (decode) over its selected blocks, per token, for
// citations (msa.cuh, msa_token_mass). One CTA per KV group; each thread owns a fixed set of the
// selection's tokens and scores each against all G heads of the group at once (one read of the key
// row per pass). Pass 1: per head, the block-wide max and sum of the softmax (an online softmax per
// thread, merged); pass 2: the scores again, and each token's probability averaged over the heads
// written to the output the thread alone owns. No shared-memory copy of the scores, so a grown
// selection of any width fits (the former kernel held top_k * B scores in 48 KiB: 80 blocks).
// With position remapping (REMAP, msa.cuh MsaRemap) a block far from the query is scored with the
// heads' q^ against its keys rotated by R(-b*B), the logits the sparse branch attends it with.
#include <cfloat>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/msa.cuh"

namespace sl::cuda {

namespace {

constexpr int kThreads = 256;

// The key row of token t of selection entry b for group g, or null when it is not attended
// (padding, past the query, not resident).
__device__ __forceinline__ const uint16_t* key_row(const PagedView& kk, int32_t b, int t, int g, int B, int64_t qpos) {
    if (b < 0) return nullptr;
    const int64_t pos = static_cast<int64_t>(b) * B + t;
    const int32_t phys = kk.table[b];
    if (pos > qpos || phys < 0) return nullptr;
    return kk.base + static_cast<int64_t>(phys) * kk.block_stride + g * kk.head_stride + static_cast<int64_t>(t) * kk.head_dim;
}

// sc[h] = q_h · k for the group's G heads (scaled queries in shared memory).
template <int D>
__device__ __forceinline__ void head_scores(const float (*qs)[D], int G, const uint16_t* kr,
                                            float (&sc)[kMaxMassGroup]) {
#pragma unroll
    for (int h = 0; h < kMaxMassGroup; ++h) sc[h] = 0.0f;
    for (int d = 0; d < D; d += 2) {
        const float2 kf = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(kr + d));
#pragma unroll
        for (int h = 0; h < kMaxMassGroup; ++h)
            if (h < G) sc[h] = fmaf(qs[h][d + 1], kf.y, fmaf(qs[h][d], kf.x, sc[h]));
    }
}

// The same against a key rotated by the block's angles cs (REMAP's far blocks, heads' q^ in qs).
template <int D>
__device__ __forceinline__ void head_scores_rotated(const float (*qs)[D], int G, const uint16_t* kr,
                                                    const MsaRemap& remap, const float* cs,
                                                    float (&sc)[kMaxMassGroup]) {
#pragma unroll
    for (int h = 0; h < kMaxMassGroup; ++h) sc[h] = 0.0f;
    const __nv_bfloat16* kb = reinterpret_cast<const __nv_bfloat16*>(kr);
    const int half = remap.rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        const int2 d = dev::rope_pair(i, remap.rot_dim, remap.style);
        float k0 = __bfloat162float(kb[d.x]), k1 = __bfloat162float(kb[d.y]);
        dev::rotate2(k0, k1, cs[2 * i], cs[2 * i + 1]);
        k0 = __bfloat162float(__float2bfloat16_rn(k0));  // as the sparse branch stages k^ (bf16)
        k1 = __bfloat162float(__float2bfloat16_rn(k1));
#pragma unroll
        for (int h = 0; h < kMaxMassGroup; ++h)
            if (h < G) sc[h] = fmaf(qs[h][d.y], k1, fmaf(qs[h][d.x], k0, sc[h]));
    }
    for (int i = remap.rot_dim; i < D; ++i) {
        const float k = __bfloat162float(kb[i]);
#pragma unroll
        for (int h = 0; h < kMaxMassGroup; ++h)
            if (h < G) sc[h] = fmaf(qs[h][i], k, sc[h]);
    }
}

template <int D, bool REMAP>
__global__ void __launch_bounds__(kThreads)
    token_mass_kernel(MsaShape s, const float* q, float scale, const int32_t* sel, int top_k, PagedView kk, float* mass,
                      MsaRemap remap) {
    __shared__ float qs[kMaxMassGroup][D];  // a chunk of the group's queries, scaled
    __shared__ float qs_far[REMAP ? kMaxMassGroup : 1][D];  // REMAP: their q^, scaled
    __shared__ float red[32];
    __shared__ float hmax[kMaxMassGroup], hsum[kMaxMassGroup];
    const int B = s.block_size;
    const int64_t n = static_cast<int64_t>(top_k) * B;
    const int g = static_cast<int>(blockIdx.x);
    const int G = s.n_head / s.n_kv_head;
    const int64_t qpos = s.pos0;  // n_q == 1
    const int32_t* my = sel + static_cast<int64_t>(g) * top_k;
    float* out = mass + static_cast<int64_t>(g) * n;
    // The heads go in chunks of up to kMaxMassGroup (one chunk unless a group is wider: MQA).
    for (int h0 = 0; h0 < G; h0 += kMaxMassGroup) {
        const int Gc = G - h0 < kMaxMassGroup ? G - h0 : kMaxMassGroup;
        __syncthreads();  // the previous chunk is done with qs
        for (int i = threadIdx.x; i < Gc * D; i += blockDim.x) {
            const int64_t at = (static_cast<int64_t>(g) * G + h0 + i / D) * D + i % D;
            qs[i / D][i % D] = q[at] * scale;
            if constexpr (REMAP) qs_far[i / D][i % D] = remap.q_far[at] * scale;
        }
        __syncthreads();
        // The chunk's scores of selected token i (entry i / B, token i % B), false when not attended.
        auto scores = [&](int64_t i, float (&sc)[kMaxMassGroup]) {
            const int32_t b = my[i / B];
            const uint16_t* kr = key_row(kk, b, static_cast<int>(i % B), g, B, qpos);
            if (!kr) return false;
            if constexpr (REMAP) {
                if (remap.far(qpos, b, B)) {
                    head_scores_rotated<D>(qs_far, Gc, kr, remap, remap.rel + b * static_cast<int64_t>(remap.rot_dim), sc);
                    return true;
                }
            }
            head_scores<D>(qs, Gc, kr, sc);
            return true;
        };

        float m[kMaxMassGroup], z[kMaxMassGroup];
#pragma unroll
        for (int h = 0; h < kMaxMassGroup; ++h) {
            m[h] = -INFINITY;
            z[h] = 0.0f;
        }
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float sc[kMaxMassGroup];
            if (!scores(i, sc)) continue;
#pragma unroll
            for (int h = 0; h < kMaxMassGroup; ++h) {
                if (h >= Gc) break;
                if (sc[h] > m[h]) {
                    z[h] = z[h] * __expf(m[h] - sc[h]) + 1.0f;
                    m[h] = sc[h];
                } else {
                    z[h] += __expf(sc[h] - m[h]);
                }
            }
        }
        for (int h = 0; h < Gc; ++h) {  // uniform
            float mh = -INFINITY, zh = 0.0f;
#pragma unroll
            for (int j = 0; j < kMaxMassGroup; ++j)  // registers indexed by constants only
                if (j == h) {
                    mh = m[j];
                    zh = z[j];
                }
            const float M = dev::block_max(mh, red);
            const float Z = dev::block_sum(mh == -INFINITY ? 0.0f : zh * __expf(mh - M), red);
            if (threadIdx.x == 0) {
                hmax[h] = M;
                hsum[h] = Z;
            }
        }
        __syncthreads();
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {  // each thread owns its outputs
            float p = 0.0f;
            float sc[kMaxMassGroup];
            if (scores(i, sc)) {
#pragma unroll
                for (int h = 0; h < kMaxMassGroup; ++h)
                    if (h < Gc && hsum[h] > 0.0f) p += __expf(sc[h] - hmax[h]) / (hsum[h] * static_cast<float>(G));
            }
            out[i] = h0 == 0 ? p : out[i] + p;
        }
    }
}

}  // namespace

cudaError_t msa_token_mass(const MsaShape& s, const float* q, float scale, const int32_t* sel, int top_k,
                           const PagedView& k, float* mass, cudaStream_t stream, const MsaRemap& remap) {
    // The view as the sparse attention takes it (bf16 pairs read 4 bytes at a time).
    if (!q || !sel || !mass || s.n_q != 1 || s.pos0 < 0 || s.n_head <= 0 || s.n_kv_head <= 0 ||
        s.n_head % s.n_kv_head != 0 || top_k < 1 || (s.head_dim != 64 && s.head_dim != 128) ||
        k.head_dim != s.head_dim || k.block_size != s.block_size || !k.base || !k.table || k.block_stride % 8 != 0 ||
        k.head_stride % 8 != 0 || k.head_stride < 0 || (reinterpret_cast<uintptr_t>(k.base) % 16) != 0 ||
        (remap.on() && (!remap.q_far || !remap.valid(s.head_dim))))
        return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(s.n_kv_head));
    const bool rm = remap.on();
    if (s.head_dim == 64 && rm)
        token_mass_kernel<64, true><<<grid, kThreads, 0, stream>>>(s, q, scale, sel, top_k, k, mass, remap);
    else if (s.head_dim == 64)
        token_mass_kernel<64, false><<<grid, kThreads, 0, stream>>>(s, q, scale, sel, top_k, k, mass, remap);
    else if (rm)
        token_mass_kernel<128, true><<<grid, kThreads, 0, stream>>>(s, q, scale, sel, top_k, k, mass, remap);
    else
        token_mass_kernel<128, false><<<grid, kThreads, 0, stream>>>(s, q, scale, sel, top_k, k, mass, remap);
    return cudaGetLastError();
}

}  // namespace sl::cuda
