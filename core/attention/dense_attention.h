// Exact causal softmax attention over every cached position: the reference the MSA path is
// compared with, and the path for short contexts. Prefill of 16 or more rows (query tokens x the
// group's heads) runs in items of (KV head, 32 query tokens): each page of keys is dequantized and
// transposed once per item and attended by the item's rows in tiles of 4 (attention_tile.h);
// smaller calls go token by token, and decode over a long context splits the keys across threads.
#pragma once

#include <vector>

#include "core/attention/attention.h"

namespace sl {

// Owns its scratch, reused across calls (forward runs once per layer per step, so allocating there
// would sit on the hot path); one forward call at a time per object.
class DenseAttention final : public Attention {
public:
    void forward(const AttentionCall& call, const KvCache& kv, ThreadPool& pool) override;
    const char* name() const override { return "dense"; }

private:
    std::vector<std::vector<float>> scratch_;  // per pool thread: scores, max, sum
    std::vector<float> m_, l_, acc_;           // split-key decode: per (chunk, KV head, head) partials
};

}  // namespace sl
