// The local window and the mass-adaptive growth of an MSA selection on the device (msa.cuh,
// msa_extend_selection): the CPU's SelectParams::window and mass (core/attention/block_select.cpp,
// grow_by_mass) with group-mean index queries. Three steps on the stream:
//   1. estimate_kernel, one CTA per (query block, group) task: the estimated mass of every visible
//      block (two passes over the mean keys: each sampled query's softmax max and sum, then the
//      normalized average), the selection's own blocks and the window's summed into `have` and
//      marked -inf (taken), blocks past the local one -inf;
//   2. topk_rows: the `room` untaken blocks of most estimate, best first (ties: lower id);
//   3. compose_kernel, one CTA per task: the selection, the window and as many of those as it takes
//      to reach `mass` (at most the task's room, msa_rules::growth_room), sorted by rank.
// With position remapping (REMAP, msa.cuh MsaRemap) a sampled query scores a block far from it with
// its far row (iq_far) against the block's mean key rotated by R(-b*B), as the CPU does.
#include <cfloat>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/msa.cuh"
#include "kernels/cuda/ops.cuh"

namespace sl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRows = msa_rules::kMassRows;

struct Task {
    int64_t qb;       // the query block
    int g;            // the KV group
    int64_t t_begin;  // its first query's row in the call
    int nq;           // its queries in the call
};

__device__ __forceinline__ Task task_of(const MsaShape& s, int64_t task) {
    Task t;
    t.g = static_cast<int>(task % s.n_kv_head);
    t.qb = s.first_qblock() + task / s.n_kv_head;
    const int64_t B = s.block_size;
    t.t_begin = (t.qb * B > s.pos0 ? t.qb * B : s.pos0) - s.pos0;
    const int64_t t_end = ((t.qb + 1) * B < s.n_kv() ? (t.qb + 1) * B : s.n_kv()) - s.pos0;
    t.nq = static_cast<int>(t_end - t.t_begin);
    return t;
}

// scale * iq_r · kmean(b, g) for the R staged rows (f32 rows, bf16 mean key, f32 sums), plus
// log n_b.
template <int D>
__device__ __forceinline__ void estimates(const float (*rows)[D], int R, const uint16_t* km, float scale, float log_n,
                                          float (&e)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) e[r] = 0.0f;
    for (int i = 0; i < D; i += 2) {
        const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(km + i));
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            if (r < R) e[r] = fmaf(rows[r][i + 1], k.y, fmaf(rows[r][i], k.x, e[r]));
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) e[r] = scale * e[r] + log_n;
}

