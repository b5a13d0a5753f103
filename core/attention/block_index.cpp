#include "core/attention/block_index.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/kvcache/kv_cache.h"
#include "core/util/error.h"

namespace sl {

BlockIndex::BlockIndex(int block_size, int n_kv_head, int head_dim)
    : block_(block_size), n_kv_head_(n_kv_head), head_dim_(head_dim),
      sums_(static_cast<size_t>(std::max(n_kv_head, 0))), absmax_(static_cast<size_t>(std::max(n_kv_head, 0))) {
    if (block_size <= 0 || n_kv_head <= 0 || head_dim <= 0)
        throw Error("block index: invalid shape (block " + std::to_string(block_size) + ", " +
                    std::to_string(n_kv_head) + " KV heads, head dim " + std::to_string(head_dim) + ")");
}

int BlockIndex::block_tokens(int64_t b) const {
    return static_cast<int>(std::min<int64_t>(block_, n_tokens_ - b * block_));
}

void BlockIndex::update(const KvCache& kv, int layer, int64_t from, int64_t to) {
    if (from < 0 || from > n_tokens_ || to < from || to > kv.n_ctx())
        throw Error("block index: bad update range [" + std::to_string(from) + ", " + std::to_string(to) +
                    ") with " + std::to_string(n_tokens_) + " positions summarized");
    if (kv.n_kv_head() != n_kv_head_ || kv.head_dim() != head_dim_)
        throw Error("block index: KV cache shape differs from the index's");
    n_tokens_ = to;
    const int64_t nb = n_blocks();
    const auto d = static_cast<size_t>(head_dim_);
    for (int h = 0; h < n_kv_head_; ++h) {
        sums_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb) * 3 * d);
        absmax_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb));
    }
    kbuf_.resize(static_cast<size_t>(block_) * d);
    for (int64_t b = from / block_; b < nb; ++b) {
        const int64_t p0 = b * block_;
        const int n = block_tokens(b);
        for (int h = 0; h < n_kv_head_; ++h) {
            float* mn = sums_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * 3 * d;
            float* mx = mn + d;
            float* mean = mx + d;
            const float* keys = kv.k_span(layer, h, p0, n, kbuf_.data());
            std::copy(keys, keys + d, mn);
            std::copy(keys, keys + d, mx);
            std::fill(mean, mean + d, 0.0f);
            for (int j = 0; j < n; ++j) {
                const float* k = keys + static_cast<size_t>(j) * d;
                for (size_t i = 0; i < d; ++i) {
                    mn[i] = std::min(mn[i], k[i]);
                    mx[i] = std::max(mx[i], k[i]);
                    mean[i] += k[i];
                }
            }
            float a = 0.0f;
            const float inv = 1.0f / static_cast<float>(n);
            for (size_t i = 0; i < d; ++i) {
                mean[i] *= inv;
                a = std::max(a, std::max(std::fabs(mn[i]), std::fabs(mx[i])));
            }
            absmax_[static_cast<size_t>(h)][static_cast<size_t>(b)] = a;
        }
    }
}

size_t BlockIndex::bytes() const {
    return static_cast<size_t>(n_blocks()) * static_cast<size_t>(n_kv_head_) * bytes_per_block();
}

}  // namespace sl
