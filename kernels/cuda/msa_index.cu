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

// How a CTA's warps share a query block's score tiles: R row tiles of 16 rows hold its queries
// (rows past them would only repeat the first query), and the 8 warps split into S = 8 / R slices,
// warp w taking row tile w % R and the column tiles nt = w / R, + S, ... (decode: one row tile, so
// all 8 warps share the columns rather than one warp doing them all). Warps w >= R * S sit out.
struct WarpRows {
    int R, S, row_tile, slice;
    bool active;
};

__device__ __forceinline__ WarpRows warp_rows(int nq, int B) {
    WarpRows w;
    const int rows = nq < B ? nq : B;
    w.R = (rows + 15) / 16;
    w.S = kIndexWarps / w.R;
    const int warp = threadIdx.x >> 5;
    w.row_tile = warp % w.R;
    w.slice = warp / w.R;
    w.active = warp < w.R * w.S;
    return w;
}

// The query positions of this thread's two fragment rows (gid and gid + 8 of the warp's row tile;
// rows past the block's nq queries repeat its first query) — REMAP's far / near test per row.
__device__ __forceinline__ void fragment_row_positions(const WarpRows& wr, int nq, int64_t first_qpos,
                                                       int64_t (&qpos)[2]) {
    const int gid = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int rr = wr.row_tile * 16 + gid + 8 * h;
        qpos[h] = first_qpos + (rr < nq ? rr : 0);
    }
}

// REMAP's rows: after stage_query_rows has loaded the near rows' fragments qa, the far rows'
// (remap.iq_far) into qf, and the query positions of this thread's fragment rows.
template <int D, int B>
__device__ void stage_far_rows(__nv_bfloat16* tile, const MsaRemap& remap, int64_t iq_stride, int g, int64_t t_begin,
                               int nq, const WarpRows& wr, int64_t first_qpos, uint32_t (&qf)[D / 16][4],
                               int64_t (&qpos)[2]);

// Stages a query block's index rows (task group g, call rows [t_begin, t_begin + nq)) as bf16 in
// `tile` (its first wr.R * 16 rows, pitch D + 8; rows past nq repeat the first query, which leaves
// every max unchanged) and loads this warp's A fragments (row tile wr.row_tile). Ends with the tile
// still holding the rows (callers sync before reusing it).
template <int D, int B>
__device__ void stage_query_rows(__nv_bfloat16* tile, const float* iq, int64_t iq_stride, int g, int64_t t_begin,
                                 int nq, const WarpRows& wr, uint32_t (&qa)[D / 16][4]) {
    constexpr int LD = D + 8;
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    for (int idx = threadIdx.x; idx < wr.R * 16 * D; idx += blockDim.x) {
        const int r = idx / D, i = idx % D;
        const int64_t t = t_begin + (r < nq ? r : 0);
        tile[r * LD + i] = __float2bfloat16_rn(iq[t * iq_stride + static_cast<int64_t>(g) * D + i]);
    }
    __syncthreads();
    if (wr.active) {
        const __nv_bfloat16* r0 = tile + (wr.row_tile * 16 + gid) * LD + 2 * tig;
        const __nv_bfloat16* r8 = r0 + 8 * LD;
#pragma unroll
        for (int kc = 0; kc < D / 16; ++kc) {
            qa[kc][0] = *reinterpret_cast<const uint32_t*>(r0 + kc * 16);
            qa[kc][1] = *reinterpret_cast<const uint32_t*>(r8 + kc * 16);
            qa[kc][2] = *reinterpret_cast<const uint32_t*>(r0 + kc * 16 + 8);
            qa[kc][3] = *reinterpret_cast<const uint32_t*>(r8 + kc * 16 + 8);
        }
    }
}

template <int D, int B>
__device__ void stage_far_rows(__nv_bfloat16* tile, const MsaRemap& remap, int64_t iq_stride, int g, int64_t t_begin,
                               int nq, const WarpRows& wr, int64_t first_qpos, uint32_t (&qf)[D / 16][4],
                               int64_t (&qpos)[2]) {
    __syncthreads();  // every warp holds its fragments of the near rows
    stage_query_rows<D, B>(tile, remap.iq_far, iq_stride, g, t_begin, nq, wr, qf);
    fragment_row_positions(wr, nq, first_qpos, qpos);
}

