// MSA's per-block index summaries of one layer's keys: for every KV head and every block of B
// positions, the channel-wise min and max of the keys (Quest bounds) and their mean, plus the largest
// |k| component (used to size the rounding slack of the bounds). Blocks are full, or the partial last
// block.
//
// With a RopeShift (MSA position remapping, rope_shift.h) it also keeps the same summaries of the
// block-relative keys k^ = R(-b*B) k (each key as if its block began at position 0), which score
// far blocks at their remapped distance for every block with one rotation per query.
//
// Maintained incrementally by its owner (MsaAttention): update() re-summarizes the blocks that hold
// positions [from, to) from the cache, and forgets blocks at or beyond `to`.
// Threading: update() writes; the accessors may be called from many threads while nobody updates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/attention/rope_shift.h"

namespace sl {

class KvCache;
class ThreadPool;

class BlockIndex {
public:
    BlockIndex(int block_size, int n_kv_head, int head_dim, RopeShift relative = {});

    int block_size() const { return block_; }
    int n_kv_head() const { return n_kv_head_; }
    int head_dim() const { return head_dim_; }

    // Positions [0, n_tokens()) are summarized, in n_blocks() = ceil(n_tokens / B) blocks.
    int64_t n_tokens() const { return n_tokens_; }
    int64_t n_blocks() const { return (n_tokens_ + block_ - 1) / block_; }
    // Tokens in block b (B, or fewer for the last block).
    int block_tokens(int64_t b) const;

    // Re-summarizes every block holding a position in [from, to) from layer `layer` of `kv` (whole
    // blocks, from their first position, up to `to`); afterwards n_tokens() == to.
    // 0 <= from <= n_tokens(), from <= to; positions [0, to) must be valid in kv. With a pool, many
    // blocks at once (the first call after a restore summarizes the whole context) are split over
    // its threads; the summaries are the same either way.
    void update(const KvCache& kv, int layer, int64_t from, int64_t to, ThreadPool* pool = nullptr);
    void clear() { n_tokens_ = 0; }
    // Forgets positions [n, n_tokens()) (the context was cut back to n): the next update() from n
    // re-summarizes the block holding n whole.
    void truncate(int64_t n) { n_tokens_ = std::clamp<int64_t>(n, 0, n_tokens_); }

    // Summaries of block b, KV head h: head_dim floats each.
    const float* kmin(int64_t b, int h) const { return summary(b, h); }
    const float* kmax(int64_t b, int h) const { return summary(b, h) + head_dim_; }
    const float* kmean(int64_t b, int h) const { return summary(b, h) + 2 * head_dim_; }
    // max over the block's keys and channels of |k| (of head h).
    float kabs_max(int64_t b, int h) const { return absmax_[static_cast<size_t>(h)][static_cast<size_t>(b) * n_sets()]; }

    // Block-relative summaries (has_relative() only): the same of k^ = R(-b*B) k.
    bool has_relative() const { return relative_.active(); }
    const RopeShift& relative() const { return relative_; }
    const float* rkmin(int64_t b, int h) const { return summary(b, h) + 3 * head_dim_; }
    const float* rkmax(int64_t b, int h) const { return summary(b, h) + 4 * head_dim_; }
    const float* rkmean(int64_t b, int h) const { return summary(b, h) + 5 * head_dim_; }
    float rkabs_max(int64_t b, int h) const { return absmax_[static_cast<size_t>(h)][static_cast<size_t>(b) * 2 + 1]; }
    // Block b's keys of head h as k^ (rotated by -b*B) into `out` (block_tokens(b) rows of head_dim).
    void relative_keys(const KvCache& kv, int layer, int h, int64_t b, float* out, std::vector<float>& cs) const;

    // A block's summaries as a saved context holds them (kv_file.h kind 4), floats_per_block()
    // floats: for each KV head, its (sets, 3, head_dim) rows (min, max, mean; then the relative
    // ones), then its `sets` absmax values.
    size_t floats_per_block() const { return static_cast<size_t>(n_kv_head_) * n_sets() * (3 * static_cast<size_t>(head_dim_) + 1); }
    void export_block(int64_t b, float* out) const;
    // Takes blocks [b0, ceil(n / B)) from `in` (export_block's layout, block after block) as the
    // summaries of positions [0, n), those of blocks before b0 kept: afterwards n_tokens() == n,
    // as if update() had summarized them (a restore reads them from the file instead of every
    // key). b0 * B <= n_tokens(), b0 * B < n; throws sl::Error otherwise.
    void import_blocks(int64_t b0, int64_t n, const float* in);

    // The mean keys in saved summaries (kv_file.h kind 4: `blocks` blocks of `floats` f32 each) into
    // `out`, (blocks, n_kv_head, head_dim): with floats = n_kv_head * head_dim the records hold the
    // means alone (a device's save: DeviceRunner::key_means); with export_block's layout (one set,
    // or two with relative summaries) their mean rows. False, nothing written, for another size.
    static bool summary_means(const float* in, int64_t blocks, size_t floats, int n_kv_head, int head_dim, float* out);

    // Bytes of summary per block and KV head (min, max, mean, absmax; twice with relative ones).
    size_t bytes_per_block() const { return n_sets() * (3 * static_cast<size_t>(head_dim_) + 1) * sizeof(float); }
    size_t bytes() const;

private:
    size_t n_sets() const { return relative_.active() ? 2 : 1; }
    const float* summary(int64_t b, int h) const {
        return sums_[static_cast<size_t>(h)].data() + static_cast<size_t>(b) * n_sets() * 3 * static_cast<size_t>(head_dim_);
    }
    static void summarize(const float* keys, int n, size_t d, float* mn, float* absmax);
    static constexpr int64_t kParallelBlocks = 16;  // blocks to update before a pool splits them

    int block_, n_kv_head_, head_dim_;
    RopeShift relative_;
    int64_t n_tokens_ = 0;
    // Per KV head: (n_blocks, sets, 3, head_dim): min, max, mean of k, then (relative) of k^.
    std::vector<std::vector<float>> sums_;
    std::vector<std::vector<float>> absmax_;  // per KV head: (n_blocks, sets)
    std::vector<float> kbuf_, rbuf_, cs_;     // update(): one block's keys as f32, as k^; cos/sin
};

}  // namespace sl
