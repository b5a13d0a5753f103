// MSA-style two-branch sparse attention, training-free mode (for the dense-trained models users
// have): the index branch (block_select.h) picks, per query block and KV-head group, the top-k KV
// blocks from per-block key summaries (block_index.h) and the model's own RoPE'd q; the sparse branch
// runs exact online-softmax attention over the tokens of the selected blocks only, at their original
// positions. With top_k >= the number of visible blocks it equals dense attention to rounding.
//
// Queries of a call are grouped into query blocks by position (aligned to the KV blocks: positions
// [qb*B, (qb+1)*B) ∩ [pos0, pos0 + n_tokens)); one selection per (query block, KV group), made with
// the max over the block's queries (and, by default, over the group's heads) of the block score,
// and shared by every query and head of that group, so each selected KV block is read once for all
// of them. Decode is a query block of one query. The local block is causally masked. A
// bidirectional call (AttentionCall::causal false: Gemma 3's image tokens) is attended exactly
// (dense over the past and the call) in every layer: an image run is a few hundred positions.
// The sparse branch runs in parts of about equal work (a selection's query tokens, and its heads
// when it has few tokens) that free pool threads claim; a selection of 16 rows (queries x heads)
// or more attends each block in tiles of 4 query rows over the block's transposed keys
// (kernels/cpu/attention_tile.h), a smaller one (decode) row by row. Every row's result is the
// same whichever way it is split (the block masses are sums over parts: same for a given pool size).
// Exception: the call's last query, whose logits the model returns (the next token of a prompt),
// selects on its own, as in decode, when its query block holds other queries of the call. A
// shared selection is ranked by the whole block's queries; in a prompt whose question ends inside
// filler-like text those outvoted the question's own blocks and the answer lost what it asked for
// (bench_msa_passkey at 4K: 0/3 found with the shared selection, 3/3 with the last query's own).
//
// Index queries (IndexQuery): HeadMax scores each query head with its own q and takes the max over
// the group's heads (the selection serves every head: a block one head needs is kept); GroupMean
// scores the group's mean query (G times cheaper, but heads that look in different directions
// cancel out). See tst_msa_recall for how each captures the dense attention mass.
//
// Native mode (BlockScoring::Native, models with a learned indexer such as MiniMax-M3): the model
// hands each sparse layer its index queries (one head per KV group) and index keys in the
// AttentionCall; the block score of (query block, group g) is the max over the query block's
// queries i and the block's tokens j of iq_g(i) · ik(j) (select_blocks_native). In decode that is
// M3's per-token selection exactly; in prefill the queries of a query block share one selection, as
// in the training-free modes (and the CUDA kernels, kernels/cuda/msa.cuh).
// The index keys are kept per layer and position [0, n) here; a call needs those of [0, pos0). They
// are derived from hidden states that the KV cache does not hold, so they cannot be rebuilt from
// the cache: a saved context carries them (Session::save / restore, index_keys()). When they are
// missing (after invalidate() without keys handed back, a file saved without them, a switch to
// another cache), a call at pos0 > 0 makes that layer fall back to training-free BlockMax scoring
// (counted in MsaStats::native_fallbacks) until the context restarts at position 0. A native
// layer whose call has no index queries (a file without an indexer) is an error.
//
// State: per layer, the block index of the keys (updated at each call for the blocks holding
// positions [min(summarized, pos0), pos0 + n_tokens)) and the selections of the last call.
// Threading: forward() runs on the calling thread and uses `pool`; one forward at a time. Readers of
// last_selections()/stats() must not overlap a forward call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/attention/attention.h"
#include "core/attention/block_index.h"
#include "core/attention/block_select.h"
#include "core/attention/dense_attention.h"

