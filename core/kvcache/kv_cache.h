// The dense KV cache: per layer, keys and values of every position, f32.
// Layout per layer: K (n_ctx, n_kv_head, head_dim), V likewise, contiguous.
// The paged, tiered cache for MSA (blocks with index summaries) replaces this behind the same
// accessors in the MSA issue.
//
// Threading: writers (the forward pass) and readers (attention) are the same session; different
// threads may read concurrently while nobody writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sl {

class KvCache {
public:
    KvCache(int n_layer, int n_ctx, int n_kv_head, int head_dim);

    int n_layer() const { return n_layer_; }
    int n_ctx() const { return n_ctx_; }
    int n_kv_head() const { return n_kv_head_; }
    int head_dim() const { return head_dim_; }
    // Floats per position (n_kv_head * head_dim).
    int64_t row() const { return row_; }

    float* k(int layer, int64_t pos) { return k_[static_cast<size_t>(layer)].data() + pos * row_; }
    float* v(int layer, int64_t pos) { return v_[static_cast<size_t>(layer)].data() + pos * row_; }
    const float* k(int layer, int64_t pos) const { return k_[static_cast<size_t>(layer)].data() + pos * row_; }
    const float* v(int layer, int64_t pos) const { return v_[static_cast<size_t>(layer)].data() + pos * row_; }

    // Positions [0, n_past) hold valid entries.
    int64_t n_past() const { return n_past_; }
    void set_n_past(int64_t n) { n_past_ = n; }

    size_t bytes() const;

private:
    int n_layer_, n_ctx_, n_kv_head_, head_dim_;
    int64_t row_;
    int64_t n_past_ = 0;
    std::vector<std::vector<float>> k_, v_;
};

}  // namespace sl
