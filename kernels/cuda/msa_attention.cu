// MSA's sparse branch: exact attention over the selected KV blocks, flash-style on tensor cores.
//
// One CTA = NW warps = NW * 16 query rows of one (query block, group) task; a task's rows are
// (head of the group, query of the block) pairs, row r -> head g*G + r / nq, query r % nq, all of
// which share the task's selection. The CTA walks its selected blocks (KV-outer over the selection,
// 64 keys per step staged in shared memory and used by all its rows), keeping per row the running
// max m, sum l and the unnormalized P·V in mma accumulators (online softmax, base-2 exponentials
// with log2(e) folded into the query scale). Prefill runs one split; decode splits the selection
// over blockIdx.z and a combine kernel merges the partial (m, l, O) rows.
// Position remapping (REMAP, msa.cuh MsaRemap): a block far from some of the CTA's queries is
// walked a second time with its keys rotated to k^ = R(-b*B) k in shared memory and the far rows'
// queries q^; each pass masks the rows the other one serves, so every (query, key) logit enters
// the online softmax once.
#include <cfloat>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/msa.cuh"

namespace sl::cuda {

namespace {

constexpr int kKeyTile = 64;

struct TaskRows {
    int64_t t_begin;  // first call-query index of the task's query block
    int nq;           // queries in the block
    int g;            // KV group
};

__device__ __forceinline__ TaskRows task_rows(const MsaShape& s, int64_t task) {
    TaskRows tr;
    tr.g = static_cast<int>(task % s.n_kv_head);
    const int64_t qb = s.first_qblock() + task / s.n_kv_head;
    const int64_t B = s.block_size;
    tr.t_begin = (qb * B > s.pos0 ? qb * B : s.pos0) - s.pos0;
    const int64_t t_end = ((qb + 1) * B < s.n_kv() ? (qb + 1) * B : s.n_kv()) - s.pos0;
    tr.nq = static_cast<int>(t_end - tr.t_begin);
    return tr;
}

template <int D, int NW, bool REMAP>
__global__ void __launch_bounds__(NW * 32)
    sparse_attention_kernel(MsaShape s, const float* q, float* out, float scale_log2, const int32_t* sel, int top_k,
                            PagedView kk, PagedView vv, float* part_o, float* part_ml, int64_t max_rows,
                            MsaRemap remap) {
    constexpr int LD = D + 8;  // 16-byte-aligned rows; conflict-free 32-bit fragment loads
    constexpr int KC = D / 16, DT = D / 8, NT = kKeyTile / 8;
    __shared__ __align__(16) __nv_bfloat16 ks[kKeyTile * LD];
    __shared__ __align__(16) __nv_bfloat16 vs[kKeyTile * LD];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int64_t task = blockIdx.y;
    const TaskRows tr = task_rows(s, task);
    const int G = s.n_head / s.n_kv_head;
    const int rows_task = tr.nq * G;
    const int row0 = static_cast<int>(blockIdx.x) * NW * 16;
    if (row0 >= rows_task) return;  // uniform over the CTA

    // This split's share of the selection.
    const int32_t* my_sel = sel + task * top_k;
    int count = 0;
    while (count < top_k && my_sel[count] >= 0) ++count;
    const int n_splits = static_cast<int>(gridDim.z);
    const int per = (count + n_splits - 1) / n_splits;
    const int s_begin = static_cast<int>(blockIdx.z) * per;
    const int s_end = s_begin + per < count ? s_begin + per : count;

    // The thread's two rows (gid and gid + 8 of the warp's tile).
    int r[2], head[2];
    int64_t t[2], qpos[2];
    bool valid[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        r[h] = row0 + warp * 16 + gid + 8 * h;
        valid[h] = r[h] < rows_task;
        const int rr = valid[h] ? r[h] : 0;
        head[h] = tr.g * G + rr / tr.nq;
        t[h] = tr.t_begin + rr % tr.nq;
        qpos[h] = valid[h] ? s.pos0 + t[h] : -1;  // -1: every key masked, nothing stored
    }
    // The A fragments of the thread's two rows of `src` (q, or q^ with REMAP), scaled.
    auto load_rows = [&](const float* src, uint32_t (&frag)[KC][4]) {
        const float* q0 = src + (t[0] * s.n_head + head[0]) * D + 2 * tig;
        const float* q1 = src + (t[1] * s.n_head + head[1]) * D + 2 * tig;
#pragma unroll
        for (int kc = 0; kc < KC; ++kc) {
            float2 a = valid[0] ? *reinterpret_cast<const float2*>(q0 + kc * 16) : make_float2(0.f, 0.f);
            float2 b = valid[1] ? *reinterpret_cast<const float2*>(q1 + kc * 16) : make_float2(0.f, 0.f);
            float2 c = valid[0] ? *reinterpret_cast<const float2*>(q0 + kc * 16 + 8) : make_float2(0.f, 0.f);
            float2 d = valid[1] ? *reinterpret_cast<const float2*>(q1 + kc * 16 + 8) : make_float2(0.f, 0.f);
            frag[kc][0] = dev::pack_bf16(a.x * scale_log2, a.y * scale_log2);
            frag[kc][1] = dev::pack_bf16(b.x * scale_log2, b.y * scale_log2);
            frag[kc][2] = dev::pack_bf16(c.x * scale_log2, c.y * scale_log2);
            frag[kc][3] = dev::pack_bf16(d.x * scale_log2, d.y * scale_log2);
        }
    };
    uint32_t qa[KC][4];
    load_rows(q, qa);
    uint32_t qf[REMAP ? KC : 1][4];  // REMAP: the far rows' q^
    if constexpr (REMAP) load_rows(remap.q_far, qf);

    float o[DT][4];
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    const int64_t first_qpos = s.pos0 + tr.t_begin, last_qpos = s.pos0 + tr.t_begin + tr.nq - 1;
    const int64_t n_kv = s.n_kv();
    const int B = s.block_size;
    for (int si = s_begin; si < s_end; ++si) {
        const int64_t b = my_sel[si];
        const int32_t pk = kk.table[b], pv = vv.table[b];
        if (pk < 0 || pv < 0) continue;  // not resident (documented in msa.cuh); uniform
        const uint16_t* kbase = kk.base + static_cast<int64_t>(pk) * kk.block_stride + tr.g * kk.head_stride;
        const uint16_t* vbase = vv.base + static_cast<int64_t>(pv) * vv.block_stride + tr.g * vv.head_stride;
        // REMAP: rows at or past `thr` attend this block remapped (pass 1), the others as they are
        // (pass 0); without REMAP one pass.
        const int64_t thr = REMAP ? b * B + B - 1 + remap.window : INT64_MAX;
        const int pass_begin = first_qpos < thr ? 0 : 1, pass_end = REMAP && last_qpos >= thr ? 2 : 1;
        for (int pass = pass_begin; pass < pass_end; ++pass)
        for (int c = 0; c < B; c += kKeyTile) {
            const bool far = pass == 1;
            const int64_t kpos0 = b * B + c;
            if (kpos0 > last_qpos) break;  // uniform: no row of the task sees these keys
            __syncthreads();               // the previous tile is consumed
            constexpr int kLoads = kKeyTile * (D / 8) / (NW * 32);  // exact: 2..32 per thread
            static_assert(kKeyTile * (D / 8) % (NW * 32) == 0, "tile loads must split evenly");
#pragma unroll 4
            for (int li = 0; li < kLoads; ++li) {
                const int idx = threadIdx.x + li * NW * 32;
                const int j = idx / (D / 8), c8 = idx % (D / 8);
                uint4 kx = make_uint4(0, 0, 0, 0), vx = make_uint4(0, 0, 0, 0);
                if (kpos0 + j < n_kv) {  // unwritten slots may hold anything (NaN * 0 = NaN)
                    kx = *reinterpret_cast<const uint4*>(kbase + static_cast<int64_t>(c + j) * D + c8 * 8);
                    vx = *reinterpret_cast<const uint4*>(vbase + static_cast<int64_t>(c + j) * D + c8 * 8);
                }
                *reinterpret_cast<uint4*>(ks + j * LD + c8 * 8) = kx;
                *reinterpret_cast<uint4*>(vs + j * LD + c8 * 8) = vx;
            }
            __syncthreads();
            if constexpr (REMAP) {
                if (far) {  // uniform
                    dev::rotate_rows_bf16(ks, kKeyTile, LD, remap.rot_dim, remap.style,
                                          remap.rel + b * static_cast<int64_t>(remap.rot_dim));
                    __syncthreads();
                }
            }

            float sc[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
                const __nv_bfloat16* kr = ks + (nt * 8 + gid) * LD + 2 * tig;
#pragma unroll
                for (int kc = 0; kc < KC; ++kc) {
                    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr + kc * 16);
                    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + kc * 16 + 8);
                    if constexpr (REMAP) {
                        if (far) {
                            dev::mma_bf16_16816(sc[nt], qf[kc][0], qf[kc][1], qf[kc][2], qf[kc][3], b0, b1);
                            continue;
                        }
                    }
                    dev::mma_bf16_16816(sc[nt], qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b0, b1);
                }
            }
            // Causal mask (also hides keys >= n_kv, which lie past every query), REMAP's pass mask
            // (a row is served by the pass its distance to the block chooses), and row maxima.
            bool pass_masked[2] = {false, false};
            if constexpr (REMAP) {
#pragma unroll
                for (int h = 0; h < 2; ++h) pass_masked[h] = (qpos[h] >= thr) != far;
            }
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int64_t key = kpos0 + nt * 8 + 2 * tig + (e & 1);
                    if (key > qpos[e >> 1] || pass_masked[e >> 1]) sc[nt][e] = -INFINITY;
                    mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
                }
            }
            float base[2], alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(dev::kFullMask, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(dev::kFullMask, mx[h], 2));
                const float m_new = fmaxf(m[h], mx[h]);
                base[h] = m_new == -INFINITY ? 0.0f : m_new;  // all masked so far: p = 0, keep o
                alpha[h] = m_new == -INFINITY ? 1.0f : exp2f(m[h] - m_new);
                m[h] = m_new;
            }
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    sc[nt][e] = exp2f(sc[nt][e] - base[e >> 1]);
                    rs[e >> 1] += sc[nt][e];
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + rs[h];
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                o[dt][0] *= alpha[0];
                o[dt][1] *= alpha[0];
                o[dt][2] *= alpha[1];
                o[dt][3] *= alpha[1];
            }
            // O += P V: the S accumulators of key tiles 2kk, 2kk+1 are the A fragment of P.
