// MSA (MiniMax Sparse Attention) on the device: the index branch (a fused block-scoring kernel and
// a per-row top-k) and the sparse branch (exact softmax attention over the selected blocks), on a
// paged bf16 KV cache. Semantics follow core/attention/msa_attention.h and ../shared/MSA.md:
//
//   Queries of a call are positions [pos0, pos0 + n_q); keys are positions [0, pos0 + n_q), in
//   blocks of B tokens. Queries are grouped into query blocks aligned with the KV blocks
//   (qb covers positions [qb*B, (qb+1)*B) ∩ the call); one selection per (query block, KV group g),
//   shared by the group's n_head / n_kv_head query heads (head h belongs to group h / G).
//   (The CPU path also gives a call's last query a selection of its own, as a decode call of it
//   would make; these kernels do not: CudaLlamaRunner runs that query as a call of one after the
//   others, cuda_backend_model.h. It attends densely unless given an MsaConfig.)
//   Block score of KV block b for (qb, g) = max over the query block's index-query rows r and keys
//   j of block b of iq_r · ik_j (f32 accumulation of bf16 products). Blocks b < qb are entirely
//   visible to every query of qb, so the causal clamp is a block-level one: the local block b == qb
//   is forced (+inf), block 0 is forced when `sink` (FLT_MAX: the local block still ranks first),
//   blocks b > qb are invisible (-inf, never selected). top_k then keeps the k best ids ascending.
//   The sparse branch attends, for each query and head, to the tokens of its group's selected
//   blocks at or before its position (scale * q·k, softmax in f32, P·V with bf16 P).
//   Index queries: M3's index heads (one per group), or for dense-trained models the group mean of
//   the query heads (msa_group_mean, the CPU's IndexQuery::GroupMean): one row per query and group,
//   so the indexer costs n_kv_head rows per query, not n_head (the CPU's HeadMax default).
//
// Memory: every pointer is device memory; launches are asynchronous on `stream` and return
// cudaErrorInvalidValue (before launching) for shapes the kernels do not take.
// Supported: head_dim (attention and index) 64 or 128; block_size 64 or 128; G = n_head /
// n_kv_head integral. Paged-view strides must be multiples of 8 elements and the base 16-byte
// aligned (cudaMalloc memory is).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/msa_rules.h"  // SL_HOST_DEVICE, the growth rules shared with the CPU

namespace sl::cuda {

// A paged bf16 tensor: element (logical block b, head h, token t of the block, dim i) lives at
// base[table[b] * block_stride + h * head_stride + t * head_dim + i]. table[b] < 0: not resident.
// head_stride 0 shares one head among all groups (M3's index keys).
struct PagedView {
    const uint16_t* base = nullptr;  // bf16 bits
    const int32_t* table = nullptr;  // (n_blocks) physical block of each logical block
    int64_t block_stride = 0;        // elements per physical block
    int64_t head_stride = 0;         // elements between heads
    int block_size = 0;
    int head_dim = 0;
};

struct MsaShape {
    int64_t pos0 = 0;   // first query position
    int n_q = 0;        // queries in the call
    int n_head = 0;     // query heads
    int n_kv_head = 0;  // KV heads = KV groups = index heads
    int head_dim = 0;   // attention head dim
    int block_size = 0; // B

