// CudaLlamaRunner's state (cuda_backend_model.h), shared by the files that implement it: the
// forward pass and the memory tiers (cuda_backend_model.cpp) and the moves of a context between
// the device and the host (cuda_runner_transfer.cpp). Private to them; CUDA builds only.
#pragma once

#if SIGHTLINE_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <system_error>
#include <vector>

#include "core/kvcache/device_kv_cache.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_transfer.h"
#include "core/model/llama_model.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/runtime/linear.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/msa.cuh"
#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/quant.cuh"

namespace sl {

namespace cuda_runner {

// A failed runtime call's error stays the thread's last error, which the next launch's
// cudaGetLastError() would report as its own: cleared here (sticky ones come back anyway).
inline void ck(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    throw DeviceError("CUDA model: " + cuda::cuda_error_text(what, e));
}


// The MSA the runner runs: MsaConfig's fields the device takes (cuda_msa_lacks says which).
struct DeviceMsa {
    bool enabled = false;
    int top_k = 16;            // 1..64: the top-k, the local block and the sink included
    int n_cand = 16;           // the hybrid shortlist: the forced blocks + factor x (top_k - forced)
    cuda::MsaForce force;      // the sink and the local window (its blocks on top of the top-k)
    cuda::MsaGrowth growth;    // mass-adaptive growth (mass 0: none); scale set per model
    // Position remapping (MsaConfig::positions = Remap): the window W (0: off) and the block angles
    // (max_blocks, rope_dim / 2, 2) on the device (msa_remap_table).
    int64_t remap_window = 0;
    float* rel = nullptr;
    // Blocks a selection row holds: the top-k, the window and the growth's room.
    int width() const { return top_k + force.window + (growth.mass > 0 ? growth.room : 0); }
    // The top-k, the window and the growth are applied after the hybrid selection (a second table).
    bool extends() const { return force.window > 0 || growth.mass > 0; }
};

// Tokens per KV block on the device (DeviceKvCache's blocks, the remap angle table's).
inline constexpr int kDeviceBlock = 128;

// Tokens from which a call's linear layers run as GEMMs (cuBLAS) instead of matrix-vector passes
// (4 tokens per pass over the weights).
inline constexpr int kGemmTokens = 16;

// A device weight matrix: d = ne1 rows of ne0 values in `type`.
struct DevMatrix {
    kernels::TensorType type = kernels::TensorType::F32;
    const void* data = nullptr;
    int64_t ne0 = 0, ne1 = 0;
};

}  // namespace cuda_runner

using cuda_runner::ck;
using cuda_runner::DeviceMsa;
using cuda_runner::DevMatrix;
using cuda_runner::kDeviceBlock;
using cuda_runner::kGemmTokens;

struct CudaLlamaRunner::Impl {
    const LlamaModel& model;
    int n_ctx = 0;
    int64_t n_past = 0;
    int64_t bytes = 0;
    // The pinned host tier's share of the process-wide default (cuda_backend_model.cpp,
    // default_pinned_kv_bytes), given back when the runner goes.
    int64_t pinned_share = 0;
    std::function<void(int64_t)> release_pinned;
    cudaStream_t stream = nullptr;
    std::vector<std::pair<void*, int64_t>> allocations;  // with their sizes (device_bytes)
    std::map<const void*, DevMatrix> uploaded;  // by host data pointer (tied output shares tok_embd)
    struct Layer {
        const float *attn_norm = nullptr, *ffn_norm = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr;
        DevMatrix wq, wk, wv, wo, gate, up, down;
    };
    std::vector<Layer> layers;
    const float* output_norm = nullptr;
    const float* rope_freq_factors = nullptr;  // (rope_dim / 2), or null
    DevMatrix output;
    std::unique_ptr<DeviceKvCache> cache;
    // Scratch, grown to the largest batch.
    int cap = 0;
    float *x = nullptr, *xn = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *att = nullptr, *o = nullptr,
          *g = nullptr, *u = nullptr, *logits = nullptr, *ws = nullptr;
    int32_t* sel = nullptr;
    int64_t ws_floats = 0, sel_ints = 0;
    // MSA: index queries (cap, n_kv_head, head_dim), the hybrid index's workspace, and what the
    // last call selected (sel holds one (tasks, top_k) table per layer when it was sparse).
    DeviceMsa msa;
    float* iq = nullptr;
    // Remap: the call's far rows R(W - p) q, their group means, and the rotation W - p per query.
    float* q_far = nullptr;
    float* iq_far = nullptr;
    int64_t* far_pos = nullptr;
    std::vector<int64_t> host_far_pos;
    void* hws = nullptr;
    int64_t hws_bytes = 0;
    int32_t* top_sel = nullptr;  // the hybrid's top-k (tasks, top_k) before the window and the growth
    int64_t top_sel_ints = 0;
    void* xws = nullptr;         // msa_extend_selection's workspace
    int64_t xws_bytes = 0;
    int64_t last_tasks = 0;
    int last_top_k = 0;
    // Citations: token masses (n_layer, n_kv_head, top_k, B) of a call of one query, and what the
    // last such call brought to the host (rec_top_k 0: nothing recorded).
    bool record = false;
    bool in_split = false;  // forward() is running the first part of a call split for its last query
    float* tmass = nullptr;
    int64_t tmass_floats = 0;
    int rec_top_k = 0;
    int64_t rec_pos0 = 0;
    bool rec_shared_sel = false;      // one selection table for every layer (a dense call)
    std::vector<int32_t> rec_sel;     // (n_layer or 1, n_kv_head, top_k)
    std::vector<float> rec_mass;      // (n_layer, n_kv_head, top_k, B)
    std::vector<float> host_x;
    // Memory tiers (an MSA runner with a device KV budget): blocks past the budget wait in the
    // pinned host tier. Appended and shortlisted blocks are stamped when touched; the least recently
    // touched leave the device first (make_room); a shortlisted block on the host is fetched and the
    // selection made again (select_tiered), so the result is the all-resident one.
    bool tiered = false;
    // A lazy restore (place_kv) left blocks in the saved context: the selections bring the ones
    // they pick back (as the tiers' do) while any is still out (tiers(): either; once none is,
    // decode runs without the per-layer look at the shortlist), until a reset.
    bool lazy = false;
    bool tiers() const { return tiered || (lazy && cache->n_dropped() > 0); }
    int64_t placed = 0;
    uint64_t tick = 0;
    std::vector<uint64_t> stamp;                 // (n_layer, max_blocks)
    std::set<std::pair<uint64_t, int64_t>> lru;  // resident blocks: (stamp, layer * max_blocks + block)
    std::vector<int32_t> host_cand;              // a layer's shortlist, downloaded
    int64_t fetched = 0, evicted = 0;

