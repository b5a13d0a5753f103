// The KV cache on the device (the host one is kv_cache.h; kv_transfer.h moves a context between
// them), with a pinned host tier, for MSA's sparse branch: per layer, a
// block table maps logical blocks (B positions of every KV head) to physical blocks of a shared
// device pool; a block can be offloaded to pinned host memory (async device-to-host copy) and
// fetched back (async host-to-device) before the kernels that read it. K and V are bf16.
//
// Layout of a physical block (K and V pools alike): (n_kv_head, B, head_dim) bf16, so
// k_view(layer) is a PagedView with block_stride = n_kv_head * B * head_dim, head_stride = B * head_dim.
//
// Threading and streams: one thread at a time. Every operation is enqueued on the caller's
// `stream`; kernels that read the cache must run on that stream (or after it). A physical block or
// host slot freed by offload / fetch is reused only after its copy has completed (events).
// Errors never throw or abort: the bool calls return false with *error set.
//
// CUDA builds only (SIGHTLINE_HAVE_CUDA): this header includes the CUDA runtime's; the kernels it
// launches (write_paged, msa_key_means) are stateless, in kernels/cuda/msa.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/msa.cuh"

namespace sl {

class DeviceKvCache {
public:
    struct Config {
        int n_layer = 1;
        int n_kv_head = 0;
        int head_dim = 0;             // 64 or 128
        int block_size = 128;         // 64 or 128
        int64_t max_blocks = 0;       // logical blocks per layer (context / block_size, rounded up)
        int64_t device_blocks = 0;    // physical blocks on the device, all layers together
        int64_t host_blocks = 0;      // pinned host slots (0: no host tier)
    };

    // Allocates the pools and tables; null with *error set when CUDA or memory fails.
    static std::unique_ptr<DeviceKvCache> create(const Config& config, std::string* error);
    ~DeviceKvCache();
    DeviceKvCache(const DeviceKvCache&) = delete;
    DeviceKvCache& operator=(const DeviceKvCache&) = delete;

    const Config& config() const { return cfg_; }

    // Writes K and V rows (n, n_kv_head, head_dim) f32 (device) for positions [pos0, pos0 + n) of
    // `layer`, first giving physical blocks to the logical blocks they touch (fetching offloaded ones),
    // and updates the mean keys of those blocks (over their tokens before pos0 + n: appends go in
    // position order).
    bool append(int layer, int64_t pos0, int64_t n, const float* k, const float* v, cudaStream_t stream,
                std::string* error);

    // Stores logical block `block` of `layer` whole from host memory: k and v, (n_kv_head,
    // block_size, head_dim) bf16 each (read_block's layout), its first n_tokens positions valid;
    // gives it a device block first (fetching it when it is on the host tier) and updates its mean
    // key. Asynchronous: `k` / `v` must stay unchanged until `stream` has run the copies (pinned
    // memory makes them truly asynchronous). For restoring a context (kv_transfer.h).
    // keep_mean: the block's mean key stays as it is (a dropped block written back whole: the
    // estimates that picked it keep scoring it alike).
    bool write_block(int layer, int64_t block, const uint16_t* k, const uint16_t* v, int n_tokens, cudaStream_t stream,
                     std::string* error, bool keep_mean = false);

    // Block `block` of `layer`'s mean key made again over its positions before n_kv (a truncate
    // into it: the next append would, but a save before one reads it). Nothing for a block not
    // resident (its mean stays until it is written again).
    bool refresh_mean(int layer, int64_t block, int64_t n_kv, cudaStream_t stream, std::string* error);

    // Moves logical block `block` of `layer` to the host tier (no-op when already there).
    bool offload(int layer, int64_t block, cudaStream_t stream, std::string* error);
    // Brings it back to the device (no-op when resident).
    bool fetch(int layer, int64_t block, cudaStream_t stream, std::string* error);

    // Forgets block `block` of `layer` wherever it is (its device block or host slot freed once the
    // stream's work so far is done): the caller holds its K/V elsewhere (a saved context mapped on
    // the host: the third tier) and writes it back (write_block) before anything reads it. Its
    // mean key stays (estimates cover it; msa_hybrid_select never selects it while not resident).
    // append() refuses to continue a dropped block; read_block() refuses to read one.
    bool drop(int layer, int64_t block, cudaStream_t stream, std::string* error);
    bool dropped(int layer, int64_t block) const;
    // Blocks [b0, b1) of `layer` as a lazy restore leaves them: what they held forgotten (device
    // blocks and host slots freed), each marked dropped with its mean key from `means`, (b1 - b0,
    // n_kv_head, head_dim) bf16 host memory — the caller writes a block back (write_block) before
    // anything reads it, as after drop(). Waits for `stream` (`means` may go on return).
    bool place_dropped(int layer, int64_t b0, int64_t b1, const uint16_t* means, cudaStream_t stream, std::string* error);
    int64_t n_dropped() const { return n_dropped_; }  // blocks marked dropped, every layer

