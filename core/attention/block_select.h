// MSA's index branch, training-free: scores the visible KV blocks of one KV head for a set of index
// query rows and picks the top-k, the local block (and optionally block 0, the sink) forced.
//
// Scoring modes:
//   BlockMax — score(b) = max over rows r and keys j of block b of q_r · k_j (M3's max pooling,
//              with the model's own q and k). Exact; made cheap with the Quest bound
//              U(b) = max_r Σ_i max(q_ri kmin_bi, q_ri kmax_bi) >= score(b): blocks are visited in
//              descending bound order and exact scores computed only while the bound can still beat
//              the current k-th best exact score. With `prune` off every candidate is scored exactly
//              (brute force); both give the same selection (ties broken by lower block id).
//   MeanKey  — score(b) = max_r q_r · mean_key(b): one dot per row and block, approximate (MoBA).
//   Hybrid   — MeanKey picks the `hybrid_factor` x (top_k - forced) most promising candidates, then
//              BlockMax (exact, Quest-pruned) ranks those: reads the mean keys plus the keys of a few
//              blocks, so its cost stays near MeanKey's at long contexts while the final choice is
//              BlockMax's among the shortlist.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/attention/rope_shift.h"
#include "kernels/msa_rules.h"

namespace sl {

class BlockIndex;
class KvCache;

// Native: the model's own learned indexer (MiniMax-M3): select_blocks_native() below.
enum class BlockScoring { BlockMax, MeanKey, Hybrid, Native };

struct SelectParams {
    int top_k = 16;      // blocks selected in total, forced blocks (local, sink) included
    bool sink = false;   // force block 0 (when top_k >= 2: the local block has priority)
    // Local window (InfLLM's): the `window` blocks before the local block are forced too, on top of
    // top_k (the sink among them counts as a window block). 0: the local block alone.
    int window = 0;
    BlockScoring scoring = BlockScoring::BlockMax;
    bool prune = true;   // BlockMax and Native (with its bounds): Quest pruning (false: brute-force exact block-max)
    int hybrid_factor = 4;  // Hybrid: shortlist size as a multiple of the blocks to choose
    // Mass-adaptive growth (top-p; select_blocks only, not native): after the top-k, the blocks of
    // most estimated attention mass are added until the selection holds `mass` of the estimate, or
    // top_k * (grow - 1) blocks were added. 0: off. The estimate, per block b and index row r, is
    // Jensen's lower bound of the block's softmax sum: n_b exp(scale q_r · mean_key(b)), normalized
    // over the visible blocks per row and averaged over the rows of up to kMassRows queries spread
    // over the query block's queries (all `mass_rows_per_query` rows of each: the group's heads with head-max index
    // queries). Diffuse heads (attention spread over most of the context, common in a dense-trained
    // model's early layers) get more blocks; focused heads stay at top_k (tst_msa_recall). (A
    // Gaussian estimate with the keys' per-channel variances, exact for normally distributed scores,
    // kept less mass per block added at 32K: tst_msa_recall, issue #5's notes.)
    float mass = 0.0f;
    int grow = 4;
    // Growth room at long contexts: with grow_full > 0 and more than grow_full blocks visible,
    // the room top_k * (grow - 1) shrinks to room * (grow_full / visible)^2 (rounded down, at
    // least 1). The sparse branch costs about as much per block as dense attention, so the
    // speed-up is about visible / selected blocks: a whole room of 112 blocks holds it to 4-7x
    // at 128K on SmolLM2's real activations, where the growth keeps 0.846 of the dense mass
    // against 0.782 without it (tst_msa_recall, bench_attention SIGHTLINE_BENCH_REAL; issue #5).
    // 0: the whole room at every length.
    int64_t grow_full = 0;
    int mass_rows_per_query = 1;  // index rows per query, consecutive (head-max: the group's heads)
    float scale = 1.0f;  // softmax scale of q · k, for the mass estimate
};

// The most blocks SelectParams::mass may add to a selection of a query that sees `visible` blocks
// (top_k * (grow - 1), shrunk past grow_full).
int64_t growth_room(const SelectParams& p, int64_t visible);

// Queries per selection whose index rows the mass estimate of SelectParams::mass reads.
inline constexpr int kMassRows = msa_rules::kMassRows;

// Work counters of the index branch, summed over calls.
struct SelectStats {
    int64_t candidates = 0;     // blocks that competed for the top-k (visible, not forced)
    int64_t exact_blocks = 0;   // blocks whose exact block-max was computed
    int64_t exact_rows = 0;     // (row, block) pairs whose exact max over the block's keys was computed
    int64_t exact_keys = 0;     // q·k dot products spent on exact scores
    int64_t brute_rows = 0;     // (row, block) pairs brute-force block-max would score for the same calls
    int64_t summary_bytes = 0;  // block-summary bytes read for bounds / mean-key scores
    void add(const SelectStats& o) {
        summary_bytes += o.summary_bytes;
        candidates += o.candidates;
        exact_blocks += o.exact_blocks;
        exact_rows += o.exact_rows;
        exact_keys += o.exact_keys;
        brute_rows += o.brute_rows;
    }
};

// Position remapping (MsaConfig::positions = Remap, rope_shift.h): a row whose query position is
// >= `window` past a candidate block's last token scores that block at the block's remapped
// distance, with `far_rows` (each row as R(window - pos) q, same layout and stride as the rows)
// against the index's block-relative summaries and keys (BlockIndex::has_relative()). Rows nearer
// than that score with their own q and the true-position keys, as without remapping. The scores
// are then exactly those the sparse branch attends with (M3's max pooling of the attended logits).
struct RemapRows {
    int64_t window = 0;
    const float* far_rows = nullptr;  // (n_rows, row_stride)
    const int64_t* pos = nullptr;     // (n_rows), ascending: each row's query position
};

// The RemapRows of index rows `rows` (n_queries * per_query rows of head_dim floats, contiguous;
// the per_query rows of query i at position pos0 + i): far_rows = R(window - p) row, built in
// `far` / `pos` (resized; they must outlive the result). `cs`: scratch for rope.rotate.
RemapRows make_remap_rows(const RopeShift& rope, const std::vector<float>& rows, int n_queries, int per_query,
                          int head_dim, int64_t pos0, int64_t window, std::vector<float>& far,
                          std::vector<int64_t>& pos, std::vector<float>& cs);

// Per-thread scratch; grows to the largest call and is reused (no allocation in steady state).
struct SelectScratch {
    std::vector<float> row_bound;                 // (n_rows)
    std::vector<std::pair<float, int32_t>> cand;  // (bound or score, block)
    std::vector<std::pair<float, int32_t>> top;   // (exact score, block)
    std::vector<float> kbuf;                      // (B, head_dim): a block's keys as f32
    std::vector<int32_t> shortlist;               // Hybrid: candidate blocks passed to BlockMax
    std::vector<float> rbuf, cs;                  // Remap: a block's keys as k^; cos/sin
    std::vector<float> frot;                      // Remap: far rows rotated to a block's positions
    std::vector<float> est, imp;                  // mass growth: (local + 1) per-row estimates, average
    std::vector<std::pair<float, int32_t>> grow;  // mass growth: (estimate, block) outside the selection
};

// Selects blocks of KV head `kv_head` of layer `layer` for index query rows `rows` (n_rows rows of
// index.head_dim() floats, `row_stride` floats apart) whose queries all lie in block `local`
// (so blocks < local are fully visible, blocks > local invisible). Candidates are blocks [0, local)
// minus the sink and the window. `out` receives the selected block ids, ascending: local, the
// window's blocks, the sink when asked, and the top (top_k - 1 - sink) candidates by score, then
// with params.mass > 0 the blocks the mass estimate adds (see SelectParams).
// local < index.n_blocks(); `kv` holds the keys the index summarizes. `remap` (optional): see RemapRows. Thread-safe for distinct scratch/out/stats.
void select_blocks(const BlockIndex& index, const KvCache& kv, int layer, int kv_head, const float* rows,
                   int n_rows, int64_t row_stride, int64_t local, const SelectParams& params,
                   SelectScratch& scratch, std::vector<int32_t>& out, SelectStats& stats,
                   const RemapRows* remap = nullptr);

// Channel-wise min and max of the index keys of each full block and the largest |key| in it
// (native_bounds() fills them), for select_blocks_native's Quest pruning. kmin / kmax: (n_blocks,
// dim); kabs_max: (n_blocks).
struct NativeBounds {
    const float* kmin = nullptr;
    const float* kmax = nullptr;
    const float* kabs_max = nullptr;
};

// Native MSA (models with a learned indexer; MSA.md): block score of block b < local = max over rows
// r and tokens j of block b of iq_r · ik_j (plain f32 dots, no scale), index rows `rows` (n_rows,
// `row_stride` floats apart, `dim` used) of one index head, and index keys `keys` (positions
// [0, local * block), `dim` floats each, contiguous). Forcing, top-k and tie-breaking (lower block
// id) as select_blocks(); `params.scoring` is ignored. With `bounds` (covering blocks [0, local))
// and params.prune, candidates are visited by their Quest bound and scored exactly only while they
// can still enter the top-k: the same selection as scoring every key (brute force, bounds null),
// a fraction of the dot products (SelectStats::exact_rows against brute_rows).
// Thread-safe for distinct scratch/out/stats.
void select_blocks_native(const float* keys, int block, int dim, const float* rows, int n_rows, int64_t row_stride,
                          int64_t local, const SelectParams& params, SelectScratch& scratch, std::vector<int32_t>& out,
                          SelectStats& stats, const NativeBounds* bounds = nullptr);

// Fills blocks [b0, b1) of the NativeBounds arrays (resized to b1 blocks) from `keys` (at least
// b1 * block keys of dim floats, contiguous).
void native_bounds(const float* keys, int block, int dim, int64_t b0, int64_t b1, std::vector<float>& kmin,
                   std::vector<float>& kmax, std::vector<float>& kabs_max);

// The exact block-max score of block b < local for the rows (brute force over rows and keys), as
// BlockMax ranks it. For tests and diagnostics.
float exact_block_score(const BlockIndex& index, const KvCache& kv, int layer, int kv_head, const float* rows,
                        int n_rows, int64_t row_stride, int64_t b);

}  // namespace sl