namespace sl {

enum class IndexQuery { HeadMax, GroupMean };

// Positions the sparse branch attends at. Original: every key at its true distance. Remap (for
// models trained on shorter contexts than they are given, InfLLM-style): blocks whose last token is
// within `remap_window` positions of the query keep their true distances; a farther selected block
// is attended as if it began `remap_window` positions before the query (its tokens at distances
// remap_window - i, i the offset in the block). Computed as q^ · k^ with q^ = R(W - p) q per query
// and k^ = R(-b*B) k per block (rope_shift.h). The index branch scores far blocks the same way
// (block-relative summaries, RemapRows), so it ranks blocks by the logits the sparse branch attends
// with; scoring them at their true distances, beyond the model's training context, picked blocks
// the attention then gave little mass (tst_msa_recall).
enum class PositionMode { Original, Remap };

struct MsaConfig {
    int block_size = 128;   // B: tokens per KV block (and per query block)
    int top_k = 16;         // blocks attended per (query block, KV group), local and sink included
    bool sink = false;      // always attend block 0
    // Local window (InfLLM's): the window_blocks blocks before the local one are always attended,
    // on top of the top_k (SelectParams::window). A dense-trained model spreads much of its
    // attention over the recent past; the window keeps that part whole (tst_msa_recall).
    int window_blocks = 0;
    // Mass-adaptive growth (SelectParams::mass, grow): after the top_k, blocks of most estimated
    // mass are added until the selection holds top_p of the estimate, at most top_k * (top_p_grow
    // - 1) of them. 0: off (exactly top_k). Training-free scoring only.
    float top_p = 0.0f;
    int top_p_grow = 4;
    // Past this many tokens of context the growth's room shrinks (SelectParams::grow_full, in
    // blocks: top_p_full_ctx / block_size). 0: the whole room at every length.
    int top_p_full_ctx = 0;
    int dense_layers = 0;   // layers [0, dense_layers) run dense attention
    BlockScoring scoring = BlockScoring::BlockMax;  // Native: the model's indexer (see above)
    IndexQuery index_query = IndexQuery::HeadMax;
    bool prune = true;      // BlockMax and Native: Quest pruning (same selection as brute force, far cheaper)
    int hybrid_factor = 4;  // Hybrid scoring: shortlist of hybrid_factor x (top_k - forced) blocks by mean key
    // Hybrid scoring in calls of one query (decode): the shortlist factor; 0 = hybrid_factor. A
    // decode step reads the shortlist's keys for one query, so its cost is the shortlist's bytes.
    // A prefill call's last query (the prompt's, which selects on its own) keeps hybrid_factor.
    int decode_hybrid_factor = 0;
    PositionMode positions = PositionMode::Original;
    int remap_window = 4096;  // Remap: tokens attended at their true distance
    bool token_mass = false;  // calls of one query (decode): also record Selection::token_mass
};

// Sets c.scoring, c.hybrid_factor, c.decode_hybrid_factor, c.index_query, c.sink and
// c.window_blocks from a mode name: "block-max", "mean-key", "hybrid" or "hybridN" (a shortlist of
// N x top-k) or "hybridNdM" (N in prefill, M in decode calls), "native", each optionally followed
// by "/head-max" or "/group-mean", then "/sink" (block 0 forced; not forced without it), then "/wN"
// (a local window of N blocks; none without it), then "/pN" or "/pNxM" (mass-adaptive growth to N
// percent of the estimated mass, at most (M - 1) x top-k added blocks, M = 4 when not given; none
// without it), then "/cNk" (past N x 1024 tokens of context the growth's room shrinks by the square
// of N x 1024 over the context: SelectParams::grow_full; whole at every length without it), e.g.
// "hybrid8/group-mean/sink/w16/p95". Sets c.top_p, c.top_p_grow and c.top_p_full_ctx too. Throws
// Error naming the mode when it is not one of these, and leaves c as it was.
void parse_msa_scoring(const std::string& mode, MsaConfig& c);

// The training-free mode for dense-trained models (a mode name for parse_msa_scoring), run by the
// library prefill and by `sightline-cli generate --attention msa`: hybrid scoring (a mean-key
// shortlist of 8 x top-k, exact block-max within it) with the group's mean query as the index
// query; block 0 and the 16 blocks before the local one always read; then growth to 98% of the
// estimated mass, at most 7 x top-k more blocks up to 32K tokens of context, and a room shrinking
// with the square of the context past it (/c32k: 28 blocks at 64K, 7 at 128K, 1 from 362K on).
// Fraction of the dense attention mass kept over refman.pdf (tst_msa_recall, remapped positions):
// at 32K hybrid8/group-mean 0.860, + /sink/w16 0.904-0.912 (31.7 blocks per selection; the best
// any 16 blocks + window can do: 0.921-0.930), + /p98x8 0.951 (54.0 blocks), decode-like
// selections 0.953 (/c32k changes nothing up to 32K). A dense-trained model's early layers spread
// their attention over most of the context; growth gives those heads the blocks they need. At
// 128K no mode keeps 0.95 (the best 16 blocks + window: 0.822): + /sink/w16 0.782, + /p98x8 0.846
// with the whole room (82.9 blocks per selection, and 144, the cap, at the end of the context),
// which held the speed-up over dense to 4-7x on one layer of real activations; with /c32k
// 8-12x (bench_attention SIGHTLINE_BENCH_REAL) at 0.821 (0.712 over the last quarter, against
// 0.762 with the whole room on the same activations). Issue #5's notes have the figures.
inline constexpr const char* kTrainingFreeMode = "hybrid8/group-mean/sink/w16/p98x8/c32k";

// The blocks one (query block, KV group) attended in the last call of a layer.
struct Selection {
    int kv_head = 0;                // the KV group
    int64_t q_pos0 = 0;             // first query position of the query block
    int n_queries = 0;              // queries in the query block
    std::vector<int32_t> blocks;    // selected block ids, ascending (block b = positions [b*B, (b+1)*B))
    std::vector<float> mass;        // per block: softmax probability summed over the block's tokens,
                                    // averaged over the group's heads and the block's queries
    // MsaConfig::token_mass, calls of one query only: (blocks, B) the probability of each token of
    // each selected block, averaged over the group's heads (0 past a block's tokens); a block's
    // entries sum to its mass. Empty otherwise. (Which tokens of a block were read: citations
    // split a block shared by several units with it.)
    std::vector<float> token_mass;
};

// Work of the calls since reset_stats(), summed over layers (sparse layers only).
struct MsaStats {
    int64_t calls = 0;
    int64_t selections = 0;         // (query block, group) selections made
    int64_t visible_blocks = 0;     // Σ blocks visible to those selections
    int64_t selected_blocks = 0;    // Σ blocks selected
    SelectStats select;             // index-branch work (candidates, exact scoring)
    int64_t index_bytes = 0;        // summary bytes read by the index branch
    int64_t exact_key_bytes = 0;    // key bytes read for exact block scores
    int64_t kv_bytes = 0;           // K and V bytes of the selected blocks read by the sparse branch
    int64_t dense_kv_bytes = 0;     // K and V bytes dense attention would read for the same calls
    int64_t native_fallbacks = 0;   // Native: selections scored training-free (index keys missing)
    int64_t bidirectional_calls = 0;  // sparse-layer calls of a bidirectional run, attended densely
    int64_t imported_indexes = 0;   // layers whose block index came from a saved context (not the keys)
};

class MsaAttention final : public Attention {
public:
    explicit MsaAttention(MsaConfig config = {});
    ~MsaAttention() override;