    // The third tier: positions [0, backed) are also in `backing` (the session's host copy, pages
    // mapped from a saved context; DeviceRunner::set_backing). With the host tier bounded (a host
    // KV budget) and full, blocks wholly inside leave the device without a copy
    // (DeviceKvCache::drop) and come back converted from there (refill). host_lru: the blocks on
    // the host tier, by when they went there (the oldest droppable one gives its slot first).
    const KvCache* backing = nullptr;
    int64_t backed = 0;
    int64_t refilled = 0, dropped = 0;
    std::set<std::pair<uint64_t, int64_t>> host_lru;
    uint16_t* refill_stage = nullptr;  // pinned, kStageBlocks (K, V) pairs; reused after a stream sync
    int refill_used = 0;
    std::vector<float> refill_scratch;           // per refill thread: one head's rows of a block
    std::unique_ptr<ThreadPool> refill_pool;     // made on the first refill of several blocks
    bool refill_serial = false;                  // its threads could not be started
    // One past the last position written to the cache (appends and restored blocks; a truncate or
    // reset cuts it): no block holds a position of the context at or past it.
    int64_t written = 0;
    // Whether block b of `layer` may leave the device without a copy: the backing holds every
    // position of it that was written (a partial last block too, unless this call appended to it).
    bool droppable(int layer, int64_t b) const {
        const int64_t B = cache->config().block_size;
        return backing && backing->block_size() == B && backing->n_kv_head() == cache->config().n_kv_head &&
               backing->head_dim() == cache->config().head_dim && b * B < backed &&
               std::min((b + 1) * B, written) <= backed && backing->written(layer, b);
    }

