#include "core/attention/dense_attention.h"

#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "kernels/cpu/ops.h"

namespace sl {

void DenseAttention::forward(const AttentionCall& c, const KvCache& kv, ThreadPool& pool) {
    const int group = c.n_head / c.n_kv_head;
    const int64_t items = static_cast<int64_t>(c.n_tokens) * c.n_head;
    const int64_t max_keys = c.pos0 + c.n_tokens;
    // One (token, head) pair per item; scratch for the scores is per thread.
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
    pool.parallel_for(items, [&](int64_t begin, int64_t end, int t) {
        std::vector<float>& scores = scratch[static_cast<size_t>(t)];
        scores.resize(static_cast<size_t>(max_keys));
        for (int64_t it = begin; it < end; ++it) {
            const int64_t ti = it / c.n_head;
            const int h = static_cast<int>(it % c.n_head);
            const int g = h / group;
            const float* q = c.q + (ti * c.n_head + h) * c.head_dim;
            float* out = c.out + (ti * c.n_head + h) * c.head_dim;
            const int64_t n_keys = c.pos0 + ti + 1;
            for (int64_t j = 0; j < n_keys; ++j)
                scores[static_cast<size_t>(j)] =
                    kernels::dot_f32(q, kv.k(c.layer, j) + static_cast<int64_t>(g) * c.head_dim, c.head_dim) * c.scale;
            kernels::softmax(scores.data(), n_keys);
            for (int d = 0; d < c.head_dim; ++d) out[d] = 0.0f;
            for (int64_t j = 0; j < n_keys; ++j)
                kernels::axpy_f32(out, scores[static_cast<size_t>(j)],
                                  kv.v(c.layer, j) + static_cast<int64_t>(g) * c.head_dim, c.head_dim);
        }
    });
}

}  // namespace sl