    SL_HOST_DEVICE int64_t n_kv() const { return pos0 + n_q; }
    SL_HOST_DEVICE int64_t n_kv_blocks() const { return (n_kv() + block_size - 1) / block_size; }
    SL_HOST_DEVICE int64_t first_qblock() const { return pos0 / block_size; }
    SL_HOST_DEVICE int64_t n_qblocks() const { return n_q > 0 ? (pos0 + n_q - 1) / block_size - first_qblock() + 1 : 0; }
    SL_HOST_DEVICE int64_t n_tasks() const { return n_qblocks() * n_kv_head; }  // (query block, group) pairs
};

// The blocks a selection always holds besides its top-k (the CPU's SelectParams::sink / window):
// the local block qb; the `window` blocks before it, [qb - min(window, qb), qb); and block 0 (the
// sink) when `sink` and it is not in the window. The index kernels rank the local block and the sink
// first (+inf, FLT_MAX) and leave the window's blocks out (-inf): msa_extend_selection adds them, so
// top_k counts the local block and the sink but not the window, as on the CPU. Converts from the
// former `bool sink` (no window).
struct MsaForce {
    bool sink = false;
    int window = 0;
    MsaForce(bool s = false, int w = 0) : sink(s), window(w) {}  // NOLINT: implicit from bool
    // First block of the window (= qb without one); the sink is forced only below it.
    SL_HOST_DEVICE int64_t window_begin(int64_t qb) const { return qb - (window < qb ? window : qb); }
    SL_HOST_DEVICE bool sink_forced(int64_t qb) const { return sink && window_begin(qb) > 0; }
};

// Position remapping (the CPU's PositionMode::Remap, core/attention/rope_shift.h), for models given
// more context than they were trained on: a query at position p attends a block b whose last token
// lies `window` or more before it (p >= b*B + B - 1 + window: far) as if the block began `window`
// positions before the query — logit q^ · k^ with q^ = R(window - p) q (per query: the caller
// rotates q and its index rows) and k^ = R(-b*B) k (per block: the kernels rotate the staged keys
// with `rel`). The index branch scores far blocks alike (a mean key rotated: the mean of the
// rotated keys), so it ranks blocks by the logits the sparse branch attends with. Nearer blocks
// keep q and k. window 0: off (every kernel as without it). The kernels that take one take it as
// their last argument (off by default): msa_index_scores, msa_mean_scores, msa_hybrid_select,
// msa_extend_selection (index rows iq_far), msa_sparse_attention, msa_token_mass (q_far); with it
// on they refuse (cudaErrorInvalidValue) a remap without the rows they read, rel, or with an odd
// rot_dim outside (0, head_dim].
struct MsaRemap {
    int64_t window = 0;             // W, tokens
    const float* q_far = nullptr;   // (n_q, n_head, head_dim) f32: R(W - p) q (sparse branch, token mass)
    const float* iq_far = nullptr;  // index rows of q_far (their group means), laid out as iq
    const float* rel = nullptr;     // (n_blocks, rot_dim / 2, 2) f32: cos, sin of -b * B * theta_i (msa_remap_table)
    int rot_dim = 0;                // dims [0, rot_dim) rotate in pairs
    int style = 0;                  // 0: adjacent pairs (2i, 2i+1); 1: NeoX halves (i, i + rot_dim / 2)
    SL_HOST_DEVICE bool on() const { return window > 0; }
    SL_HOST_DEVICE bool far(int64_t qpos, int64_t b, int B) const { return window > 0 && qpos >= b * B + B - 1 + window; }
    // Off, or with the block angles and a rotation the kernels take (the rows are checked by each).
    bool valid(int head_dim) const {
        return window <= 0 || (rel && rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim && (style == 0 || style == 1));
    }
};

// rel (n_blocks, rot_dim / 2, 2) <- cos, sin of -b * B * theta_i for blocks [0, n_blocks), theta_i as
// kernels::rope takes it (base^(-2i / rot_dim) * freq_scale / freq_factors[i]; freq_factors: device
// floats or null), angles in double.
cudaError_t msa_remap_table(int64_t n_blocks, int block_size, int rot_dim, float base, float freq_scale,
                            const float* freq_factors, float* rel, cudaStream_t stream);

// Training-free index queries: iq (n_q, n_kv_head, head_dim) = mean over each group's heads of
// q (n_q, n_head, head_dim). (IndexQuery::GroupMean of the CPU path.)
cudaError_t msa_group_mean(const float* q, const MsaShape& s, float* iq, cudaStream_t stream);

// scores (n_tasks, n_kv_blocks) f32, task = qb_rel * n_kv_head + g: the block scores above.
// iq row of call query t and group g at iq + t * iq_stride + g * keys.head_dim (f32). Keys of group
// g are head g of `keys` (head_stride 0: shared). Every key block b < qb must be resident
// (a non-resident one scores -inf and is never selected).
cudaError_t msa_index_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys,
                             const MsaForce& force, float* scores, cudaStream_t stream, const MsaRemap& remap = {});

