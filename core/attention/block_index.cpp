#include "core/attention/block_index.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"

namespace sl {

BlockIndex::BlockIndex(int block_size, int n_kv_head, int head_dim, RopeShift relative)
    : block_(block_size), n_kv_head_(n_kv_head), head_dim_(head_dim), relative_(std::move(relative)),
      sums_(static_cast<size_t>(std::max(n_kv_head, 0))), absmax_(static_cast<size_t>(std::max(n_kv_head, 0))) {
    if (block_size <= 0 || n_kv_head <= 0 || head_dim <= 0)
        throw Error("block index: invalid shape (block " + std::to_string(block_size) + ", " +
                    std::to_string(n_kv_head) + " KV heads, head dim " + std::to_string(head_dim) + ")");
    if (relative_.active() && relative_.head_dim() != head_dim)
        throw Error("block index: the RoPE shift's head dim differs from the keys'");
}

// min, max, mean (3 rows of d at mn) and the largest |component| of n keys.
void BlockIndex::summarize(const float* keys, int n, size_t d, float* mn, float* absmax) {
    float* mx = mn + d;
    float* mean = mx + d;
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
    *absmax = a;
}

void BlockIndex::relative_keys(const KvCache& kv, int layer, int h, int64_t b, float* out, std::vector<float>& cs) const {
    const int n = block_tokens(b);
    const auto d = static_cast<size_t>(head_dim_);
    const float* keys = kv.k_span(layer, h, b * block_, n, out);
    if (keys != out) std::copy(keys, keys + static_cast<size_t>(n) * d, out);
    relative_.rotate(out, n, head_dim_, -b * block_, cs);
}

int BlockIndex::block_tokens(int64_t b) const {
    return static_cast<int>(std::min<int64_t>(block_, n_tokens_ - b * block_));
}

void BlockIndex::update(const KvCache& kv, int layer, int64_t from, int64_t to, ThreadPool* pool) {
    if (from < 0 || from > n_tokens_ || to < from || to > kv.n_ctx())
        throw Error("block index: bad update range [" + std::to_string(from) + ", " + std::to_string(to) +
                    ") with " + std::to_string(n_tokens_) + " positions summarized");
    if (kv.n_kv_head() != n_kv_head_ || kv.head_dim() != head_dim_)
        throw Error("block index: KV cache shape differs from the index's");
    n_tokens_ = to;
    const int64_t nb = n_blocks();
    const auto d = static_cast<size_t>(head_dim_);
    const size_t sets = n_sets();
    for (int h = 0; h < n_kv_head_; ++h) {
        sums_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb) * sets * 3 * d);
        absmax_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb) * sets);
    }
    // Blocks [b0, b1): each writes only its own summaries; scratch per caller.
    auto run = [&](int64_t b0, int64_t b1, std::vector<float>& kbuf, std::vector<float>& rbuf, std::vector<float>& cs) {
        kbuf.resize(static_cast<size_t>(block_) * d);
        if (sets > 1) rbuf.resize(static_cast<size_t>(block_) * d);
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t p0 = b * block_;
            const int n = block_tokens(b);
            for (int h = 0; h < n_kv_head_; ++h) {
                float* mn = sums_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * sets * 3 * d;
                float* am = absmax_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * sets;
                const float* keys = kv.k_span(layer, h, p0, n, kbuf.data());
                summarize(keys, n, d, mn, am);
                if (sets > 1) {
                    std::copy(keys, keys + static_cast<size_t>(n) * d, rbuf.data());
                    relative_.rotate(rbuf.data(), n, head_dim_, -p0, cs);
                    summarize(rbuf.data(), n, d, mn + 3 * d, am + 1);
                }
            }
        }
    };
    const int64_t first = from / block_;
    if (!pool || pool->size() < 2 || nb - first < kParallelBlocks) {
        run(first, nb, kbuf_, rbuf_, cs_);
        return;
    }
    // Workers must not throw (ThreadPool): a cache page never written is refused here.
    for (int64_t pg = first * block_ / kv.block_size(); pg <= (to - 1) / kv.block_size(); ++pg)
        if (!kv.written(layer, pg))  // not page(): the workers check a restored page, in parallel
            throw Error("block index: layer " + std::to_string(layer) + " page " + std::to_string(pg) + " was never written");
    pool->parallel_for(nb - first, [&](int64_t i0, int64_t i1, int) {
        std::vector<float> kbuf, rbuf, cs;
        run(first + i0, first + i1, kbuf, rbuf, cs);
    }, kParallelBlocks / 2);
}

void BlockIndex::export_block(int64_t b, float* out) const {
    const size_t sets = n_sets(), rows = sets * 3 * static_cast<size_t>(head_dim_);
    for (int h = 0; h < n_kv_head_; ++h) {
        const float* s = summary(b, h);
        out = std::copy(s, s + rows, out);
        const float* a = absmax_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * sets;
        out = std::copy(a, a + sets, out);
    }
}

void BlockIndex::import_blocks(int64_t b0, int64_t n, const float* in) {
    if (b0 < 0 || b0 * block_ > n_tokens_ || b0 * block_ >= n)
        throw Error("block index: cannot take blocks from " + std::to_string(b0) + " of " + std::to_string(n) +
                    " positions with " + std::to_string(n_tokens_) + " summarized");
    n_tokens_ = n;
    const int64_t nb = n_blocks();
    const size_t sets = n_sets(), rows = sets * 3 * static_cast<size_t>(head_dim_);
    for (int h = 0; h < n_kv_head_; ++h) {
        sums_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb) * rows);
        absmax_[static_cast<size_t>(h)].resize(static_cast<size_t>(nb) * sets);
    }
    for (int64_t b = b0; b < nb; ++b)
        for (int h = 0; h < n_kv_head_; ++h) {
            float* s = sums_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * rows;
            std::copy(in, in + rows, s);
            in += rows;
            float* a = absmax_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * sets;
            std::copy(in, in + sets, a);
            in += sets;
        }
}

bool BlockIndex::summary_means(const float* in, int64_t blocks, size_t floats, int n_kv_head, int head_dim, float* out) {
    if (!in || !out || blocks < 0 || n_kv_head < 1 || head_dim < 1) return false;
    const size_t d = static_cast<size_t>(head_dim), dkv = static_cast<size_t>(n_kv_head) * d;
    if (floats == dkv) {
        std::copy(in, in + static_cast<size_t>(blocks) * dkv, out);
        return true;
    }
    size_t sets = 0;  // export_block's: per head (sets, 3, head_dim) rows, then `sets` absmax values
    for (size_t s = 1; s <= 2; ++s)
        if (floats == static_cast<size_t>(n_kv_head) * s * (3 * d + 1)) sets = s;
    if (sets == 0) return false;
    const size_t per_head = sets * (3 * d + 1);
    for (int64_t b = 0; b < blocks; ++b)
        for (int h = 0; h < n_kv_head; ++h) {
            const float* mean = in + static_cast<size_t>(b) * floats + static_cast<size_t>(h) * per_head + 2 * d;
            std::copy(mean, mean + d, out + static_cast<size_t>(b) * dkv + static_cast<size_t>(h) * d);
        }
    return true;
}

size_t BlockIndex::bytes() const {
    return static_cast<size_t>(n_blocks()) * static_cast<size_t>(n_kv_head_) * bytes_per_block();
}

}  // namespace sl
