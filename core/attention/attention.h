// The attention call of one layer: where the dense path and MSA plug in.
//
// Queries are positions [pos0, pos0 + n_tokens); keys and values for positions
// [0, pos0 + n_tokens) are already in the cache (the forward pass writes this step's K/V first).
// Causal: query at position p sees keys 0..p. Heads of a GQA group (n_head / n_kv_head query heads
// per KV head) share their KV head.
#pragma once

#include <cstdint>
#include <string>

#include "core/kvcache/kv_file.h"

namespace sl {

class KvCache;
class ThreadPool;

struct AttentionCall {
    int layer = 0;
    int64_t pos0 = 0;
    int n_tokens = 0;
    int n_head = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    float scale = 1.0f;       // usually 1 / sqrt(head_dim)
    const float* q = nullptr; // (n_tokens, n_head, head_dim), RoPE applied
    // The RoPE that q and k carry (for position remapping in MSA): dims rotated per head (0: none
    // or unknown), base, frequency scale, and pairing (0: adjacent pairs (2i, 2i+1), 1: NeoX halves).
    int rope_dim = 0;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    int rope_neox = 0;
    const float* rope_freq_factors = nullptr;  // (rope_dim / 2) divisors of theta_i, or null (none)
    // Sliding-window layers (Gemma 3): the query at position p sees keys max(0, p - window + 1)..p.
    // 0: all keys 0..p.
    int window = 0;
    // false: a bidirectional call — every query also sees the keys of the call's later tokens
    // (Gemma 3's image tokens attend to each other both ways, as llama.cpp's non-causal image
    // batch); the sliding window still bounds what a query sees of the past. DenseAttention
    // implements it; MSA refuses it.
    bool causal = true;
    float* out = nullptr;     // (n_tokens, n_head, head_dim)
    // MSA native mode (models with a learned indexer, MiniMax-M3 style): the layer's index queries
    // and keys of this call's tokens, RMS-normalized and RoPE'd like q/k. Null when the layer has
    // no indexer or the attention did not ask for them (wants_index()). Index head h serves KV
    // group h (index_n_head == n_kv_head).
    int index_n_head = 0;
    int index_dim = 0;
    const float* index_q = nullptr;  // (n_tokens, index_n_head, index_dim)
    const float* index_k = nullptr;  // (n_tokens, index_dim)
};

class Attention {
public:
    virtual ~Attention() = default;
    // Runs on the calling thread and uses `pool` for the work; reads `kv` only.
    virtual void forward(const AttentionCall& call, const KvCache& kv, ThreadPool& pool) = 0;
    virtual const char* name() const = 0;
    // Whether forward() uses AttentionCall::index_q / index_k (the model computes them only then).
    virtual bool wants_index() const { return false; }
    // What decides the K/V this attention leaves in the cache beyond the model (saved contexts
    // record it; a save appends only to a file made with the same signature). <= 64 chars.
    virtual std::string signature() const { return name(); }
    // Forgets state derived from the cache (block summaries): called when the cache was cleared or
    // replaced other than by forward calls (Session::reset, Session::restore).
    virtual void reset_state() {}
    // Forgets state derived from positions [n, ...) of the cache: the context was cut back to n
    // (Session::truncate), and those positions may come back other than through forward calls (a
    // saved context's pages attached after them: Session::restore_delta). State of [0, n) stays.
    virtual void truncate_state(int64_t /*n*/) {}

    // State a saved context carries beside the K/V because the cache cannot rebuild it (MSA native
    // mode: a layer's index keys, derived from hidden states): positions [0, n) of `layer`, (n, dim)
    // floats, valid until the next forward or reset_state(). None by default.
    struct IndexKeys {
        const float* data = nullptr;
        int64_t n = 0;
        int dim = 0;
    };
    virtual IndexKeys index_keys(int /*layer*/) const { return {}; }
    // Hands them back for the context now in `kv` (Session::restore, after reset_state()); copied.
    // from > 0: rows [0, from) are the ones this attention already holds for `kv` (the context was
    // cut back to `from` and continued from a file: Session::restore_delta); only [from, n) are
    // new, and what was derived from the rest is kept when it is there.
    virtual void set_index_keys(int /*layer*/, const KvCache& /*kv*/, const float* /*keys*/, int64_t /*n*/, int /*dim*/,
                                int64_t /*from*/ = 0) {}

    // State a saved context may carry so that a restore need not derive it from every key (MSA:
    // the block index, which reads ~11 GB of keys at a million tokens): `layer`'s summaries of
    // positions [0, n) as kv_file.h saves them; none (get empty) by default or when this attention
    // holds none of the whole context.
    virtual KvBlockSummaries block_summaries(int /*layer*/) const { return {}; }
    // Whether set_block_summaries would take `layer`'s summaries in blocks of `block_size` (a
    // restore reads them from the file only then).
    virtual bool takes_block_summaries(int /*layer*/, int /*block_size*/) const { return false; }
    // Hands saved summaries back for the context now in `kv` (Session::restore, after
    // set_index_keys): blocks [b0, ceil(n / block_size)), `floats` each, of positions [0, n);
    // those of blocks before b0 are the ones this attention holds for `kv` (restore_delta).
    // Copied. Ignored when they do not fit (another block size or layout, or fewer held before
    // b0): the attention derives them from the keys then, as before.
    virtual void set_block_summaries(int /*layer*/, const KvCache& /*kv*/, const float* /*data*/, int64_t /*b0*/,
                                     int64_t /*n*/, int /*block_size*/, int /*floats*/) {}
};

}  // namespace sl