// sel (n_tasks, top_k) int32: the selected block ids of each task, ascending, -1-padded at the end
// (1 <= top_k <= kMaxTopK, ops.cuh).
cudaError_t msa_select(const float* scores, const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream);

// ---- Hybrid index (the CPU's BlockScoring::Hybrid with group-mean index queries) ----
// msa_index_scores reads every key of the context: at 1M tokens that is half the bytes dense
// attention reads, so it cannot make decode cheap. The hybrid ranks blocks by their mean key first
// (one bf16 row per block and head: 1/B of the keys), keeps a shortlist of n_cand blocks, scores
// only those exactly (block-max, the same arithmetic as msa_index_scores), and keeps the top_k.
//
// kmean (n_blocks, n_kv_head, head_dim) bf16, logical block order (not paged): the mean of each
// block's keys over the tokens present, [b * B, min((b + 1) * B, n_kv)). PagedKvCache keeps it.
// msa_key_means writes it for blocks [b0, b1) from `keys` (those blocks must be resident).
cudaError_t msa_key_means(const PagedView& keys, int n_kv_head, int64_t b0, int64_t b1, int64_t n_kv,
                          uint16_t* kmean, cudaStream_t stream);

// est (n_tasks, n_kv_blocks) f32: max over the query block's index rows of iq_r . kmean(b, g)
// (bf16 products, f32 sums), with msa_index_scores' forced / invisible entries (+inf local,
// FLT_MAX sink, -inf for the window and after the local block).
cudaError_t msa_mean_scores(const MsaShape& s, const float* iq, int64_t iq_stride, const uint16_t* kmean,
                            const MsaForce& force, float* est, cudaStream_t stream, const MsaRemap& remap = {});

// Workspace bytes of msa_hybrid_select. Its first n_tasks * n_cand int32 hold the shortlist after
// the call (ascending block ids, -1-padded), for tests and statistics.
int64_t msa_hybrid_workspace_bytes(const MsaShape& s, int n_cand, int top_k);

// sel (n_tasks, top_k), as msa_select writes it: the top_k blocks by exact block score among the
// n_cand best by msa_mean_scores (forced blocks rank first in both; the window's are left out:
// msa_extend_selection). 1 <= top_k <= n_cand <= kMaxTopK (ops.cuh, 256).
// The shortlisted blocks must be resident (a non-resident one is never selected); with n_cand >=
// n_kv_blocks the result is msa_select's over msa_index_scores.
cudaError_t msa_hybrid_select(const MsaShape& s, const float* iq, int64_t iq_stride, const PagedView& keys,
                              const uint16_t* kmean, const MsaForce& force, int n_cand, int top_k, int32_t* sel,
                              void* workspace, int64_t workspace_bytes, cudaStream_t stream,
                              const MsaRemap& remap = {});

// ---- The window and mass-adaptive growth (msa_grow.cu; the CPU's SelectParams::window, mass) ----
// A dense-trained model spreads much of its attention over the recent past and, in its early
// layers, over most of the context: the window keeps the recent part whole, and the growth gives a
// diffuse (query block, group) more blocks — the blocks of most estimated mass until the selection
// holds `mass` of the estimate, at most msa_rules::growth_room(room, full_blocks, qb + 1) of them.
// The estimate of block b <= qb, per sampled query r (msa_rules::mass_sample_query over the query
// block's queries in the call): Jensen's lower bound of the block's softmax sum,
// n_b exp(scale iq_r · kmean(b)) (n_b: the block's tokens present), normalized over b <= qb per
// query and averaged over the sampled queries — the CPU's estimate with group-mean index queries.
struct MsaGrowth {
    float mass = 0.0f;         // share of the estimated mass a selection grows to; 0: no growth
    int room = 0;              // most blocks added at short contexts: top_k * (grow - 1), <= kMaxTopK
    int64_t full_blocks = 0;   // past this many visible blocks the room shrinks; 0: never
    float scale = 1.0f;        // softmax scale of q · k
};