    void forward(const AttentionCall& call, const KvCache& kv, ThreadPool& pool) override;
    const char* name() const override { return "msa"; }
    bool wants_index() const override { return config_.scoring == BlockScoring::Native; }
    std::string signature() const override;

    const MsaConfig& config() const { return config_; }
    // MsaConfig::token_mass (does not change what is computed, only what is recorded). Not during
    // a forward call.
    void set_token_mass(bool on) { config_.token_mass = on; }

    // Selections of the last forward call of `layer`, ordered by query block then KV group, the
    // last query's own (see above) after them; empty
    // for dense layers and layers not run yet. Valid until the next forward call of that layer.
    const std::vector<Selection>& last_selections(int layer) const;

    // Called at the end of each sparse layer's forward, on the calling thread, with its selections
    // (the raw material of citations). Optional.
    using SelectionObserver = std::function<void(int layer, const AttentionCall& call, const std::vector<Selection>&)>;
    void set_observer(SelectionObserver observer) { observer_ = std::move(observer); }

    // Selections made elsewhere under this configuration — the CUDA runner, which runs it on the
    // device (Session) — become the layer's last selections and go to the observer, as forward()
    // hands over its own. `call` describes the call they came from (layer, pos0, n_tokens, heads).
    // Stats are not counted. Not during a forward call.
    void deliver(const AttentionCall& call, std::vector<Selection> selections);