// acc = this warp's 16 x 8 score tile: its query rows (A fragments qa) against the 8 rows nt*8 ..
// nt*8 + 7 of a staged bf16 tile (pitch D + 8). acc[0], acc[1]: row gid, columns 2*tig and +1;
// acc[2], acc[3]: row gid + 8.
template <int D>
__device__ __forceinline__ void score_8keys(float (&acc)[4], const uint32_t (&qa)[D / 16][4],
                                            const __nv_bfloat16* tile, int nt) {
    constexpr int LD = D + 8;
    const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const __nv_bfloat16* kr = tile + (nt * 8 + gid) * LD + 2 * tig;
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr + kc * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + kc * 16 + 8);
        dev::mma_bf16_16816(acc, qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b0, b1);
    }
}

// Scores entries [blockIdx.x * per_cta, +per_cta) for task blockIdx.y: KV block j, or with `cand`
// the block cand[task * n_cand + j] (-1: padding, scores -inf). The query
// block's rows (B of them; rows past the block's queries repeat its first query, which leaves every
// max unchanged) live as bf16 A fragments in registers, one 16-row tile per warp; each KV block's
// keys are staged in shared memory and every warp takes the max of its 16 x B score tile (warps whose
// tile holds no query of the block sit out the products).
// REMAP (msa.cuh MsaRemap): a block far from some of the rows is scored a second time, its keys
// rotated to k^ = R(-b*B) k in the tile and the far rows' q^ (iq_far) as the A fragments; each
// pass masks the rows the other serves.
template <int D, int B, bool REMAP>
__global__ void __launch_bounds__(kIndexThreads) index_scores_kernel(MsaShape s, const float* iq, int64_t iq_stride,
                                                                     PagedView keys, MsaForce force, const int32_t* cand,
                                                                     int n_cand, int per_cta, float* scores,
                                                                     MsaRemap remap) {
    constexpr int LD = D + 8;  // bf16 row pitch of the staging tile: conflict-free fragment loads
    constexpr int KC = D / 16;
    __shared__ __align__(16) __nv_bfloat16 tile[B * LD];
    __shared__ float red[kIndexWarps];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t task = blockIdx.y;
    const int g = static_cast<int>(task % s.n_kv_head);
    const int64_t qb = s.first_qblock() + task / s.n_kv_head;
    const int64_t t_begin = (qb * B > s.pos0 ? qb * B : s.pos0) - s.pos0;
    const int64_t t_end = ((qb + 1) * B < s.n_kv() ? (qb + 1) * B : s.n_kv()) - s.pos0;
    const int nq = static_cast<int>(t_end - t_begin);
    const int64_t n_out = cand ? n_cand : s.n_kv_blocks();
    const int64_t j_begin = static_cast<int64_t>(blockIdx.x) * per_cta;
    const int64_t j_end = j_begin + per_cta < n_out ? j_begin + per_cta : n_out;
    float* out = scores + task * n_out;
    const int32_t* task_cand = cand ? cand + task * n_cand : nullptr;
    auto block_of = [&](int64_t j) -> int64_t { return task_cand ? task_cand[j] : j; };
    const int64_t cand_end = force.window_begin(qb);  // the window's blocks [cand_end, qb) are left out
    const bool sink = force.sink_forced(qb);
    auto scored = [&](int64_t b) { return b >= 0 && b < cand_end && !(sink && b == 0); };

    // Forced, invisible, window and padding entries need no keys.
    bool any_scored = false;
    for (int64_t j = j_begin; j < j_end; ++j) {
        const int64_t b = block_of(j);
        if (scored(b)) any_scored = true;
        else if (threadIdx.x == 0) out[j] = b == qb ? INFINITY : (sink && b == 0) ? FLT_MAX : -INFINITY;
    }
    if (!any_scored) return;  // uniform over the CTA

    uint32_t qa[KC][4];
    const WarpRows wr = warp_rows(nq, B);
    stage_query_rows<D, B>(tile, iq, iq_stride, g, t_begin, nq, wr, qa);
    uint32_t qf[REMAP ? KC : 1][4];
    const int64_t first_qpos = s.pos0 + t_begin, last_qpos = first_qpos + nq - 1;
    int64_t qpos[2] = {0, 0};
    if constexpr (REMAP) stage_far_rows<D, B>(tile, remap, iq_stride, g, t_begin, nq, wr, first_qpos, qf, qpos);

    const uint16_t* head_base = keys.base + static_cast<int64_t>(g) * keys.head_stride;
    for (int64_t j = j_begin; j < j_end; ++j) {
        const int64_t b = block_of(j);
        if (!scored(b)) continue;  // written above; uniform
        const int32_t phys = keys.table[b];
        if (phys < 0) {  // not resident: never selected (documented in msa.cuh)
            if (threadIdx.x == 0) out[j] = -INFINITY;
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
        const int64_t thr = REMAP ? b * B + B - 1 + remap.window : INT64_MAX;  // far rows: qpos >= thr
        auto pass_max = [&](const uint32_t (&frag)[KC][4], bool far) {
            if (!wr.active) return;
            // REMAP: rows this pass does not serve are left out (-inf).
            const bool skip0 = REMAP && (qpos[0] >= thr) != far, skip1 = REMAP && (qpos[1] >= thr) != far;
#pragma unroll 2
            for (int nt = wr.slice; nt < B / 8; nt += wr.S) {
                float acc[4];
                score_8keys<D>(acc, frag, tile, nt);
                if (!skip0) mx = fmaxf(mx, fmaxf(acc[0], acc[1]));
                if (!skip1) mx = fmaxf(mx, fmaxf(acc[2], acc[3]));
            }
        };
        if (first_qpos < thr) pass_max(qa, false);
        if constexpr (REMAP) {
            if (last_qpos >= thr) {  // uniform
                __syncthreads();     // the near pass is done with the tile
                dev::rotate_rows_bf16(tile, B, LD, remap.rot_dim, remap.style,
                                      remap.rel + b * static_cast<int64_t>(remap.rot_dim));
                __syncthreads();
                pass_max(qf, true);
            }
        }
        mx = dev::warp_max(mx);
        if (lane == 0) red[warp] = mx;
        __syncthreads();
        if (threadIdx.x == 0) {
            float m = red[0];
            for (int w = 1; w < kIndexWarps; ++w) m = fmaxf(m, red[w]);
            out[j] = m;
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

// kmean of block b0 + blockIdx.x, head blockIdx.y, 256 threads: thread t sums dim t % D over the
// tokens t / D, + 256 / D, ... of the block (coalesced across the threads of each key row; each
// thread's loads independent, so they overlap), f32; the partial sums meet in shared memory and
// the mean is rounded to bf16.
constexpr int kMeanThreads = 256;
__global__ void __launch_bounds__(kMeanThreads) key_means_kernel(PagedView keys, int n_kv_head, int64_t b0,
                                                                 int64_t n_kv, uint16_t* kmean) {
    __shared__ float part[kMeanThreads];
    const int64_t b = b0 + blockIdx.x;
    const int h = static_cast<int>(blockIdx.y), D = keys.head_dim, B = keys.block_size;
    const int32_t phys = keys.table[b];
    const int n = static_cast<int>(n_kv - b * B < B ? n_kv - b * B : B);
    if (phys < 0 || n <= 0) return;  // uniform
    const __nv_bfloat16* src = reinterpret_cast<const __nv_bfloat16*>(keys.base) +
                               static_cast<int64_t>(phys) * keys.block_stride +
                               static_cast<int64_t>(h) * keys.head_stride;
    const int per = kMeanThreads / D, i = threadIdx.x % D;
    float acc = 0.0f;
#pragma unroll 8
    for (int t = threadIdx.x / D; t < n; t += per) acc += __bfloat162float(src[t * D + i]);
    part[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x < D) {
        float sum = 0.0f;
        for (int p = 0; p < per; ++p) sum += part[p * D + i];
        reinterpret_cast<__nv_bfloat16*>(kmean)[(b * n_kv_head + h) * D + i] = __float2bfloat16_rn(sum / static_cast<float>(n));
    }
}

constexpr int kMeanTile = 128;  // mean keys per staged tile of mean_scores_kernel

// Estimates of blocks [blockIdx.x * tiles * kMeanTile, +tiles * kMeanTile) for task blockIdx.y:
// the query block's rows as A fragments (stage_query_rows), each tile of 128 mean keys staged in
// shared memory; every warp takes the column maxima of its 16-row score tile over its columns
// (WarpRows), and the maxima of a column's R row tiles meet in shared memory. Blocks at or after the local one, and the sink, need no products.
// REMAP: columns far from some rows take a second pass, the tile's mean keys rotated each by its
// block's angles and the far rows' fragments, max-combined into the column maxima.
template <int D, int B, bool REMAP>
__global__ void __launch_bounds__(kIndexThreads) mean_scores_kernel(MsaShape s, const float* iq, int64_t iq_stride,
                                                                    const uint16_t* kmean, MsaForce force, int tiles,
                                                                    float* est, MsaRemap remap) {
    constexpr int LD = D + 8;
    constexpr int KC = D / 16;
    static_assert(B <= kMeanTile, "the query rows are staged in the mean-key tile");
    __shared__ __align__(16) __nv_bfloat16 tile[kMeanTile * LD];
    __shared__ float colmax[kIndexWarps][kMeanTile];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    const int64_t task = blockIdx.y;
    const int g = static_cast<int>(task % s.n_kv_head);
    const int64_t qb = s.first_qblock() + task / s.n_kv_head;
    const int64_t t_begin = (qb * B > s.pos0 ? qb * B : s.pos0) - s.pos0;
    const int64_t t_end = ((qb + 1) * B < s.n_kv() ? (qb + 1) * B : s.n_kv()) - s.pos0;
    const int64_t n_blocks = s.n_kv_blocks();
    const int64_t cand_end = force.window_begin(qb);  // the window's blocks [cand_end, qb) are left out
    const bool sink = force.sink_forced(qb);
    float* out = est + task * n_blocks;

    uint32_t qa[KC][4];
    const int nq = static_cast<int>(t_end - t_begin);
    const WarpRows wr = warp_rows(nq, B);
    stage_query_rows<D, B>(tile, iq, iq_stride, g, t_begin, nq, wr, qa);
    uint32_t qf[REMAP ? KC : 1][4];
    const int64_t first_qpos = s.pos0 + t_begin, last_qpos = first_qpos + nq - 1;
    int64_t qpos[2] = {0, 0};
    if constexpr (REMAP) stage_far_rows<D, B>(tile, remap, iq_stride, g, t_begin, nq, wr, first_qpos, qf, qpos);
    const int64_t first = static_cast<int64_t>(blockIdx.x) * tiles * kMeanTile;
    for (int ti = 0; ti < tiles; ++ti) {
        const int64_t c0 = first + static_cast<int64_t>(ti) * kMeanTile;
        if (c0 >= n_blocks) break;  // uniform
        const int64_t c_end = c0 + kMeanTile < n_blocks ? c0 + kMeanTile : n_blocks;
        const int64_t vis_end = c_end < cand_end ? c_end : cand_end;  // blocks scored: [c0, vis_end), the sink aside
        if (c0 < vis_end) {  // uniform
            __syncthreads();  // the query rows (first tile) or the previous tile and colmax are consumed
            for (int idx = threadIdx.x; idx < kMeanTile * (D / 8); idx += kIndexThreads) {
                const int r = idx / (D / 8), c8 = idx % (D / 8);
                uint4 val = make_uint4(0, 0, 0, 0);
                if (c0 + r < vis_end)
                    val = *reinterpret_cast<const uint4*>(kmean + ((c0 + r) * s.n_kv_head + g) * D + c8 * 8);
                *reinterpret_cast<uint4*>(tile + r * LD + c8 * 8) = val;
            }
            __syncthreads();
            // One pass over the tile's columns: near (far = false) or REMAP's far pass; `combine`:
            // max into what the near pass wrote (the same lanes own the same columns).
            auto pass = [&](const uint32_t (&frag)[KC][4], bool far, bool combine) {
                for (int nt = wr.slice; wr.active && nt < kMeanTile / 8; nt += wr.S) {  // warp-uniform
                    float acc[4];
                    score_8keys<D>(acc, frag, tile, nt);
                    if constexpr (REMAP) {  // rows this pass does not serve are left out
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int64_t b = c0 + nt * 8 + 2 * tig + (e & 1);
                            if (remap.far(qpos[e >> 1], b, B) != far) acc[e] = -INFINITY;
                        }
                    }
                    float m0 = fmaxf(acc[0], acc[2]), m1 = fmaxf(acc[1], acc[3]);  // columns nt*8 + 2*tig, +1
#pragma unroll
                    for (int o = 4; o < 32; o <<= 1) {  // across the 8 row groups
                        m0 = fmaxf(m0, __shfl_xor_sync(dev::kFullMask, m0, o));
                        m1 = fmaxf(m1, __shfl_xor_sync(dev::kFullMask, m1, o));
                    }
                    if (gid == 0) {
                        float* cm = &colmax[warp][nt * 8 + 2 * tig];
                        cm[0] = combine ? fmaxf(cm[0], m0) : m0;
                        cm[1] = combine ? fmaxf(cm[1], m1) : m1;
                    }
                }
            };
            // REMAP: the tile's first column is its farthest, its last scored one its nearest.
            const bool any_near = !REMAP || !remap.far(first_qpos, vis_end - 1, B);
            const bool any_far = REMAP && remap.far(last_qpos, c0, B);
            if (any_near) pass(qa, false, false);
            if constexpr (REMAP) {
                if (any_far) {  // uniform
                    __syncthreads();  // the near pass is done with the tile
                    const int half = remap.rot_dim / 2;
                    for (int idx = threadIdx.x; idx < (vis_end - c0) * half; idx += kIndexThreads) {
                        const int r = idx / half, i = idx % half;
                        const int2 dd = dev::rope_pair(i, remap.rot_dim, remap.style);
                        const float* cs = remap.rel + (c0 + r) * static_cast<int64_t>(remap.rot_dim) + 2 * i;
                        __nv_bfloat16* row = tile + r * LD;
                        float x0 = __bfloat162float(row[dd.x]), x1 = __bfloat162float(row[dd.y]);
                        dev::rotate2(x0, x1, cs[0], cs[1]);
                        row[dd.x] = __float2bfloat16_rn(x0);
                        row[dd.y] = __float2bfloat16_rn(x1);
                    }
                    __syncthreads();
                    pass(qf, true, any_near);
                }
            }
            __syncthreads();
        }
        for (int64_t r = threadIdx.x; r < c_end - c0; r += kIndexThreads) {
            const int64_t b = c0 + r;
            float v;
            if (b == qb) v = INFINITY;
            else if (sink && b == 0) v = FLT_MAX;
            else if (b >= cand_end) v = -INFINITY;  // the window, or invisible
            else {  // the R warps of column tile r / 8's slice
                const int w0 = static_cast<int>((r / 8) % wr.S) * wr.R;
                v = colmax[w0][r];
                for (int w = 1; w < wr.R; ++w) v = fmaxf(v, colmax[w0 + w][r]);
            }
            out[b] = v;
        }
    }
}

// sel[task][i] = the candidate csel[task][i] names (-1 stays -1).
__global__ void gather_selection_kernel(const int32_t* cand, int n_cand, const int32_t* csel, int64_t rows, int top_k,
                                        int32_t* sel) {
    const int64_t total = rows * top_k;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int32_t j = csel[e];
        sel[e] = j >= 0 ? cand[(e / top_k) * n_cand + j] : -1;
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

// A view's n_heads heads of block_size rows fit in one physical block (rows of a head written
// past it would land in the next block, another layer's maybe: the pool is shared).
bool heads_fit(const PagedView& v, int n_heads) {
    return n_heads > 0 && static_cast<int64_t>(n_heads - 1) * v.head_stride +
                              static_cast<int64_t>(v.block_size) * v.head_dim <= v.block_stride;
}

bool shape_ok(const MsaShape& s) {
    return s.pos0 >= 0 && s.n_q > 0 && s.n_kv_head > 0 && s.n_head > 0 && s.n_head % s.n_kv_head == 0 &&
           (s.block_size == 64 || s.block_size == 128) && (s.head_dim == 64 || s.head_dim == 128);
}

// Multiprocessors of the current device (132 on an H200, where the launch heuristics below were
// measured); read once.
int sm_count() {
    static const int n = [] {
        int dev = 0, v = 0;
        return cudaGetDevice(&dev) == cudaSuccess &&
                       cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0
                   ? v
                   : 132;
    }();
    return n;
}

template <int D, int B>
cudaError_t launch_index(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys, MsaForce force,
                         const int32_t* cand, int n_cand, float* scores, cudaStream_t stream, const MsaRemap& remap) {
    // Up to kBlocksPerCta blocks per CTA (the query rows are staged once per CTA), fewer when that
    // would leave the GPU short of CTAs (decode: a few tasks), so blocks are scored side by side.
    const int64_t n_out = cand ? n_cand : s.n_kv_blocks();
    const int64_t gy = s.n_tasks();
    int64_t per_cta = n_out * gy / (4 * sm_count());
    per_cta = per_cta < 1 ? 1 : per_cta > kBlocksPerCta ? kBlocksPerCta : per_cta;
    const int64_t gx = (n_out + per_cta - 1) / per_cta;
    if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    if (remap.on())
        index_scores_kernel<D, B, true><<<grid, kIndexThreads, 0, stream>>>(
            s, iq, iq_stride, keys, force, cand, n_cand, static_cast<int>(per_cta), scores, remap);
    else
        index_scores_kernel<D, B, false><<<grid, kIndexThreads, 0, stream>>>(
            s, iq, iq_stride, keys, force, cand, n_cand, static_cast<int>(per_cta), scores, remap);
    return cudaGetLastError();
}

// Exact scores of either every block (cand null) or each task's candidates.
cudaError_t index_dispatch(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys, MsaForce force,
                           const int32_t* cand, int n_cand, float* scores, cudaStream_t stream, const MsaRemap& remap) {
    const bool d128 = keys.head_dim == 128, b128 = s.block_size == 128;
    if (d128 && b128) return launch_index<128, 128>(s, iq, iq_stride, keys, force, cand, n_cand, scores, stream, remap);
    if (d128) return launch_index<128, 64>(s, iq, iq_stride, keys, force, cand, n_cand, scores, stream, remap);
    if (b128) return launch_index<64, 128>(s, iq, iq_stride, keys, force, cand, n_cand, scores, stream, remap);
    return launch_index<64, 64>(s, iq, iq_stride, keys, force, cand, n_cand, scores, stream, remap);
}

template <int D, int B>
cudaError_t launch_mean_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const uint16_t* kmean,
                               MsaForce force, float* est, cudaStream_t stream, const MsaRemap& remap) {
    // Enough CTAs for two per SM, each taking up to 8 tiles (1,024 blocks), so the query rows are
    // staged once per CTA rather than once per tile.
    const int64_t n_tiles = (s.n_kv_blocks() + kMeanTile - 1) / kMeanTile;
    int64_t tiles = n_tiles * s.n_tasks() / (2 * sm_count());
    tiles = tiles < 1 ? 1 : tiles > 8 ? 8 : tiles;
    const int64_t gx = (n_tiles + tiles - 1) / tiles, gy = s.n_tasks();
    if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
    if (remap.on())
        mean_scores_kernel<D, B, true><<<grid, kIndexThreads, 0, stream>>>(s, iq, iq_stride, kmean, force,
                                                                          static_cast<int>(tiles), est, remap);
    else
        mean_scores_kernel<D, B, false><<<grid, kIndexThreads, 0, stream>>>(s, iq, iq_stride, kmean, force,
                                                                           static_cast<int>(tiles), est, remap);
    return cudaGetLastError();
}

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// A remap the index kernels take: off, or valid with its index rows.
bool remap_rows_ok(const MsaRemap& r, const MsaShape& s) { return !r.on() || (r.iq_far && r.valid(s.head_dim)); }

__global__ void remap_table_kernel(int64_t n_blocks, int block_size, int rot_dim, float base, float freq_scale,
                                   const float* freq_factors, float* rel) {
    const int half = rot_dim / 2;
    const int64_t total = n_blocks * half;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t b = e / half;
        const int i = static_cast<int>(e % half);
        double inv_freq = pow(static_cast<double>(base), -2.0 * i / rot_dim);  // as rope_kernel
        if (freq_factors) inv_freq /= static_cast<double>(freq_factors[i]);
        const double theta = static_cast<double>(-b * block_size) * static_cast<double>(freq_scale) * inv_freq;
        double sd, cd;
        sincos(theta, &sd, &cd);
        rel[2 * e] = static_cast<float>(cd);
        rel[2 * e + 1] = static_cast<float>(sd);
    }
}

}  // namespace

cudaError_t msa_remap_table(int64_t n_blocks, int block_size, int rot_dim, float base, float freq_scale,
                            const float* freq_factors, float* rel, cudaStream_t stream) {
    if (!rel || n_blocks < 0 || block_size <= 0 || rot_dim <= 0 || rot_dim % 2 != 0 || !(base > 0.0f))
        return cudaErrorInvalidValue;
    if (n_blocks == 0) return cudaSuccess;
    remap_table_kernel<<<elem_grid(n_blocks * (rot_dim / 2)), 256, 0, stream>>>(n_blocks, block_size, rot_dim, base,
                                                                               freq_scale, freq_factors, rel);
    return cudaGetLastError();
}

cudaError_t msa_group_mean(const float* q, const MsaShape& s, float* iq, cudaStream_t stream) {
    if (!q || !iq || !shape_ok(s)) return cudaErrorInvalidValue;
    const int64_t total = static_cast<int64_t>(s.n_q) * s.n_kv_head * s.head_dim;
    group_mean_kernel<<<elem_grid(total), 256, 0, stream>>>(q, s.n_q, s.n_head, s.n_kv_head, s.head_dim, iq);
    return cudaGetLastError();
}

cudaError_t msa_index_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys,
                             const MsaForce& force, float* scores, cudaStream_t stream, const MsaRemap& remap) {
    if (!iq || !scores || !shape_ok(s) || !view_ok(keys) || keys.block_size != s.block_size || force.window < 0 ||
        !remap_rows_ok(remap, s) || (remap.on() && keys.head_dim != s.head_dim) ||  // the rotation's rows are the keys'
        iq_stride < static_cast<int64_t>(s.n_kv_head) * keys.head_dim)
        return cudaErrorInvalidValue;
    return index_dispatch(s, iq, iq_stride, keys, force, nullptr, 0, scores, stream, remap);
}