    // As drop, for a block past the context (a truncate): not marked dropped (a dropped one's mark
    // cleared), its next write fresh.
    bool forget(int layer, int64_t block, cudaStream_t stream, std::string* error);
    int64_t free_host_slots() const { return static_cast<int64_t>(free_host_.size() + pending_host_.size()); }

    // Copies logical block `block` of `layer` into host memory: k and v, (n_kv_head, block_size,
    // head_dim) bf16 each (block_elems() values), from the device or the host tier, and waits for
    // the copy (synchronizes `stream`). For saving a context (kv_transfer.h).
    bool read_block(int layer, int64_t block, uint16_t* k, uint16_t* v, cudaStream_t stream, std::string* error) const;
    // Blocks (layer[i], block[i]), i < n, into k + i * stride and v + i * stride (read_block's
    // layout each): every device copy enqueued, `stream` waited for once, then the host tier's
    // copied. Into pinned memory the copies run at the bus's rate. Nothing is copied when one of
    // them is out of range or was never written (false, *error naming it).
    bool read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride,
                     cudaStream_t stream, std::string* error) const;
    int64_t block_elems() const;  // values of K (or V) in one block: n_kv_head * block_size * head_dim

    bool resident(int layer, int64_t block) const;
    bool on_host(int layer, int64_t block) const;
    int64_t free_device_blocks() const { return static_cast<int64_t>(free_dev_.size() + pending_dev_.size()); }

    cuda::PagedView k_view(int layer) const;
    cuda::PagedView v_view(int layer) const;
    // The layer's mean keys (max_blocks, n_kv_head, head_dim) bf16 (msa.cuh's kmean, for
    // msa_hybrid_select; zero for blocks never written). They stay on the device when a block goes
    // to the host tier, so the estimates cover offloaded blocks; but msa_hybrid_select never selects
    // a non-resident block, so a caller that offloads fetches the shortlist first (CudaLlamaRunner's
    // memory tiers: select, fetch the shortlist's host blocks, select again).
    const uint16_t* key_means(int layer) const { return kmean_ + layer * kmean_elems(); }

private:
    struct Pending {
        cudaEvent_t done;
        int64_t slot;
    };
    explicit DeviceKvCache(const Config& c) : cfg_(c) {}
    int64_t kmean_elems() const { return cfg_.max_blocks * cfg_.n_kv_head * cfg_.head_dim; }
    bool take_device_block(int64_t* phys, std::string* error);
    bool take_host_slot(int64_t* slot, std::string* error);
    bool push_pending(std::deque<Pending>& list, int64_t slot, cudaStream_t stream, std::string* error);
    bool set_table(int layer, int64_t block, int32_t phys, cudaStream_t stream, std::string* error);
    bool upload_table(int layer, int64_t b0, int64_t b1, cudaStream_t stream, std::string* error);
    bool check(int layer, int64_t block, std::string* error) const;
    void mark_dropped(size_t i, bool on);  // dropped_[i] and n_dropped_

    Config cfg_;
    uint16_t* k_pool_ = nullptr;  // device
    uint16_t* v_pool_ = nullptr;
    uint16_t* host_pool_ = nullptr;  // pinned: per slot, K block then V block
    int32_t* tables_ = nullptr;      // device (n_layer, max_blocks)
    uint16_t* kmean_ = nullptr;      // device (n_layer, max_blocks, n_kv_head, head_dim) bf16
    std::vector<int32_t> dev_of_;    // host mirror of tables_: physical block or -1
    std::vector<int64_t> host_of_;   // (n_layer, max_blocks): host slot or -1
    std::vector<uint8_t> dropped_;   // (n_layer, max_blocks): dropped (drop) and not written since
    int64_t n_dropped_ = 0;
    std::vector<int64_t> free_dev_, free_host_;
    std::deque<Pending> pending_dev_, pending_host_;
};

}  // namespace sl
