// Moving a context between the host KV cache (kv_cache.h) and a device's (device_kv_cache.h), so
// that a context that ran on the GPU saves to the host's format (.slkv, kv_file.h) and a saved
// context, from either engine, restores onto the GPU.
//
// The device is seen through KvBlockStore: blocks of B positions holding, for K and for V,
// (n_kv_head, B, head_dim) bf16 — DeviceKvCache's layout. Conversions: bf16 -> f32 (exact) -> the
// host storage type on the way down (exact for F32; for F16 too while |x| < 65504 and x is not
// below f16's subnormal range; Int8 quantizes as any write does); host -> f32 -> bf16 (round to
// nearest even) on the way up, as the device rounds K/V it computes itself.
//
// Threading: called from one thread, no reader of the host cache in flight (KvCache's writer
// contract); the store's calls are all made on that thread and may block on the device. Both
// convert blocks on worker threads of their own (kv_download writing rows of pages it reserved).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/kvcache/kv_file.h"

namespace sl {

class KvCache;
class ThreadPool;

class KvBlockStore {
public:
    virtual ~KvBlockStore() = default;
    virtual int block_size() const = 0;  // B: positions per block
    // K and V of logical block `block` of `layer` into host memory, (n_kv_head, B, head_dim) bf16
    // each; positions of the block the context has not reached hold anything. Throws sl::Error
    // naming what failed.
    virtual void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) = 0;
    // Host memory for `elems` bf16 values that read_blocks fills at full speed (pinned on a device:
    // the copies run asynchronously at the bus's rate); plain memory by default.
    using HostBuffer = std::unique_ptr<uint16_t[], void (*)(uint16_t*)>;
    virtual HostBuffer host_buffer(size_t elems);
    // Blocks (layer[i], block[i]), i < n, into k + i * stride and v + i * stride (read_block's
    // layout each), waited for once. Default: read_block after read_block.
    virtual void read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride);
    // Stores positions [pos0, pos0 + n) of `layer` from host rows (n, n_kv_head, head_dim) f32,
    // K and V; calls come in position order per layer. Throws sl::Error naming what failed.
    virtual void append_rows(int layer, int64_t pos0, int64_t n, const float* k, const float* v) = 0;
    // Whether write_block is there (half the bytes of append_rows, and no per-row work).
    virtual bool takes_blocks() const { return false; }
    // Stores block `block` of `layer` whole, in read_block's layout: its first n_tokens positions
    // valid (the rest zero). Calls come in position order per layer, as append_rows's. The copy
    // may still be in flight on return (`k` / `v` may be reused at once: the store stages them);
    // flush() waits for every one.
    virtual void write_block(int /*layer*/, int64_t /*block*/, const uint16_t* /*k*/, const uint16_t* /*v*/,
                             int /*n_tokens*/) {}
    virtual void flush() {}
    // Whole blocks converted straight into the store's staging (pinned on a device), which saves
    // write_block's copy into it on the calling thread. stage(n), n <= stage_capacity(): room for n
    // blocks, each K then V in read_block's layout (2 * n_kv_head * B * head_dim values), once the
    // copies that last read that room are done (it may wait; two rooms alternate on a device, so
    // that one batch converts while the last one's copies run); null when the store has none.
    // write_staged(i, ...) sends block i of the last stage() as write_block would, asynchronously
    // (flush() waits for every one).
    virtual int stage_capacity() const { return 0; }
    virtual uint16_t* stage(int /*n*/) { return nullptr; }
    virtual void write_staged(int /*i*/, int /*layer*/, int64_t /*block*/, int /*n_tokens*/) {}
};

// Copies positions [from, to) of every layer from `src` into `dst` (whose n_layer, n_kv_head and
// head_dim the store shares), then sets dst's n_past to `to`. 0 <= from <= to <= dst.n_ctx();
// positions before `from` are dst's already (an earlier copy). Throws sl::Error on bad ranges.
// Blocks are read 32 at a time on the calling thread and stored on `threads` threads (0: the
// machine's cores) into host pages reserved first (KvCache::reserve; serially under a RAM budget).
void kv_download(KvBlockStore& src, KvCache& dst, int64_t from, int64_t to, int threads = 0);

// Block `block` of `layer` of `src` as a device holds it (src's pages must be the store's blocks:
// same B): K and V, (n_kv_head, B, head_dim) bf16 each, its first n positions (1 <= n <= B) from
// the page (written), the rest zero. `scratch`: B * head_dim floats. Reads `src` only: any thread.
void kv_block_bf16(const KvCache& src, int layer, int64_t block, int n, uint16_t* k, uint16_t* v, float* scratch);