// The same with position remapping: rows whose query is far from block b (far_row bit r) score with
// their far row against the mean key rotated by the block's angles `cs` (rot_dim / 2 cos, sin).
template <int D>
__device__ __forceinline__ void estimates_remap(const float (*rows)[D], const float (*rows_far)[D], int R,
                                                unsigned far_rows, const uint16_t* km, const MsaRemap& remap,
                                                const float* cs, float scale, float log_n, float (&e)[kRows]) {
    float en[kRows], ef[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) en[r] = ef[r] = 0.0f;
    const int half = remap.rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        const int2 d = dev::rope_pair(i, remap.rot_dim, remap.style);
        const __nv_bfloat16* kb = reinterpret_cast<const __nv_bfloat16*>(km);
        const float k0 = __bfloat162float(kb[d.x]), k1 = __bfloat162float(kb[d.y]);
        float r0 = k0, r1 = k1;
        dev::rotate2(r0, r1, cs[2 * i], cs[2 * i + 1]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (r >= R) break;
            en[r] = fmaf(rows[r][d.y], k1, fmaf(rows[r][d.x], k0, en[r]));
            ef[r] = fmaf(rows_far[r][d.y], r1, fmaf(rows_far[r][d.x], r0, ef[r]));
        }
    }
    for (int i = remap.rot_dim; i < D; ++i) {  // dims past rot_dim do not rotate
        const float k = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(km)[i]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (r >= R) break;
            en[r] = fmaf(rows[r][i], k, en[r]);
            ef[r] = fmaf(rows_far[r][i], k, ef[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) e[r] = scale * (((far_rows >> r) & 1u) ? ef[r] : en[r]) + log_n;
}

// imp (n_tasks, n_blocks): the estimated mass of each untaken visible block, -inf for the taken and
// the invisible ones; have (n_tasks): the estimate the selection and the window hold already.
template <int D, bool REMAP>
__global__ void __launch_bounds__(kThreads)
    estimate_kernel(MsaShape s, const float* iq, int64_t iq_stride, const uint16_t* kmean, const int32_t* sel,
                    int top_k, int window, float scale, float* imp, float* have, MsaRemap remap) {
    __shared__ float rows[kRows][D];
    __shared__ float rows_far[REMAP ? kRows : 1][D];
    __shared__ float red[32];
    __shared__ float row_max[kRows], row_sum[kRows];
    const int64_t task = blockIdx.x;
    const Task t = task_of(s, task);
    const int64_t n_blocks = s.n_kv_blocks(), n_vis = t.qb + 1;
    const int R = msa_rules::mass_samples(t.nq);
    for (int idx = threadIdx.x; idx < R * D; idx += blockDim.x) {
        const int r = idx / D, i = idx % D;
        const int64_t row = t.t_begin + msa_rules::mass_sample_query(r, t.nq, R);
        rows[r][i] = iq[row * iq_stride + static_cast<int64_t>(t.g) * D + i];
        if constexpr (REMAP) rows_far[r][i] = remap.iq_far[row * iq_stride + static_cast<int64_t>(t.g) * D + i];
    }
    __syncthreads();
    const int B = s.block_size;
    const int64_t local_tokens = s.n_kv() - t.qb * B < B ? s.n_kv() - t.qb * B : B;
    const float log_full = logf(static_cast<float>(B)), log_local = logf(static_cast<float>(local_tokens));
    auto key = [&](int64_t b) { return kmean + (b * s.n_kv_head + t.g) * D; };
    // The estimates of block b for the sampled queries.
    auto block_estimates = [&](int64_t b, float (&e)[kRows]) {
        const float log_n = b == t.qb ? log_local : log_full;
        if constexpr (REMAP) {
            unsigned far_rows = 0;
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                if (r >= R) break;
                const int64_t qpos = s.pos0 + t.t_begin + msa_rules::mass_sample_query(r, t.nq, R);
                if (remap.far(qpos, b, B)) far_rows |= 1u << r;
            }
            if (far_rows) {
                estimates_remap<D>(rows, rows_far, R, far_rows, key(b), remap,
                                   remap.rel + b * static_cast<int64_t>(remap.rot_dim), scale, log_n, e);
                return;
            }
        }
        estimates<D>(rows, R, key(b), scale, log_n, e);
    };

    // Pass 1: per sampled query, the max and the sum of exp(e - max) over the visible blocks (an
    // online softmax per thread, then merged over the block).
    float m[kRows], z[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        m[r] = -INFINITY;
        z[r] = 0.0f;
    }
    for (int64_t b = threadIdx.x; b < n_vis; b += blockDim.x) {
        float e[kRows];
        block_estimates(b, e);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            if (e[r] > m[r]) {
                z[r] = z[r] * __expf(m[r] - e[r]) + 1.0f;
                m[r] = e[r];
            } else {
                z[r] += __expf(e[r] - m[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {  // constant indices keep m, z in registers
        if (r >= R) break;             // uniform
        const float M = dev::block_max(m[r], red);
        const float Z = dev::block_sum(m[r] == -INFINITY ? 0.0f : z[r] * __expf(m[r] - M), red);
        if (threadIdx.x == 0) {
            row_max[r] = M;
            row_sum[r] = Z;
        }
    }
    __syncthreads();

    // Pass 2: the average over the sampled queries of each block's normalized estimate.
    const int32_t* my_sel = sel + task * top_k;
    const int64_t w_begin = t.qb - (window < t.qb ? window : t.qb);
    float* out = imp + task * n_blocks;
    float held = 0.0f;
    for (int64_t b = threadIdx.x; b < n_blocks; b += blockDim.x) {
        if (b >= n_vis) {
            out[b] = -INFINITY;
            continue;
        }
        float e[kRows];
        block_estimates(b, e);
        float v = 0.0f;
#pragma unroll
        for (int r = 0; r < kRows; ++r)
            if (r < R) v += __expf(e[r] - row_max[r]) / (row_sum[r] * static_cast<float>(R));
        bool taken = b >= w_begin;  // the window or the local block
        for (int i = 0; i < top_k && !taken; ++i) taken = my_sel[i] == b;
        if (taken) held += v;
        out[b] = taken ? -INFINITY : v;
    }
    held = dev::block_sum(held, red);
    if (threadIdx.x == 0) have[task] = held;
}

// out (n_tasks, out_k): sel's blocks, the window's and the growth's, ascending, -1-padded.
__global__ void __launch_bounds__(kThreads)
    compose_kernel(MsaShape s, const int32_t* sel, int top_k, int window, MsaGrowth grow, const int32_t* gidx,
                   const float* gval, const float* have, int32_t* out, int out_k) {
    extern __shared__ int32_t list[];  // (top_k + window + grow.room)
    __shared__ int n_list;
    const int64_t task = blockIdx.x;
    const Task t = task_of(s, task);
    const int64_t n_vis = t.qb + 1;
    const int32_t* my_sel = sel + task * top_k;
    if (threadIdx.x == 0) {
        // Distinct blocks (the ranks below are places): a window block that sel holds already (a
        // selection of every block, a window other than the index's) or a growth pick of either
        // is listed once.
        const int64_t w_begin = t.qb - (window < t.qb ? window : t.qb);
        auto listed = [&](int32_t b) {
            if (b >= w_begin && b < t.qb) return true;
            for (int i = 0; i < top_k; ++i)
                if (my_sel[i] == b) return true;
            return false;
        };
        int n = 0;
        for (int i = 0; i < top_k; ++i)
            if (my_sel[i] >= 0 && (my_sel[i] < w_begin || my_sel[i] >= t.qb)) list[n++] = my_sel[i];
        for (int64_t b = w_begin; b < t.qb; ++b) list[n++] = static_cast<int32_t>(b);
        if (grow.mass > 0.0f && gidx) {
            const int64_t room = msa_rules::growth_room(grow.room, grow.full_blocks, n_vis);
            // As the CPU: nothing when every visible block is in already; else the best first until
            // the selection holds `mass` of the estimate or the room is spent.
            double h = have[task];
            if (n < n_vis)
                for (int64_t i = 0; i < room && h < grow.mass; ++i) {
                    const int32_t b = gidx[task * grow.room + i];
                    if (b < 0) break;
                    if (listed(b)) continue;
                    list[n++] = b;
                    h += gval[task * grow.room + i];
                }
        }
        n_list = n;
    }
    __syncthreads();
    const int n = n_list;
    int32_t* my_out = out + task * out_k;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {  // the blocks are distinct: a rank is a place
        const int32_t b = list[i];
        int rank = 0;
        for (int j = 0; j < n; ++j) rank += list[j] < b;
        my_out[rank] = b;
    }
    for (int i = n + threadIdx.x; i < out_k; i += blockDim.x) my_out[i] = -1;
}

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

// Workspace layout: estimates f32 (n_tasks, n_kv_blocks) | have f32 (n_tasks) | growth ids int32
// (n_tasks, room) | growth estimates f32 (n_tasks, room), each 256-aligned.
int64_t msa_extend_workspace_bytes(const MsaShape& s, int room) {
    const int64_t t = s.n_tasks();
    const int64_t r = room > 0 ? room : 0;
    return align256(t * s.n_kv_blocks() * 4) + align256(t * 4) + 2 * align256(t * r * 4);
}

cudaError_t msa_extend_selection(const MsaShape& s, const float* iq, int64_t iq_stride, const uint16_t* kmean,
                                 const int32_t* sel, int top_k, int window, const MsaGrowth& grow, int32_t* out,
                                 int out_k, void* workspace, int64_t workspace_bytes, cudaStream_t stream,
                                 const MsaRemap& remap) {
    const bool growing = grow.mass > 0.0f;
    const int64_t list = static_cast<int64_t>(top_k) + window + (growing ? grow.room : 0);  // compose's shared list
    const int64_t task_count = s.n_q > 0 && s.block_size > 0 && s.n_kv_head > 0 ? s.n_tasks() : 0;
    const bool overlap = sel && out && out < sel + task_count * top_k && sel < out + task_count * out_k;
    if (!sel || !out || overlap || list * 4 > 40 * 1024 || top_k < 1 || window < 0 || s.n_q <= 0 || s.n_kv_head <= 0 ||
        s.n_head % s.n_kv_head != 0 || (s.block_size != 64 && s.block_size != 128) ||
        (s.head_dim != 64 && s.head_dim != 128) || grow.room < 0 || grow.room > kMaxTopK || grow.full_blocks < 0 ||
        static_cast<int64_t>(out_k) < static_cast<int64_t>(top_k) + window + (growing ? grow.room : 0) ||
        (growing && (!iq || !kmean || iq_stride < static_cast<int64_t>(s.n_kv_head) * s.head_dim ||
                     (reinterpret_cast<uintptr_t>(kmean) % 4) != 0 || !workspace ||
                     workspace_bytes < msa_extend_workspace_bytes(s, grow.room) ||
                     (remap.on() && (!remap.iq_far || !remap.valid(s.head_dim))))))
        return cudaErrorInvalidValue;
    const int64_t tasks = s.n_tasks();
    if (tasks > INT32_MAX) return cudaErrorInvalidValue;
    float* imp = nullptr;
    float* have = nullptr;
    int32_t* gidx = nullptr;
    float* gval = nullptr;
    const bool grows = growing && grow.room > 0;
    if (grows) {
        char* w = static_cast<char*>(workspace);
        imp = reinterpret_cast<float*>(w);
        have = reinterpret_cast<float*>(w + align256(tasks * s.n_kv_blocks() * 4));
        gidx = reinterpret_cast<int32_t*>(w + align256(tasks * s.n_kv_blocks() * 4) + align256(tasks * 4));
        gval = reinterpret_cast<float*>(reinterpret_cast<char*>(gidx) + align256(tasks * grow.room * 4));
        const dim3 grid(static_cast<unsigned>(tasks));
        const bool rm = remap.on();
        if (s.head_dim == 64 && rm)
            estimate_kernel<64, true><<<grid, kThreads, 0, stream>>>(s, iq, iq_stride, kmean, sel, top_k, window,
                                                                     grow.scale, imp, have, remap);
        else if (s.head_dim == 64)
            estimate_kernel<64, false><<<grid, kThreads, 0, stream>>>(s, iq, iq_stride, kmean, sel, top_k, window,
                                                                      grow.scale, imp, have, remap);
        else if (rm)
            estimate_kernel<128, true><<<grid, kThreads, 0, stream>>>(s, iq, iq_stride, kmean, sel, top_k, window,
                                                                      grow.scale, imp, have, remap);
        else
            estimate_kernel<128, false><<<grid, kThreads, 0, stream>>>(s, iq, iq_stride, kmean, sel, top_k, window,
                                                                       grow.scale, imp, have, remap);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = topk_rows(imp, tasks, s.n_kv_blocks(), grow.room, /*by_index=*/false, gidx, gval, stream);
        if (e != cudaSuccess) return e;
    }
    MsaGrowth g = grow;
    if (!grows) g.mass = 0.0f;
    const size_t smem = (static_cast<size_t>(top_k) + static_cast<size_t>(window) + static_cast<size_t>(g.room)) * 4;
    compose_kernel<<<static_cast<unsigned>(tasks), kThreads, smem, stream>>>(s, sel, top_k, window, g, gidx, gval, have,
                                                                             out, out_k);
    return cudaGetLastError();
}

}  // namespace sl::cuda