cudaError_t msa_select(const float* scores, const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream) {
    if (!shape_ok(s)) return cudaErrorInvalidValue;
    return topk_rows(scores, s.n_tasks(), s.n_kv_blocks(), top_k, /*by_index=*/true, sel, nullptr, stream);
}

cudaError_t msa_key_means(const PagedView& keys, int n_kv_head, int64_t b0, int64_t b1, int64_t n_kv,
                          uint16_t* kmean, cudaStream_t stream) {
    if (!kmean || !view_ok(keys) || !heads_fit(keys, n_kv_head) || b0 < 0 || b1 < b0 || n_kv < 0 ||
        (b1 > b0 && (b1 - 1) * keys.block_size >= n_kv) || b1 - b0 > INT32_MAX || n_kv_head > 65535)
        return cudaErrorInvalidValue;
    if (b1 == b0) return cudaSuccess;
    key_means_kernel<<<dim3(static_cast<unsigned>(b1 - b0), static_cast<unsigned>(n_kv_head)), kMeanThreads, 0,
                       stream>>>(keys, n_kv_head, b0, n_kv, kmean);
    return cudaGetLastError();
}

cudaError_t msa_mean_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const uint16_t* kmean,
                            const MsaForce& force, float* est, cudaStream_t stream, const MsaRemap& remap) {
    if (!iq || !kmean || !est || !shape_ok(s) || iq_stride < static_cast<int64_t>(s.n_kv_head) * s.head_dim || force.window < 0 ||
        !remap_rows_ok(remap, s) ||
        (reinterpret_cast<uintptr_t>(kmean) % 16) != 0)
        return cudaErrorInvalidValue;
    const bool d128 = s.head_dim == 128, b128 = s.block_size == 128;
    if (d128 && b128) return launch_mean_scores<128, 128>(s, iq, iq_stride, kmean, force, est, stream, remap);
    if (d128) return launch_mean_scores<128, 64>(s, iq, iq_stride, kmean, force, est, stream, remap);
    if (b128) return launch_mean_scores<64, 128>(s, iq, iq_stride, kmean, force, est, stream, remap);
    return launch_mean_scores<64, 64>(s, iq, iq_stride, kmean, force, est, stream, remap);
}

