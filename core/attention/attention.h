// The attention call of one layer: where the dense path and MSA plug in.
//
// Queries are positions [pos0, pos0 + n_tokens); keys and values for positions
// [0, pos0 + n_tokens) are already in the cache (the forward pass writes this step's K/V first).
// Causal: query at position p sees keys 0..p. Heads of a GQA group (n_head / n_kv_head query heads
// per KV head) share their KV head.
#pragma once

#include <cstdint>

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
    float* out = nullptr;     // (n_tokens, n_head, head_dim)
};

class Attention {
public:
    virtual ~Attention() = default;
    // Runs on the calling thread and uses `pool` for the work; reads `kv` only.
    virtual void forward(const AttentionCall& call, const KvCache& kv, ThreadPool& pool) = 0;
    virtual const char* name() const = 0;
};

}  // namespace sl
