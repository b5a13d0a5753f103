// Exact causal softmax attention over every cached position: the reference the MSA path is
// compared with, and the path for short contexts.
#pragma once

#include "core/attention/attention.h"

namespace sl {

class DenseAttention final : public Attention {
public:
    void forward(const AttentionCall& call, const KvCache& kv, ThreadPool& pool) override;
    const char* name() const override { return "dense"; }
};

}  // namespace sl