// Workspace bytes of msa_extend_selection for `room` (MsaGrowth::room).
int64_t msa_extend_workspace_bytes(const MsaShape& s, int room);

// out (n_tasks, out_k) int32 <- per task, ascending and -1-padded: the blocks of sel (n_tasks,
// top_k, as msa_hybrid_select / msa_select write it), the window's blocks (MsaForce::window_begin
// (qb) .. qb - 1) and, with grow.mass > 0, the blocks the growth adds. out_k >= top_k + window +
// grow.room. The blocks added need not be resident (the caller makes them so before attending);
// kmean as msa_mean_scores reads it. out must not alias sel.
cudaError_t msa_extend_selection(const MsaShape& s, const float* iq, int64_t iq_stride, const uint16_t* kmean,
                                 const int32_t* sel, int top_k, int window, const MsaGrowth& grow, int32_t* out,
                                 int out_k, void* workspace, int64_t workspace_bytes, cudaStream_t stream,
                                 const MsaRemap& remap = {});

// Dense attention through the sparse kernel: sel (n_tasks, top_k) <- every visible block of each
// task (0..qb), -1-padded; needs top_k >= n_kv_blocks (else cudaErrorInvalidValue). For the dense
// layers and for contexts too short for sparsity to pay.
cudaError_t msa_select_all(const MsaShape& s, int top_k, int32_t* sel, cudaStream_t stream);

// Floats of split-K workspace msa_sparse_attention needs for n_splits > 1 (0 for one split).
int64_t msa_workspace_floats(const MsaShape& s, int n_splits);

// out (n_q, n_head, head_dim) f32 = sparse attention of q (n_q, n_head, head_dim) f32 over the
// blocks in sel (as msa_select writes it) of k / v (head h reads KV head h / G).
// n_splits == 1: each CTA walks all selected blocks with an online softmax (prefill).
// n_splits > 1: split-K, the selected blocks are divided among n_splits CTAs per row tile whose
// partial (max, sum, P·V) go to `workspace` (msa_workspace_floats) and are merged by a combine
// kernel (decode: few rows, so the keys are what can be spread over the GPU).
cudaError_t msa_sparse_attention(const MsaShape& s, const float* q, float* out, float scale, const int32_t* sel,
                                 int top_k, const PagedView& k, const PagedView& v, int n_splits, float* workspace,
                                 int64_t workspace_floats, cudaStream_t stream, const MsaRemap& remap = {});

// ---- Attention mass for citations (msa_mass.cu) ----
// A call of one query (s.n_q == 1, decode): mass (n_kv_head, top_k, B) f32 <- for each group g and
// each entry i of its selection row sel[g * top_k + i], the softmax probability of each token of
// that block, averaged over the group's heads — softmax of scale * q_h · k_j over the tokens j of
// the row's blocks at or before the query (f32 query, bf16 keys: the probabilities
// msa_sparse_attention's softmax gives, to its bf16 rounding of the query). 0 for -1 entries,
// tokens past the query and non-resident blocks. A block's entries sum to its mass (the CPU's
// Selection::token_mass and mass), a group's to 1. q (1, n_head, head_dim) f32; any top_k (the
// selection's width: a grown selection holds up to top_k + window + room blocks); any group size
// (the heads go in chunks of kMaxMassGroup).
inline constexpr int kMaxMassGroup = 16;
cudaError_t msa_token_mass(const MsaShape& s, const float* q, float scale, const int32_t* sel, int top_k,
                           const PagedView& k, float* mass, cudaStream_t stream, const MsaRemap& remap = {});

// Writes rows (n, n_heads, head_dim) f32 for positions [pos0, pos0 + n) into a paged bf16 tensor
// (dst.base is written through; the blocks must be resident).
cudaError_t write_paged(const PagedView& dst, int n_heads, const float* rows, int64_t pos0, int64_t n,
                        cudaStream_t stream);

}  // namespace sl::cuda
