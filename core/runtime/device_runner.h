// The seam between a Session and a device that runs the whole model (CudaLlamaRunner on CUDA):
// what a Session asks of it. A Session with a DeviceRunner keeps its host KV cache as a mirror of
// the device's context (filled when saving, loaded when restoring: core/kvcache/kv_transfer.h) and
// hands MSA selections back to its MsaAttention (citations).
//
// Errors: sl::DeviceError when the device failed (the Session then goes on on the CPU, rebuilding
// the context from its mirror and its tokens); sl::Error for a bad call (a full context, a token
// outside the vocabulary). One thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/kvcache/kv_file.h"

namespace sl {

class KvCache;
class KvPageSource;
struct Selection;

class DeviceRunner {
public:
    virtual ~DeviceRunner() = default;
    // Runs tokens[0..n) at positions n_past().. and writes the last one's logits (n_vocab floats,
    // host memory); positions whose token is LlamaModel::kEmbeddingToken take their row from
    // `embeddings` (n, d_model), when given.
    virtual void forward(const int32_t* tokens, int n, float* logits, const float* embeddings = nullptr) = 0;
    virtual int64_t n_past() const = 0;
    virtual void reset() = 0;              // forgets the context
    virtual void truncate(int64_t n) = 0;  // keeps the first n positions (n <= n_past())
    // Positions [from, n_past()) of every layer into `dst`, then dst's n_past is n_past().
    virtual void download_kv(KvCache& dst, int64_t from) const = 0;
    // A save straight from the device: calls `write` once with the context's pages in `mirror`'s
    // format (kv_transfer.h KvStorePages: positions [from, n_past()) from the device, a page's
    // positions before `from` from `mirror`, which holds them) and returns true; false, calling
    // nothing, when this runner cannot (the caller then mirrors with download_kv and saves from the
    // host cache). What `write` throws passes through; the context is unchanged either way.
    virtual bool save_pages(const KvCache& /*mirror*/, int64_t /*from*/,
                            const std::function<void(KvPageSource&)>& /*write*/) const {
        return false;
    }
    // Replaces positions [from, n_past()) of the context with positions [from, n) of `src`: the
    // first `from` positions stay (from <= n_past(); 0 replaces the whole context), then n_past()
    // is n.
    virtual void upload_kv(const KvCache& src, int64_t from, int64_t n) = 0;
    // A lazy restore (MSA reads a few blocks a query): as upload_kv(src, 0, n), but whole blocks
    // are not sent: each takes its mean key from `means` and stays in `src` (the backing, as after
    // set_backing(&src, n)) until a selection, the window or an append needs it, and is read from
    // there then (kv_transfer.h kv_block_bf16: a mapped page is checked on that first read).
    // means(layer): that layer's mean keys in blocks of `means_block` positions, (ceil(n /
    // means_block), n_kv_head, head_dim) f32 (empty: none). Returns false having changed nothing
    // when this runner does not take it (dense attention, src's pages not its blocks, a layer
    // without means, blocks it cannot regroup): the caller uploads then. Throws as upload_kv.
    virtual bool place_kv(const KvCache& /*src*/, int64_t /*n*/, int /*means_block*/,
                          const std::function<std::vector<float>(int layer)>& /*means*/) {
        return false;
    }
    // After place_kv: brings back up to max_blocks of the blocks still in the backing (layer after
    // layer, in block order) into free device room, never moving another block out, so that later
    // steps find them resident (and, once none is out, run without a look at each layer's
    // shortlist). For idle time between questions. Under a device budget nothing (its room is for
    // the questions' working sets; the blocks stay in the file until a selection picks them).
    // Returns how many came back (0: none out, no room, a budget, or a runner that never places).
    // Throws DeviceError; the pages read are checked as a step's are.
    virtual int64_t fill_placed(int64_t /*max_blocks*/) { return 0; }
    // The context's mean keys as the runner holds them, for a save (kv_file.h kind 4 records of
    // the means alone, which place_kv takes back): blocks of the runner's own size, n_kv_head x
    // head_dim floats each, positions [0, n_past()); none (get empty) when it keeps none.
    virtual KvBlockSummaries key_means(int /*layer*/) const { return {}; }
    // Positions [0, n) of the context are also in `mirror` (the session's host copy: RAM pages or
    // pages mapped from a saved file) until the next set_backing, or a truncate or reset below n
    // (which lower it): a runner short of memory may drop its own copy of blocks wholly inside and
    // read them back from there (kv_transfer.h kv_block_bf16). `mirror` outlives the runner.
    virtual void set_backing(const KvCache* /*mirror*/, int64_t /*n*/) {}
    // MSA: with it on, calls of one query record their selections with the attention mass of each
    // token; recorded_selections(layer) gives them as the CPU's MsaAttention makes them (empty
    // when the last call recorded nothing).
    virtual void set_record_mass(bool on) = 0;
    virtual std::vector<Selection> recorded_selections(int layer) const = 0;
};

}  // namespace sl