// Mean keys of a context's blocks of B positions from those of its blocks of S positions (B a
// multiple of S) over positions [0, n): each the token-weighted mean of the S blocks it holds (the
// last ones partial), as a device averages its blocks (a lazy restore's estimates: the saved
// block summaries instead of every key). means: (ceil(n / S), dim) -> (ceil(n / B), dim). Throws
// sl::Error when the sizes do not fit.
std::vector<float> kv_regroup_means(std::span<const float> means, int S, int64_t n, int B, int dim);

// A save's block summaries (kv_file.h KvBlockSummaries) of mean keys a device holds as bf16 rows,
// (ceil(n / block_size), dim), read back only from the first block the writer asks for on: a save
// that appends to its file asks for its new blocks alone (a prefill saving every 2,048 tokens to a
// million would otherwise read every layer's whole table, 94 MB, at each save). fetch(b0, b1, dst)
// copies rows [b0, b1) into dst ((b1 - b0) * dim values) or throws sl::Error (DeviceError) naming
// what failed; it is called on the writer's thread, at most once per call of get for a block
// before the first one fetched (blocks asked in order: once in all).
KvBlockSummaries kv_lazy_bf16_summaries(int64_t n, int block_size, int dim,
                                        std::function<void(int64_t b0, int64_t b1, uint16_t* dst)> fetch);

// Appends positions [from, to) of every layer of `src` (to <= src.n_past()) to `dst`: whole blocks
// through write_block when the store takes them and src's pages are the store's blocks (same B),
// the rest (a partial first block, or everything otherwise) through append_rows, at most `chunk`
// positions a call; then flush(). Whole blocks go into the store's staging (stage / write_staged)
// when it has room for a batch. The same bf16 values either way. Whole blocks are converted 32
// at a time on `threads` threads (0: the machine's cores; a restore at a million tokens converts
// 23 GB) and handed to the store on the calling thread, in order. Throws sl::Error on bad ranges.
void kv_upload(const KvCache& src, KvBlockStore& dst, int64_t from, int64_t to, int64_t chunk = 512, int threads = 0);

// The host pages of a context a device holds, for a save straight to the file (write_kv_file /
// append_kv_file with a KvPageSource): no host copy of the context is made (at a million tokens
// 23 GB). Pages in `layout`'s format (its storage type and page size; the store's blocks must be
// its pages, same B) of positions [0, to), where `layout` (the host mirror) holds the context's
// first `from` positions: a page wholly before `from` is the mirror's own (hashed on the calling
// thread; under a RAM budget the maps' resident pages dropped every 256); from the page holding
// `from` on, positions [from, to) come from `src` and the page's earlier positions from the
// mirror's page — byte for byte what kv_download would leave in the mirror (a partial last page's
// tail as the mirror's page had it: zero for a new page). Blocks from `from` on are read a batch at
// a time (every layer of up to 32 blocks: ~64 MiB, or one block when a block of every layer is
// more; read_blocks into the store's host_buffer) on the calling thread, then converted and hashed
// on `threads` threads (0: the machine's cores). Pages may be asked for in any order (the file's
// order reads each batch once); a page is valid until the next call. Throws sl::Error on bad
// ranges, another block size, a mirror page missing; what the store throws (DeviceError) passes
// through.
class KvStorePages final : public KvPageSource {
public:
    // max_batch: blocks read per batch at most (tests).
    KvStorePages(KvBlockStore& src, const KvCache& layout, int64_t from, int64_t to, int threads = 0, int64_t max_batch = 32);
    ~KvStorePages() override;
    KvPage page(int layer, int64_t block) override;
    int64_t batch_blocks() const { return batch_; }  // blocks read per batch (every layer)
    int64_t batches_read() const { return batches_; }

private:
    void load(int64_t first);

    KvBlockStore& src_;
    const KvCache& kv_;
    int64_t from_, to_, nb_, batch_ = 1;
    int64_t first_ = -1, count_ = 0, batches_ = 0;
    size_t elems_ = 0;  // bf16 values of K (or V) in one block
    KvBlockStore::HostBuffer k_, v_;       // (batch, n_layer) blocks, from src.host_buffer()
    std::vector<int> layer_;               // the batch's blocks, as read_blocks takes them
    std::vector<int64_t> block_;
    std::vector<uint64_t> hash_;           // (batch, n_layer)
    std::vector<uint8_t> pages_;           // (batch, n_layer) pages
    std::vector<std::vector<float>> scratch_;  // per worker: K then V rows of one head
    int64_t mirror_pages_ = 0;                 // handed out from the mirror
    std::unique_ptr<ThreadPool> pool_;
};

}  // namespace sl