    // The block index of a layer (null before its first sparse call).
    const BlockIndex* index(int layer) const;
    // Native: positions [0, n) whose index keys `layer` holds (0 when none or not native).
    int64_t native_keys(int layer) const;
    // Native: those keys, (native_keys(layer), index dim) floats; null when none. Valid until the
    // next forward call or invalidate().
    const float* native_key_data(int layer) const;
    // Native: supplies the index keys of positions [0, n) of `layer` (n rows of `dim` floats, copied)
    // for the context held in `kv`, as forward calls would have stored them (for a context whose
    // keys were kept elsewhere, and for benchmarks). The layer's block index is rebuilt at its next
    // call. Not on the thread of a running forward.
    void set_native_keys(int layer, const KvCache& kv, const float* keys, int64_t n, int dim);

    const MsaStats& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

    // Forgets every summary: call when the cache was rewritten other than through forward calls in
    // position order (forward already handles restarting at a lower pos0 and a different cache).
    void invalidate();
    void reset_state() override { invalidate(); }
    // Keeps the block summaries, native index keys and their bounds of positions [0, n) only.
    void truncate_state(int64_t n) override;
    // Native mode's index keys travel with a saved context (Session::save / restore).
    IndexKeys index_keys(int layer) const override {
        return {native_key_data(layer), native_keys(layer), native_keys(layer) > 0 ? layers_[static_cast<size_t>(layer)].ik_dim : 0};
    }
    // from > 0 and the layer holds keys of dim `dim` for `kv` up to at least `from`: rows [from, n)
    // are copied after them, the block index and the Quest bounds of [0, from) kept; else as
    // set_native_keys.
    void set_index_keys(int layer, const KvCache& kv, const float* keys, int64_t n, int dim, int64_t from = 0) override;
    // The block index travels with a saved context: a restore hands it back (held until the
    // layer's next call builds its index with the call's RoPE, which must be the saving one's: the
    // file's model) instead of the first call summarizing every key.
    KvBlockSummaries block_summaries(int layer) const override;
    bool takes_block_summaries(int layer, int block_size) const override {
        return block_size == config_.block_size && layer >= config_.dense_layers;
    }
    void set_block_summaries(int layer, const KvCache& kv, const float* data, int64_t b0, int64_t n, int block_size,
                             int floats) override;

private:
    struct Layer {
        std::unique_ptr<BlockIndex> index;
        const KvCache* kv = nullptr;
        std::vector<Selection> selections;
        std::vector<float> ikeys;   // Native: index keys of positions [0, ik_n), (ik_n, index_dim)
        int64_t ik_n = 0;
        int ik_dim = 0;
        // Native: the Quest summaries (NativeBounds) of the index keys' first ik_bounded blocks.
        std::vector<float> ik_min, ik_max, ik_abs;
        int64_t ik_bounded = 0;
        // Block summaries handed back by a restore before the layer's index exists (its RoPE comes
        // with the next call): positions [0, pending_n), pending_floats a block.
        std::vector<float> pending;
        int64_t pending_n = 0;
        int pending_floats = 0;
        // Forgets what was derived from the cache it held (another cache comes).
        void forget() {
            index.reset();
            pending.clear();
            pending_n = 0;
            ikeys.clear();
            ik_n = 0;
            ik_bounded = 0;
        }
    };
    struct Scratch;

    MsaConfig config_;
    DenseAttention dense_;
    std::vector<Layer> layers_;
    std::vector<std::unique_ptr<Scratch>> scratch_;  // per pool thread
    // A part of the sparse branch: selection `sel`, the group's heads [h0, h1) and its query tokens
    // [t0, t1) (both relative to the selection).
    struct Part {
        int32_t sel;
        int h0, h1;
        int t0, t1;
    };
    std::vector<Part> parts_;
    std::vector<float> mass_parts_;                  // (parts, top_k): per-part block masses
    std::vector<float> token_parts_;                 // token_mass: (parts, top_k, B) per-part token masses
    MsaStats stats_;
    SelectionObserver observer_;
};

}  // namespace sl