#pragma unroll
            for (int kt = 0; kt < kKeyTile / 16; ++kt) {
                const uint32_t a0 = dev::pack_bf16(sc[2 * kt][0], sc[2 * kt][1]);
                const uint32_t a1 = dev::pack_bf16(sc[2 * kt][2], sc[2 * kt][3]);
                const uint32_t a2 = dev::pack_bf16(sc[2 * kt + 1][0], sc[2 * kt + 1][1]);
                const uint32_t a3 = dev::pack_bf16(sc[2 * kt + 1][2], sc[2 * kt + 1][3]);
                const __nv_bfloat16* vrow = vs + (kt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
                for (int dp = 0; dp < D / 16; ++dp) {
                    uint32_t b0, b1, b2, b3;
                    dev::ldmatrix_x4_trans(b0, b1, b2, b3, vrow + dp * 16);
                    dev::mma_bf16_16816(o[2 * dp], a0, a1, a2, a3, b0, b1);
                    dev::mma_bf16_16816(o[2 * dp + 1], a0, a1, a2, a3, b2, b3);
                }
            }
        }
    }

#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(dev::kFullMask, l[h], 1);
        l[h] += __shfl_xor_sync(dev::kFullMask, l[h], 2);
    }
    if (gridDim.z == 1) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!valid[h]) continue;
            const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
            float* dst = out + (t[h] * s.n_head + head[h]) * D + 2 * tig;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<float2*>(dst + dt * 8) = make_float2(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
        }
    } else {
        const int64_t n_tasks = gridDim.y;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (!valid[h]) continue;
            const int64_t pr = (static_cast<int64_t>(blockIdx.z) * n_tasks + task) * max_rows + r[h];
            float* dst = part_o + pr * D + 2 * tig;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt)
                *reinterpret_cast<float2*>(dst + dt * 8) = make_float2(o[dt][2 * h], o[dt][2 * h + 1]);
            if (tig == 0) {
                part_ml[2 * pr] = m[h];
                part_ml[2 * pr + 1] = l[h];
            }
        }
    }
}

