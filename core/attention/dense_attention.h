// Exact causal softmax attention over every cached position: the reference the MSA path is
// compared with, and the path for short contexts.
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