    int64_t key(int layer, int64_t b) const { return static_cast<int64_t>(layer) * cache->config().max_blocks + b; }
    void touch(int layer, int64_t b) {
        if (!tiers()) return;
        const int64_t k = key(layer, b);
        uint64_t& st = stamp[static_cast<size_t>(k)];
        lru.erase({st, k});
        st = ++tick;
        lru.insert({st, k});
    }
    // Offloads least recently touched blocks until `need` device blocks are free, never one whose
    // key is in `keep` (sorted). With the host tier full: the least recently touched block the
    // backing holds is dropped instead, or, when none on the device is, one on the host gives its
    // slot; when neither tier holds a saved block, that is an error.
    void make_room(int64_t need, const std::vector<int64_t>& keep) {
        std::string error;
        const int64_t mb = cache->config().max_blocks;
        auto kept = [&](int64_t k) { return std::binary_search(keep.begin(), keep.end(), k); };
        while (cache->free_device_blocks() < need) {
            auto it = lru.begin();
            while (it != lru.end() && kept(it->second)) ++it;
            if (it == lru.end())
                throw DeviceError("CUDA model: the device KV budget (" + std::to_string(cache->config().device_blocks) +
                            " blocks) cannot hold this call's " + std::to_string(keep.size()) + " blocks of one layer");
            if (cache->free_host_slots() == 0) {
                // The least recently used saved block of either tier leaves: one on the device is
                // dropped (the room is made), one on the host gives its slot to `it`.
                auto saved = [&](const std::pair<uint64_t, int64_t>& e) {
                    return !kept(e.second) && droppable(static_cast<int>(e.second / mb), e.second % mb);
                };
                const auto d = std::find_if(it, lru.end(), saved);
                const auto h = std::find_if(host_lru.begin(), host_lru.end(), saved);
                if (d == lru.end() && h == host_lru.end())
                    throw DeviceError("CUDA model: the device and host KV tiers are full (" +
                                      std::to_string(cache->config().device_blocks) + " + " +
                                      std::to_string(cache->config().host_blocks) +
                                      " blocks) and none of their blocks is in a saved context: save the context, or "
                                      "raise the host KV budget (--kv-budget)");
                const bool device_side = h == host_lru.end() || (d != lru.end() && d->first < h->first);
                const int64_t k = device_side ? d->second : h->second;
                if (!cache->drop(static_cast<int>(k / mb), k % mb, stream, &error)) throw DeviceError("CUDA model: " + error);
                ++dropped;
                if (device_side) {
                    lru.erase(d);
                    continue;
                }
                host_lru.erase(h);
            }
            const int64_t k = it->second;
            if (!cache->offload(static_cast<int>(k / mb), k % mb, stream, &error)) throw DeviceError("CUDA model: " + error);
            host_lru.insert({stamp[static_cast<size_t>(k)], k});
            lru.erase(it);  // after the offload: a failed one leaves the block resident and listed
            ++evicted;
        }
    }
    // Forgets the blocks wholly at or past position n (a truncate or reset): their device blocks
    // and host slots freed without a copy, so that stale blocks never fill a bounded host tier,
    // and none marked dropped. Throws nothing: a CUDA error is kept for the next forward call
    // (`failed`), which then fails as a DeviceError (the session goes on on the CPU).
    std::string failed;
    bool broken = false;
    void forget_from(int64_t n) noexcept {
        if (!tiered && !lazy) return;
        try {
            const int64_t B = cache->config().block_size, mb = cache->config().max_blocks;
            const int64_t first = (n + B - 1) / B;
            std::string error;
            for (auto* list : {&lru, &host_lru})
                for (auto it = list->begin(); it != list->end();) {
                    const int64_t b = it->second % mb;
                    if (b < first) {
                        ++it;
                        continue;
                    }
                    if (!cache->forget(static_cast<int>(it->second / mb), b, stream, &error) && failed.empty())
                        failed = "CUDA model: " + error;
                    it = list->erase(it);
                }
            for (int l = 0; l < cache->config().n_layer; ++l)
                for (int64_t b = first; b < mb; ++b)
                    if (cache->dropped(l, b)) cache->forget(l, b, stream, nullptr);  // the flag only
        } catch (const std::exception& e) {
            broken = true;
            try {
                if (failed.empty()) failed = std::string("CUDA model: ") + e.what();
            } catch (...) {  // (no memory for the message: `broken` says it)
            }
        }
    }
    // Throws the DeviceError a truncate's or reset's cleanup kept (forget_from): the runner's
    // bookkeeping may have lost blocks, so nothing goes on on it.
    void check_failed() const {
        if (broken || !failed.empty())
            throw DeviceError(failed.empty() ? std::string("CUDA model: a truncate's cleanup failed") : failed);
    }
    // Blocks `blocks` of `layer`, dropped, back on the device from the backing: their positions
    // in the context (the backing's, and written) converted to bf16 in the pinned refill staging
    // — a stage of up to kStageBlocks at a time, on the refill pool's threads when there are
    // several (the first question after a lazy restore reads thousands), the pages checked there
    // as they are read — and written in order, room made first without touching `keep` (sorted).
    // Nothing for a block the context holds none of (the next append writes it afresh).
    void refill(int layer, const std::vector<int64_t>& blocks, const std::vector<int64_t>& keep) {
        const int64_t B = cache->config().block_size;
        const auto elems = static_cast<size_t>(cache->block_elems());
        struct Job {
            int64_t b;
            int valid;
        };
        std::vector<Job> jobs;
        for (int64_t b : blocks) {
            // Its positions in the context before this call (n_past: `written` already counts what
            // an earlier layer of this call appended); a dropped block's were all in the backing
            // when it left, and a truncate since cut both to the context.
            const int64_t valid = std::min(B, n_past - b * B);
            if (valid <= 0) continue;
            if (!backing || backing->block_size() != B || b * B + valid > backed || !backing->written(layer, b))
                throw DeviceError("CUDA model: block " + std::to_string(b) + " of layer " + std::to_string(layer) +
                                  " left the device but the host copy of the context no longer holds it");
            jobs.push_back({b, static_cast<int>(valid)});
        }
        if (jobs.empty()) return;
        if (!refill_stage) {
            void* p = nullptr;
            ck(cudaHostAlloc(&p, static_cast<size_t>(kStageBlocks) * 2 * elems * 2, cudaHostAllocDefault),
               "cudaHostAlloc (refill staging)");
            refill_stage = static_cast<uint16_t*>(p);
        }
        const size_t scratch_floats = static_cast<size_t>(B) * cache->config().head_dim;
        std::string error;
        // Copies from the staging all done already (the selection's look at its shortlist waited
        // for the stream): the whole staging is free without a wait.
        if (refill_used > 0) {
            const cudaError_t q = cudaStreamQuery(stream);
            if (q == cudaSuccess) refill_used = 0;
            else if (q == cudaErrorNotReady) cudaGetLastError();  // still busy: not an error for the next launch
            else ck(q, "refill");
        }
        for (size_t i = 0; i < jobs.size();) {
            if (refill_used == kStageBlocks) {  // every slot's copy enqueued: wait before reusing them
                ck(cudaStreamSynchronize(stream), "refill");
                refill_used = 0;
            }
            const size_t take = std::min(jobs.size() - i, static_cast<size_t>(kStageBlocks - refill_used));
            uint16_t* room = refill_stage + static_cast<size_t>(refill_used) * 2 * elems;
            auto convert = [&](int64_t lo, int64_t hi, int t) {
                float* scratch = refill_scratch.data() + static_cast<size_t>(t) * scratch_floats;
                for (int64_t j = lo; j < hi; ++j) {
                    const Job& x = jobs[i + static_cast<size_t>(j)];
                    uint16_t* k = room + static_cast<size_t>(j) * 2 * elems;
                    kv_block_bf16(*backing, layer, x.b, x.valid, k, k + elems, scratch);
                }
            };
            if (take >= 4 && !refill_pool && !refill_serial) {
                try {  // a few threads: it runs once a layer while blocks are out
                    refill_pool = std::make_unique<ThreadPool>(
                        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
                } catch (const std::system_error&) {
                    refill_serial = true;  // no threads to be had: converted on this one
                }
            }
            if (take >= 4 && refill_pool) {
                refill_scratch.resize(static_cast<size_t>(refill_pool->size()) * scratch_floats);
                refill_pool->parallel_for(static_cast<int64_t>(take), convert);
            } else {
                refill_scratch.resize(std::max(refill_scratch.size(), scratch_floats));
                convert(0, static_cast<int64_t>(take), 0);
            }
            // The slots are taken before their copies are enqueued: a throw below leaves none
            // to be overwritten while a copy from it may still run.
            refill_used += static_cast<int>(take);
            for (size_t j = 0; j < take; ++j) {
                const Job& x = jobs[i + j];
                uint16_t* k = room + j * 2 * elems;
                make_room(1, keep);
                // Its mean key stays: the estimates that picked it score it alike when the
                // selection is made again (a placed mean may differ from the device's own by
                // rounding), and an append to it recomputes it.
                const bool done = cache->write_block(layer, x.b, k, k + elems, x.valid, stream, &error, true);
                if (cache->resident(layer, x.b)) touch(layer, x.b);  // listed at once: a throw below leaves none untracked
                if (!done) throw DeviceError("CUDA model: " + error);
                ++refilled;
            }
            i += take;
        }
    }
    // Brings blocks `want` of `layer` to the device (fetching those on the host) and stamps them
    // all, keeping `keep`. One block at a time: each fetch gives its host slot back before the next
    // eviction needs one.
    void ensure_resident(int layer, const std::vector<int64_t>& want, std::vector<int64_t> keep) {
        std::string error;
        std::sort(keep.begin(), keep.end());
        std::vector<int64_t> out;  // the dropped ones: converted together
        for (int64_t b : want)
            if (cache->dropped(layer, b)) out.push_back(b);
        if (!out.empty()) refill(layer, out, keep);
        for (int64_t b : want) {
            if (cache->on_host(layer, b)) {
                make_room(1, keep);
                if (cache->on_host(layer, b)) {  // (keep holds it: make_room never drops it)
                    if (!cache->fetch(layer, b, stream, &error)) throw DeviceError("CUDA model: " + error);
                    host_lru.erase({stamp[static_cast<size_t>(key(layer, b))], key(layer, b)});
                    ++fetched;
                }
            }
            if (cache->resident(layer, b)) touch(layer, b);
        }
    }
    // Stores a whole block from host memory (pinned staging, DeviceStore), making room first.
    void write_block(int layer, int64_t b, const uint16_t* k, const uint16_t* v, int n_tokens) {
        if (tiers()) {
            const std::vector<int64_t> keep{key(layer, b)};
            if (cache->on_host(layer, b)) ensure_resident(layer, {b}, keep);
            else if (!cache->resident(layer, b)) make_room(1, keep);  // a dropped one is written whole
        }
        written = std::max(written, b * cache->config().block_size + n_tokens);
        std::string error;
        const bool done = cache->write_block(layer, b, k, v, n_tokens, stream, &error);
        if (cache->resident(layer, b)) touch(layer, b);  // listed even when the write failed
        if (!done) throw DeviceError("CUDA model: " + error);
    }
    // Pinned staging of whole blocks for restores (DeviceStore): two rooms of kStageBlocks (K, V)
    // pairs, allocated on first use (write_block uses the first; stage() alternates them).
    static constexpr int kStageBlocks = 32;
    uint16_t* stage = nullptr;
    uint16_t* staging() {
        if (!stage) {
            void* p = nullptr;
            ck(cudaHostAlloc(&p, static_cast<size_t>(2 * kStageBlocks) * 2 * cache->block_elems() * 2, cudaHostAllocDefault),
               "cudaHostAlloc (restore staging)");
            stage = static_cast<uint16_t*>(p);
        }
        return stage;
    }

    // Appends K/V rows (device, f32) of positions [pos0, pos0 + n) to `layer`, making room first.
    void append(int layer, int64_t pos0, int64_t n, const float* kd, const float* vd) {
        const int64_t B = cache->config().block_size, b0 = pos0 / B, b1 = (pos0 + n - 1) / B;
        if (tiers()) {
            std::vector<int64_t> keep, back;  // back: the call's blocks on the host, fetched here
            int64_t fresh = 0;
            for (int64_t b = b0; b <= b1; ++b) {
                keep.push_back(key(layer, b));
                if (cache->on_host(layer, b)) back.push_back(b);
                else if (b == b0 && pos0 > b * B && cache->dropped(layer, b)) back.push_back(b);  // continued: refilled
                else if (!cache->resident(layer, b)) ++fresh;
            }
            ensure_resident(layer, back, keep);
            make_room(fresh, keep);
        }
        written = std::max(written, pos0 + n);
        std::string error;
        const bool done = cache->append(layer, pos0, n, kd, vd, stream, &error);
        for (int64_t b = b0; b <= b1; ++b)
            if (cache->resident(layer, b)) touch(layer, b);  // listed even when the append failed
        if (!done) throw DeviceError("CUDA model: " + error);
    }
    // The MSA selection of `layer` into sel (tasks, msa.width()): the hybrid top-k, then the window
    // and the growth (msa_extend_selection) when the configuration has them. Tiered: when the
    // hybrid's shortlist holds blocks on the host, those are fetched and the top-k made again (the
    // same shortlist: estimates cover every block), and the blocks the window and the growth add
    // are fetched before the attention reads them. The shortlist is the first tasks * n_cand
    // int32 of the hybrid workspace (msa.cuh).
    void select_tiered(const cuda::MsaShape& s, int layer, int n_cand, int32_t* sel, int64_t append_b0,
                       int64_t append_b1, const cuda::MsaRemap& remap) {
        const int64_t dkv = static_cast<int64_t>(s.n_kv_head) * s.head_dim;
        int32_t* top = msa.extends() ? top_sel : sel;
        auto select = [&] {
            ck(cuda::msa_hybrid_select(s, iq, dkv, cache->k_view(layer), cache->key_means(layer), msa.force, n_cand,
                                       msa.top_k, top, hws, hws_bytes, stream, remap),
               "msa_hybrid_select");
        };
        auto extend = [&] {
            if (!msa.extends()) return;
            ck(cuda::msa_extend_selection(s, iq, dkv, cache->key_means(layer), top, msa.top_k, msa.force.window,
                                          msa.growth, sel, msa.width(), xws, xws_bytes, stream, remap),
               "msa_extend_selection");
        };
        select();
        if (!tiers()) {
            extend();
            return;
        }
        std::vector<int64_t> keep;
        for (int64_t b = append_b0; b <= append_b1; ++b) keep.push_back(key(layer, b));
        // Brings the blocks named in the first `count` int32 of device table `ids` onto the device;
        // whether any was on the host.
        auto fetch = [&](const int32_t* ids, int64_t count, bool fetch_now) {
            host_cand.resize(static_cast<size_t>(count));
            ck(cudaMemcpyAsync(host_cand.data(), ids, host_cand.size() * 4, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (selection ids)");
            ck(cudaStreamSynchronize(stream), "selection ids");
            std::vector<int64_t> want;
            for (int32_t b : host_cand)
                if (b >= 0) want.push_back(b);
            std::sort(want.begin(), want.end());
            want.erase(std::unique(want.begin(), want.end()), want.end());
            bool any_host = false;
            for (int64_t b : want) {
                if (cache->on_host(layer, b) || cache->dropped(layer, b)) any_host = true;
                else touch(layer, b);
            }
            if (any_host && fetch_now) {
                std::vector<int64_t> k2 = keep;
                for (int64_t b : want) k2.push_back(key(layer, b));
                ensure_resident(layer, want, k2);
            }
            return any_host;
        };
        if (fetch(static_cast<const int32_t*>(hws), s.n_tasks() * n_cand, true))
            select();  // the same shortlist, now scored exactly throughout
        if (!msa.extends()) return;
        extend();
        fetch(sel, s.n_tasks() * msa.width(), true);  // the window's and the growth's blocks
    }

    // Prefill GEMMs (linear): cuBLAS state (-1: not asked yet) and the bf16 scratch of the
    // activations and of one dequantized weight.
    int blas = -1;
    std::string blas_why;
    uint16_t* xh = nullptr;
    uint16_t* wh = nullptr;
    int64_t xh_elems = 0, wh_elems = 0;

    explicit Impl(const LlamaModel& m) : model(m) {}
    ~Impl() {
        if (stream) cudaStreamSynchronize(stream);
        if (stage) cudaFreeHost(stage);
        if (refill_stage) cudaFreeHost(refill_stage);
        cache.reset();
        if (release_pinned && pinned_share > 0) release_pinned(pinned_share);
        for (const auto& [p, n] : allocations) cudaFree(p);
        if (stream) cudaStreamDestroy(stream);
    }

    void* alloc(size_t n_bytes) {
        void* p = nullptr;
        ck(cudaMalloc(&p, std::max<size_t>(n_bytes, 16)), "cudaMalloc");
        allocations.emplace_back(p, static_cast<int64_t>(n_bytes));
        bytes += static_cast<int64_t>(n_bytes);
        return p;
    }
    void release(void* p) {  // a scratch buffer regrown: its bytes leave device_bytes()
        if (!p) return;
        const auto it = std::find_if(allocations.begin(), allocations.end(), [p](const auto& a) { return a.first == p; });
        if (it != allocations.end()) {
            bytes -= it->second;
            allocations.erase(it);
        }
        cudaFree(p);
    }
    // Grows buffer p (capacity `have` elements of `elem` bytes) to at least `need` elements, with
    // room to spare; on a failed allocation p is null and `have` 0, so nothing stale is reused.
    template <typename T>
    void reserve(T*& p, int64_t& have, int64_t need, size_t elem) {
        if (need <= have) return;
        release(p);
        p = nullptr;
        have = 0;
        p = static_cast<T*>(alloc(static_cast<size_t>(need) * 2 * elem));
        have = need * 2;
    }
    const float* upload_f32(const float* host, int64_t n) {
        if (!host) return nullptr;
        void* d = alloc(static_cast<size_t>(n) * 4);
        ck(cudaMemcpy(d, host, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
        return static_cast<const float*>(d);
    }
    DevMatrix upload(const TensorView& w) {
        if (auto it = uploaded.find(w.data); it != uploaded.end()) return it->second;
        DevMatrix m;
        m.ne0 = w.ne0;
        m.ne1 = w.ne1;
        if (w.ne0 % 32) throw Error("CUDA model: a weight row of " + std::to_string(w.ne0) + " values is not a whole number of 32-value blocks");
        if (cuda::device_supports(w.type)) {
            m.type = w.type;
            const size_t n_bytes = static_cast<size_t>(w.row_bytes() * w.ne1);
            void* d = alloc(n_bytes);
            ck(cudaMemcpy(d, w.data, n_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
            m.data = d;
        } else {  // dequantize on the host, store f16
            m.type = kernels::TensorType::F16;
            const kernels::TensorTypeInfo info = kernels::tensor_type_info(w.type);
            if (info.block_size == 0 || w.ne0 % static_cast<int64_t>(info.block_size) != 0)
                throw Error("CUDA model: a weight row of " + std::to_string(w.ne0) + " values is not a whole number of " +
                            std::to_string(info.block_size) + "-value blocks of its type");
            std::vector<uint16_t> h(static_cast<size_t>(w.ne0 * w.ne1));
            // Large matrices on the host's cores (an 8B model's K-quants: 8e9 values); a thread
            // that cannot start leaves its rows to this one; what a worker throws comes back here.
            const int64_t n_threads = w.ne0 * w.ne1 >= (int64_t{1} << 22)
                                          ? std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32)
                                          : 1;
            const int64_t per = (w.ne1 + n_threads - 1) / n_threads;
            std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
            auto rows = [&](int64_t t) noexcept {
                try {
                    std::vector<float> row(static_cast<size_t>(w.ne0));
                    for (int64_t r = t * per; r < std::min(w.ne1, (t + 1) * per); ++r) {
                        kernels::dequantize_row(w.type, w.row(r), row.data(), w.ne0);
                        kernels::f32_to_f16(h.data() + r * w.ne0, row.data(), static_cast<size_t>(w.ne0));
                    }
                } catch (...) {
                    errors[static_cast<size_t>(t)] = std::current_exception();
                }
            };
            {
                std::vector<std::thread> pool;
                std::vector<int64_t> left{0};
                for (int64_t t = 1; t < n_threads; ++t) {
                    try {
                        pool.emplace_back(rows, t);
                    } catch (...) {
                        left.push_back(t);
                    }
                }
                for (int64_t t : left) rows(t);
                for (auto& t : pool) t.join();
            }
            for (const auto& e : errors)
                if (e) std::rethrow_exception(e);
            void* d = alloc(h.size() * 2);
            ck(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
            m.data = d;
        }
        uploaded[w.data] = m;
        return m;
    }

    void grow(int n) {
        if (n <= cap) return;
        const LlamaConfig& c = model.config();
        for (float** p : {&x, &xn, &q, &k, &v, &att, &o, &g, &u, &iq, &q_far, &iq_far}) {
            release(*p);
            *p = nullptr;  // a failed allocation below leaves nothing stale
        }
        cap = 0;  // until every buffer is there: a later call after a failure allocates again
        const size_t nn = static_cast<size_t>(n);
        const size_t d = static_cast<size_t>(c.d_model), dq = static_cast<size_t>(c.n_head) * c.head_dim,
                     dkv = static_cast<size_t>(c.n_kv_head) * c.head_dim, ff = static_cast<size_t>(c.n_ff);
        x = static_cast<float*>(alloc(nn * d * 4));
        xn = static_cast<float*>(alloc(nn * d * 4));
        q = static_cast<float*>(alloc(nn * dq * 4));
        k = static_cast<float*>(alloc(nn * dkv * 4));
        v = static_cast<float*>(alloc(nn * dkv * 4));
        att = static_cast<float*>(alloc(nn * dq * 4));
        o = static_cast<float*>(alloc(nn * d * 4));
        g = static_cast<float*>(alloc(nn * ff * 4));
        u = static_cast<float*>(alloc(nn * ff * 4));
        iq = static_cast<float*>(alloc(nn * dkv * 4));
        if (msa.remap_window > 0) {
            q_far = static_cast<float*>(alloc(nn * dq * 4));
            iq_far = static_cast<float*>(alloc(nn * dkv * 4));
            release(far_pos);
            far_pos = nullptr;
            far_pos = static_cast<int64_t*>(alloc(nn * 8));
        }
        cap = n;
    }

    // Y (n, ne1) = X (n, ne0) @ W^T. Calls of kGemmTokens tokens or more (prefill) go through
    // cuBLAS when it loads: the weight dequantized to bf16 into a scratch (the device kernels'
    // dequantize, exact up to bf16 rounding) and the activations converted to bf16, f32
    // accumulation — bf16, not f16: activations past 65504 (large FFN inputs of some models) would
    // overflow f16; fewer tokens (decode) through the quantized matrix-vector kernels, f32 activations.
    void linear(const DevMatrix& w, const float* in, int n, float* out) {
        if (n >= kGemmTokens && gemm_ok()) {
            const int64_t nx = static_cast<int64_t>(n) * w.ne0, nw = w.ne0 * w.ne1;
            reserve(xh, xh_elems, nx, 2);
            ck(cuda::f32_to_bf16(xh, in, nx, stream), "f32_to_bf16 (activations)");
            const void* W = w.data;
            if (w.type != kernels::TensorType::BF16) {
                reserve(wh, wh_elems, nw, 2);
                ck(cuda::dequantize(w.type, w.data, wh, cuda::OutType::BF16, nw, stream), "dequantize (bf16)");
                W = wh;
            }
            std::string error;
            if (!cuda::gemm_xwt(cuda::GemmType::BF16, xh, W, out, n, w.ne1, w.ne0, stream, &error))
                throw DeviceError("CUDA model: " + error);
            return;
        }
        ck(cuda::matvec(w.type, w.data, w.ne1, w.ne0, in, n, out, stream), "matvec");
    }
    bool gemm_ok() {
        if (blas < 0) blas = cuda::blas_available(&blas_why) ? 1 : 0;
        return blas == 1;
    }
};

}  // namespace sl

#endif  // SIGHTLINE_HAVE_CUDA