// One warp per (task, row): merges the n_splits partials (base-2 maxima) and writes the output row.
__global__ void combine_kernel(MsaShape s, float* out, const float* part_o, const float* part_ml, int n_splits,
                               int64_t max_rows) {
    const int lane = threadIdx.x & 31;
    const int64_t n_tasks = s.n_tasks();
    const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    if (item >= n_tasks * max_rows) return;  // whole warps
    const int64_t task = item / max_rows;
    const int r = static_cast<int>(item % max_rows);
    const TaskRows tr = task_rows(s, task);
    const int G = s.n_head / s.n_kv_head;
    if (r >= tr.nq * G) return;
    const int head = tr.g * G + r / tr.nq;
    const int64_t t = tr.t_begin + r % tr.nq;
    const int D = s.head_dim;
    float M = -INFINITY;
    for (int z = 0; z < n_splits; ++z) M = fmaxf(M, part_ml[2 * ((z * n_tasks + task) * max_rows + r)]);
    float L = 0.0f;
    for (int z = 0; z < n_splits; ++z) {
        const int64_t pr = (z * n_tasks + task) * max_rows + r;
        if (part_ml[2 * pr] != -INFINITY) L += part_ml[2 * pr + 1] * exp2f(part_ml[2 * pr] - M);
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int i = lane; i < D; i += 32) {
        float acc = 0.0f;
        for (int z = 0; z < n_splits; ++z) {
            const int64_t pr = (z * n_tasks + task) * max_rows + r;
            const float mz = part_ml[2 * pr];
            if (mz != -INFINITY) acc += part_o[pr * D + i] * exp2f(mz - M);
        }
        out[(t * s.n_head + head) * D + i] = acc * inv;
    }
}

