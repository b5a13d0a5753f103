// Test helper: a dense, writable f32 mirror of a KvCache (the layout the attention tests were written
// against: per layer (n_ctx, n_kv_head, head_dim)). Tests fill and read the mirror; passing it where
// a KvCache is expected writes every position into the paged cache first (when it changed).
#pragma once

#include <cstdint>
#include <vector>

#include "core/kvcache/kv_cache.h"

namespace sl::test {

class HostKv {
public:
    HostKv(int n_layer, int n_ctx, int n_kv_head, int head_dim, KvCacheOptions options = {})
        : cache_(n_layer, n_ctx, n_kv_head, head_dim, options), n_ctx_(n_ctx), row_(static_cast<int64_t>(n_kv_head) * head_dim),
          k_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_ctx) * static_cast<size_t>(row_)), v_(k_.size()) {}

    int64_t row() const { return row_; }
    int head_dim() const { return cache_.head_dim(); }
    int n_kv_head() const { return cache_.n_kv_head(); }
    int n_ctx() const { return n_ctx_; }
    float* k(int layer, int64_t pos) { dirty_ = true; return k_.data() + (static_cast<int64_t>(layer) * n_ctx_ + pos) * row_; }
    float* v(int layer, int64_t pos) { dirty_ = true; return v_.data() + (static_cast<int64_t>(layer) * n_ctx_ + pos) * row_; }
    const float* k(int layer, int64_t pos) const { return k_.data() + (static_cast<int64_t>(layer) * n_ctx_ + pos) * row_; }
    const float* v(int layer, int64_t pos) const { return v_.data() + (static_cast<int64_t>(layer) * n_ctx_ + pos) * row_; }
    void set_n_past(int64_t n) { n_past_ = n; dirty_ = true; }

    // The paged cache, brought up to date with the mirror.
    KvCache& cache() const {
        if (dirty_) {
            for (int l = 0; l < cache_.n_layer(); ++l)
                for (int64_t p = 0; p < n_ctx_; ++p) cache_.write(l, p, k(l, p), v(l, p));
            cache_.set_n_past(n_past_);
            dirty_ = false;
        }
        return cache_;
    }
    operator KvCache&() const { return cache(); }  // NOLINT: implicit on purpose

private:
    mutable KvCache cache_;
    int n_ctx_;
    int64_t row_;
    int64_t n_past_ = 0;
    std::vector<float> k_, v_;
    mutable bool dirty_ = true;
};

}  // namespace sl::test