// Workspace layout: shortlist int32 (n_tasks, n_cand) | chosen candidates int32 (n_tasks, top_k) |
// estimates f32 (n_tasks, n_kv_blocks) | candidate scores f32 (n_tasks, n_cand), each 256-aligned.
int64_t msa_hybrid_workspace_bytes(const MsaShape& s, int n_cand, int top_k) {
    const int64_t t = s.n_tasks();
    return align256(t * n_cand * 4) + align256(t * top_k * 4) + align256(t * s.n_kv_blocks() * 4) +
           align256(t * n_cand * 4);
}

cudaError_t msa_hybrid_select(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys,
                              const uint16_t* kmean, const MsaForce& force, int n_cand, int top_k, int32_t* sel,
                              void* workspace, int64_t workspace_bytes, cudaStream_t stream, const MsaRemap& remap) {
    if (!sel || !workspace || !iq || !shape_ok(s) || !view_ok(keys) || keys.block_size != s.block_size ||
        keys.head_dim != s.head_dim || top_k < 1 || n_cand < top_k || n_cand > kMaxTopK ||
        workspace_bytes < msa_hybrid_workspace_bytes(s, n_cand, top_k))
        return cudaErrorInvalidValue;
    const int64_t t = s.n_tasks();
    char* w = static_cast<char*>(workspace);
    int32_t* cand = reinterpret_cast<int32_t*>(w);
    int32_t* csel = reinterpret_cast<int32_t*>(w + align256(t * n_cand * 4));
    float* est = reinterpret_cast<float*>(w + align256(t * n_cand * 4) + align256(t * top_k * 4));
    float* cscores = est + align256(t * s.n_kv_blocks() * 4) / 4;
    cudaError_t e = msa_mean_scores(s, iq, iq_stride, kmean, force, est, stream, remap);
    if (e == cudaSuccess) e = topk_rows(est, t, s.n_kv_blocks(), n_cand, /*by_index=*/true, cand, nullptr, stream);
    if (e == cudaSuccess) e = index_dispatch(s, iq, iq_stride, keys, force, cand, n_cand, cscores, stream, remap);
    // The shortlist is ascending, so candidates chosen in index order are blocks in ascending order.
    if (e == cudaSuccess) e = topk_rows(cscores, t, n_cand, top_k, /*by_index=*/true, csel, nullptr, stream);
    if (e != cudaSuccess) return e;
    gather_selection_kernel<<<elem_grid(t * top_k), 256, 0, stream>>>(cand, n_cand, csel, t, top_k, sel);
    return cudaGetLastError();
}

cudaError_t msa_select_all(const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream) {
    if (!sel || !shape_ok(s) || top_k < s.n_kv_blocks()) return cudaErrorInvalidValue;
    select_all_kernel<<<elem_grid(s.n_tasks() * top_k), 256, 0, stream>>>(s, top_k, sel);
    return cudaGetLastError();
}

cudaError_t write_paged(const PagedView& dst, int n_heads, const float* rows, int64_t pos0, int64_t n,
                        cudaStream_t stream) {
    if (!rows || !view_ok(dst) || !heads_fit(dst, n_heads) || pos0 < 0 || n < 0 ||
        (n_heads > 1 && dst.head_stride < static_cast<int64_t>(dst.block_size) * dst.head_dim))
        return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    write_paged_kernel<<<elem_grid(n * n_heads * dst.head_dim), 256, 0, stream>>>(dst, n_heads, rows, pos0, n);
    return cudaGetLastError();
}

}  // namespace sl::cuda