int64_t max_rows_of(const MsaShape& s) {
    const int64_t nq = s.n_q < s.block_size ? s.n_q : s.block_size;
    return nq * (s.n_head / s.n_kv_head);
}

bool view_ok(const PagedView& v, const MsaShape& s) {
    return v.base && v.table && v.head_dim == s.head_dim && v.block_size == s.block_size && v.block_stride % 8 == 0 &&
           v.head_stride % 8 == 0 && v.head_stride >= 0 && (reinterpret_cast<uintptr_t>(v.base) % 16) == 0;
}

template <int D, int NW>
cudaError_t launch_sparse(const MsaShape& s, const float* q, float* out, float scale_log2, const int32_t* sel,
                          int top_k, const PagedView& k, const PagedView& v, int n_splits, float* ws,
                          cudaStream_t stream, const MsaRemap& remap) {
    const int64_t max_rows = max_rows_of(s);
    const int64_t gx = (max_rows + NW * 16 - 1) / (NW * 16);
    const int64_t gy = s.n_tasks();
    if (gx > INT32_MAX || gy > 65535 || n_splits > 65535) return cudaErrorInvalidValue;
    float* part_o = ws;
    float* part_ml = ws ? ws + static_cast<int64_t>(n_splits) * gy * max_rows * D : nullptr;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), n_splits);
    if (remap.on())
        sparse_attention_kernel<D, NW, true>
            <<<grid, NW * 32, 0, stream>>>(s, q, out, scale_log2, sel, top_k, k, v, part_o, part_ml, max_rows, remap);
    else
        sparse_attention_kernel<D, NW, false>
            <<<grid, NW * 32, 0, stream>>>(s, q, out, scale_log2, sel, top_k, k, v, part_o, part_ml, max_rows, remap);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || n_splits == 1) return e;
    const int64_t warps = gy * max_rows;
    const int64_t blocks = (warps * 32 + 127) / 128;
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    combine_kernel<<<static_cast<unsigned>(blocks), 128, 0, stream>>>(s, out, part_o, part_ml, n_splits, max_rows);
    return cudaGetLastError();
}

}  // namespace

int64_t msa_workspace_floats(const MsaShape& s, int n_splits) {
    if (n_splits <= 1 || s.n_q <= 0 || s.n_kv_head <= 0 || s.block_size <= 0) return 0;
    return static_cast<int64_t>(n_splits) * s.n_tasks() * max_rows_of(s) * (s.head_dim + 2);
}

cudaError_t msa_sparse_attention(const MsaShape& s, const float* q, float* out, float scale, const int32_t* sel,
                                 int top_k, const PagedView& k, const PagedView& v, int n_splits, float* workspace,
                                 int64_t workspace_floats, cudaStream_t stream, const MsaRemap& remap) {
    if (remap.on() && (!remap.q_far || !remap.valid(s.head_dim) || (reinterpret_cast<uintptr_t>(remap.q_far) % 8) != 0))
        return cudaErrorInvalidValue;
    if (!q || !out || !sel || s.pos0 < 0 || s.n_q <= 0 || s.n_kv_head <= 0 || s.n_head % s.n_kv_head != 0 ||
        (s.block_size != 64 && s.block_size != 128) || (s.head_dim != 64 && s.head_dim != 128) || top_k < 1 ||
        n_splits < 1 || !view_ok(k, s) || !view_ok(v, s) ||
        (reinterpret_cast<uintptr_t>(q) % 8) != 0 || (reinterpret_cast<uintptr_t>(out) % 8) != 0)
        return cudaErrorInvalidValue;
    if (n_splits > 1 && (!workspace || workspace_floats < msa_workspace_floats(s, n_splits)))
        return cudaErrorInvalidValue;
    const float scale_log2 = scale * 1.4426950408889634f;
    // Four warps per CTA also in decode, where a task has 16 rows or fewer and three warps only pad:
    // they stage the key and value tiles with the first (one warp staging alone made a 16-block
    // decode step take 39 us on an H200).
    if (s.head_dim == 128)
        return launch_sparse<128, 4>(s, q, out, scale_log2, sel, top_k, k, v, n_splits, workspace, stream, remap);
    return launch_sparse<64, 4>(s, q, out, scale_log2, sel, top_k, k, v, n_splits, workspace, stream, remap);
}

}  // namespace sl::cuda
