#include "core/runtime/cuda_backend_model.h"

#include <string>

#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_transfer.h"
#include "core/model/llama_model.h"
#include "core/util/error.h"
#include "kernels/cuda/cuda_device.h"

#if SIGHTLINE_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/kvcache/device_kv_cache.h"
#include "core/runtime/linear.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/msa.cuh"
#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/quant.cuh"
#endif

namespace sl {

std::string cuda_unsupported(const LlamaConfig& c) {
    if (c.arch == "gemma3" || c.ffn_gelu || c.swa_window > 0 || c.embed_scale != 1.0f)
        return "the CUDA kernels lack " + c.arch + "'s norms, GELU and sliding window";
    if (c.has_moe() || c.ffn_swiglu_oai || c.arch == "minimax-m3")
        return std::string("the CUDA kernels lack ") + (c.has_moe() ? "mixture-of-experts layers" : "") +
               (c.has_moe() && c.ffn_swiglu_oai ? " and " : "") + (c.ffn_swiglu_oai ? "the swiglu_oai FFN" : "");
    if ((c.head_dim != 64 && c.head_dim != 128) || c.n_kv_head <= 0 || c.n_head % c.n_kv_head)
        return "head_dim " + std::to_string(c.head_dim) + " / " + std::to_string(c.n_head) + " heads over " +
               std::to_string(c.n_kv_head) + " KV heads is not supported by the CUDA kernels (head_dim 64 or 128)";
    return {};
}

namespace {

// The most blocks a device selection's shortlist and its growth may hold (kernels/cuda/ops.cuh,
// kMaxTopK; checked below where the kernels are built).
constexpr int64_t kDeviceSelectMax = 256;

// A selection's forced blocks among its top-k (the local block, and the sink).
int forced_blocks(const MsaConfig& c) { return c.sink ? 2 : 1; }

// The hybrid shortlist the device scores exactly: the forced blocks and hybrid_factor x the rest of
// the top-k (the CPU's keep = factor x (top_k - forced)).
int64_t shortlist_blocks(const MsaConfig& c) {
    const int64_t f = std::min<int64_t>(forced_blocks(c), c.top_k);
    return f + static_cast<int64_t>(c.hybrid_factor) * (c.top_k - f);
}

// The most blocks the mass growth adds (top_k x (grow - 1); 0 without growth).
int64_t growth_blocks(const MsaConfig& c) {
    return c.top_p > 0 ? static_cast<int64_t>(c.top_k) * (std::max(1, c.top_p_grow) - 1) : 0;
}

}  // namespace

std::string cuda_msa_lacks(const MsaConfig& c) {
    auto n = [](int64_t v) { return std::to_string(v); };
    if (c.scoring != BlockScoring::Hybrid)
        return std::string(c.scoring == BlockScoring::BlockMax ? "BlockMax" : c.scoring == BlockScoring::MeanKey ? "mean-key"
                                                                                                                  : "native-indexer") +
               " block scoring (the device scores hybrid)";
    if (c.index_query != IndexQuery::GroupMean) return "head-max index queries (the device uses the group mean)";
    if (c.block_size != 128) return "blocks of " + n(c.block_size) + " tokens (the device's are 128)";
    if (c.top_k < 1 || c.top_k > 64) return "top-k " + n(c.top_k) + " (the device takes 1..64)";
    if (c.hybrid_factor < 1 || c.hybrid_factor > 64) return "a shortlist factor of " + n(c.hybrid_factor) + " (1..64)";
    if (c.decode_hybrid_factor != 0 && c.decode_hybrid_factor != c.hybrid_factor)
        return "a decode shortlist factor of " + n(c.decode_hybrid_factor) + " apart from prefill's " + n(c.hybrid_factor);
    if (shortlist_blocks(c) > kDeviceSelectMax)
        return "a shortlist of " + n(shortlist_blocks(c)) + " blocks (the device's hold " + n(kDeviceSelectMax) + ")";
    if (c.window_blocks < 0 || c.window_blocks > kDeviceSelectMax)
        return "a local window of " + n(c.window_blocks) + " blocks (the device takes 0.." + n(kDeviceSelectMax) + ")";
    if (growth_blocks(c) > kDeviceSelectMax)
        return "a growth room of " + n(growth_blocks(c)) + " blocks (the device's hold " + n(kDeviceSelectMax) + ")";
    if (c.dense_layers > 0) return n(c.dense_layers) + " dense leading layers";
    if (c.positions == PositionMode::Remap && c.remap_window <= 0)
        return "a remap window of " + n(c.remap_window) + " tokens";
    return {};
}

#if SIGHTLINE_HAVE_CUDA

namespace {

void ck(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw DeviceError("CUDA model: " + cuda::cuda_error_text(what, e));
}

static_assert(kDeviceSelectMax == cuda::kMaxTopK, "cuda_msa_lacks checks the kernels' limit");

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
constexpr int kDeviceBlock = 128;

// Tokens from which a call's linear layers run as GEMMs (cuBLAS) instead of matrix-vector passes
// (4 tokens per pass over the weights).
constexpr int kGemmTokens = 16;

// A device weight matrix: d = ne1 rows of ne0 values in `type`.
struct DevMatrix {
    kernels::TensorType type = kernels::TensorType::F32;
    const void* data = nullptr;
    int64_t ne0 = 0, ne1 = 0;
};

}  // namespace

struct CudaLlamaRunner::Impl {
    const LlamaModel& model;
    int n_ctx = 0;
    int64_t n_past = 0;
    int64_t bytes = 0;
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
    std::vector<float> refill_scratch;
    // One past the last position written to the cache (appends and restored blocks; a truncate or
    // reset cuts it): no block holds a position of the context at or past it.
    int64_t written = 0;
    // Whether block b of `layer` may leave the device without a copy: the backing holds every
    // position of it that was written (a partial last block too, unless this call appended to it).
    bool droppable(int layer, int64_t b) const {
        const int64_t B = cache->config().block_size;
        return backing && backing->block_size() == B && backing->n_kv_head() == cache->config().n_kv_head &&
               backing->head_dim() == cache->config().head_dim && b * B < backed &&
               std::min((b + 1) * B, written) <= backed && backing->page(layer, b);
    }

    int64_t key(int layer, int64_t b) const { return static_cast<int64_t>(layer) * cache->config().max_blocks + b; }
    void touch(int layer, int64_t b) {
        if (!tiered) return;
        const int64_t k = key(layer, b);
        uint64_t& st = stamp[static_cast<size_t>(k)];
        lru.erase({st, k});
        st = ++tick;
        lru.insert({st, k});
    }
    // The host tier full: the least recently offloaded block there that the backing holds, not in
    // `keep` (sorted), is dropped, giving its slot. Whether one was.
    bool free_host_slot(const std::vector<int64_t>& keep) {
        const int64_t mb = cache->config().max_blocks;
        for (auto it = host_lru.begin(); it != host_lru.end(); ++it) {
            const int layer = static_cast<int>(it->second / mb);
            const int64_t b = it->second % mb;
            if (std::binary_search(keep.begin(), keep.end(), it->second) || !droppable(layer, b)) continue;
            std::string error;
            if (!cache->drop(layer, b, stream, &error)) throw DeviceError("CUDA model: " + error);
            host_lru.erase(it);
            ++dropped;
            return true;
        }
        return false;
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
                auto d = it;  // the least recently touched saved block on the device
                while (d != lru.end() && (kept(d->second) || !droppable(static_cast<int>(d->second / mb), d->second % mb))) ++d;
                if (d != lru.end()) {
                    if (!cache->drop(static_cast<int>(d->second / mb), d->second % mb, stream, &error))
                        throw DeviceError("CUDA model: " + error);
                    lru.erase(d);
                    ++dropped;
                    continue;
                }
                if (!free_host_slot(keep))
                    throw DeviceError("CUDA model: the device and host KV tiers are full (" +
                                      std::to_string(cache->config().device_blocks) + " + " +
                                      std::to_string(cache->config().host_blocks) +
                                      " blocks) and none of their blocks is in a saved context: save the context, or "
                                      "raise the host KV budget (--kv-budget)");
            }
            const int64_t k = it->second;
            if (!cache->offload(static_cast<int>(k / mb), k % mb, stream, &error)) throw DeviceError("CUDA model: " + error);
            host_lru.insert({stamp[static_cast<size_t>(k)], k});
            lru.erase(it);  // after the offload: a failed one leaves the block resident and listed
            ++evicted;
        }
    }
    // Forgets the blocks wholly at or past position n (a truncate or reset): their device blocks
    // and host slots freed without a copy, so that stale blocks never fill a bounded host tier.
    void forget_from(int64_t n) {
        if (!tiered) return;
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
                if (!cache->forget(static_cast<int>(it->second / mb), b, stream, &error)) throw DeviceError("CUDA model: " + error);
                it = list->erase(it);
            }
    }
    // Block b of `layer`, dropped, back on the device from the backing: its positions in the
    // context (the backing's, and written) converted to bf16 in the pinned refill staging and written, room
    // made first without touching `keep` (sorted). Nothing when the context holds none of it (the
    // next append writes it afresh).
    void refill(int layer, int64_t b, const std::vector<int64_t>& keep) {
        const int64_t B = cache->config().block_size;
        // A dropped block's positions were all in the backing when it left; a truncate since cut
        // both to the context.
        const int64_t valid = std::min({B, backed - b * B, written - b * B});
        if (valid <= 0) return;
        if (!backing || backing->block_size() != B || b * B + valid > backed || !backing->page(layer, b))
            throw DeviceError("CUDA model: block " + std::to_string(b) + " of layer " + std::to_string(layer) +
                              " left the device but the host copy of the context no longer holds it");
        const auto elems = static_cast<size_t>(cache->block_elems());
        if (!refill_stage) {
            void* p = nullptr;
            ck(cudaHostAlloc(&p, static_cast<size_t>(kStageBlocks) * 2 * elems * 2, cudaHostAllocDefault),
               "cudaHostAlloc (refill staging)");
            refill_stage = static_cast<uint16_t*>(p);
        }
        if (refill_used == kStageBlocks) {  // every slot's copy enqueued: wait before reusing them
            ck(cudaStreamSynchronize(stream), "refill");
            refill_used = 0;
        }
        uint16_t* k = refill_stage + static_cast<size_t>(refill_used++) * 2 * elems;
        refill_scratch.resize(static_cast<size_t>(B) * cache->config().head_dim);
        kv_block_bf16(*backing, layer, b, static_cast<int>(valid), k, k + elems, refill_scratch.data());
        make_room(1, keep);
        std::string error;
        if (!cache->write_block(layer, b, k, k + elems, static_cast<int>(valid), stream, &error))
            throw DeviceError("CUDA model: " + error);
        ++refilled;
    }
    // Brings blocks `want` of `layer` to the device (fetching those on the host) and stamps them
    // all, keeping `keep`. One block at a time: each fetch gives its host slot back before the next
    // eviction needs one.
    void ensure_resident(int layer, const std::vector<int64_t>& want, std::vector<int64_t> keep) {
        std::string error;
        std::sort(keep.begin(), keep.end());
        for (int64_t b : want) {
            if (cache->on_host(layer, b)) {
                make_room(1, keep);
                if (cache->on_host(layer, b)) {  // (keep holds it: make_room never drops it)
                    if (!cache->fetch(layer, b, stream, &error)) throw DeviceError("CUDA model: " + error);
                    host_lru.erase({stamp[static_cast<size_t>(key(layer, b))], key(layer, b)});
                    ++fetched;
                }
            }
            if (cache->dropped(layer, b)) refill(layer, b, keep);
            if (cache->resident(layer, b)) touch(layer, b);
        }
    }
    // Stores a whole block from host memory (pinned staging, DeviceStore), making room first.
    void write_block(int layer, int64_t b, const uint16_t* k, const uint16_t* v, int n_tokens) {
        if (tiered) {
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
        if (tiered) {
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
        if (!tiered) {
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
            std::vector<float> row(static_cast<size_t>(w.ne0));
            std::vector<uint16_t> h(static_cast<size_t>(w.ne0 * w.ne1));
            for (int64_t r = 0; r < w.ne1; ++r) {
                kernels::dequantize_row(w.type, w.row(r), row.data(), w.ne0);
                kernels::f32_to_f16(h.data() + r * w.ne0, row.data(), static_cast<size_t>(w.ne0));
            }
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
            *p = nullptr;  // a failed allocation below leaves nothing stale (cap stays smaller)
        }
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

CudaLlamaRunner::CudaLlamaRunner(const LlamaModel& model, int n_ctx, const MsaConfig* msa, int64_t device_kv_bytes,
                                 int64_t host_kv_bytes)
    : impl_(std::make_unique<Impl>(model)) {
    const cuda::DeviceStatus st = cuda::probe();
    if (!st.usable) throw Error("CUDA model: no usable CUDA device: " + st.message);
    const LlamaConfig& c = model.config();
    if (const std::string why = cuda_unsupported(c); !why.empty()) throw Error("CUDA model: " + why);
    if (n_ctx <= 0) throw Error("CUDA model: n_ctx must be positive");
    Impl& m = *impl_;
    if (msa) {
        if (const std::string why = cuda_msa_lacks(*msa); !why.empty())
            throw Error("CUDA model: the device's MSA lacks " + why);
        m.msa.enabled = true;
        m.msa.top_k = msa->top_k;
        m.msa.n_cand = static_cast<int>(shortlist_blocks(*msa));
        m.msa.force = cuda::MsaForce(msa->sink, msa->window_blocks);
        if (msa->top_p > 0) {
            m.msa.growth.mass = msa->top_p;
            m.msa.growth.room = static_cast<int>(growth_blocks(*msa));
            m.msa.growth.full_blocks = msa->top_p_full_ctx > 0 ? msa->top_p_full_ctx / msa->block_size : 0;
            m.msa.growth.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        }
        if (msa->positions == PositionMode::Remap) {
            if (c.rope_dim <= 0) throw Error("CUDA model: remapped positions need a model with RoPE");
            m.msa.remap_window = msa->remap_window;
        }
    }
    m.n_ctx = n_ctx;
    ck(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const LlamaWeights& w = model.weights();
    for (const LlamaLayer& L : w.layers) {
        Impl::Layer d;
        d.attn_norm = m.upload_f32(L.attn_norm, c.d_model);
        d.ffn_norm = m.upload_f32(L.ffn_norm, c.d_model);
        d.bq = m.upload_f32(L.bq, static_cast<int64_t>(c.n_head) * c.head_dim);
        d.bk = m.upload_f32(L.bk, static_cast<int64_t>(c.n_kv_head) * c.head_dim);
        d.bv = m.upload_f32(L.bv, static_cast<int64_t>(c.n_kv_head) * c.head_dim);
        d.wq = m.upload(L.wq);
        d.wk = m.upload(L.wk);
        d.wv = m.upload(L.wv);
        d.wo = m.upload(L.wo);
        d.gate = m.upload(L.gate);
        d.up = m.upload(L.up);
        d.down = m.upload(L.down);
        m.layers.push_back(d);
    }
    m.output_norm = m.upload_f32(w.output_norm, c.d_model);
    if (!c.rope_freq_factors.empty())
        m.rope_freq_factors = m.upload_f32(c.rope_freq_factors.data(), static_cast<int64_t>(c.rope_freq_factors.size()));
    m.output = m.upload(w.output);
    m.logits = static_cast<float*>(m.alloc(static_cast<size_t>(c.n_vocab) * 4));
    if (m.msa.remap_window > 0) {  // every block's angles, once (blocks past n_ctx are never read)
        const int64_t blocks = (static_cast<int64_t>(n_ctx) + kDeviceBlock - 1) / kDeviceBlock;
        m.msa.rel = static_cast<float*>(m.alloc(static_cast<size_t>(blocks) * c.rope_dim * 4));
        ck(cudaDeviceSynchronize(), "uploads");  // rope_freq_factors came on the legacy stream
        ck(cuda::msa_remap_table(blocks, kDeviceBlock, c.rope_dim, c.rope_base, c.rope_freq_scale, m.rope_freq_factors,
                                 m.msa.rel, m.stream),
           "msa_remap_table");
    }

    DeviceKvCache::Config kc;
    kc.n_layer = c.n_layer;
    kc.n_kv_head = c.n_kv_head;
    kc.head_dim = c.head_dim;
    kc.block_size = kDeviceBlock;
    kc.max_blocks = (n_ctx + kc.block_size - 1) / kc.block_size;
    kc.device_blocks = kc.max_blocks * c.n_layer;
    const int64_t pair_bytes = 2 * static_cast<int64_t>(c.n_kv_head) * kc.block_size * c.head_dim * 2;  // K + V, bf16
    if (device_kv_bytes > 0 && device_kv_bytes < kc.device_blocks * pair_bytes) {
        if (!m.msa.enabled)
            throw Error("CUDA model: a device KV budget needs MSA attention (dense attention reads every block each call)");
        // The fewest blocks: a decode call's shortlists or grown selections (whichever is wider,
        // per KV group) twice over, and a few appended ones. A prefill call needs (query blocks x
        // KV groups x shortlist) at once, which make_room reports when the budget cannot hold it.
        const int64_t per_group = std::max(m.msa.n_cand, m.msa.width());
        const int64_t blocks = device_kv_bytes / pair_bytes, min_blocks = 2 * per_group * c.n_kv_head + 8;
        if (blocks < min_blocks)
            throw Error("CUDA model: a device KV budget of " + std::to_string(device_kv_bytes >> 20) + " MiB holds " +
                        std::to_string(blocks) + " blocks; at least " + std::to_string(min_blocks) + " (" +
                        std::to_string((min_blocks * pair_bytes + (1 << 20) - 1) >> 20) + " MiB) are needed");
        // A slot for every block (offloads never wait for fetches), or what the host budget holds:
        // then the third tier (the saved context, set_backing) takes what the host cannot.
        kc.host_blocks = kc.device_blocks;
        if (host_kv_bytes > 0) kc.host_blocks = std::clamp<int64_t>(host_kv_bytes / pair_bytes, 1, kc.device_blocks);
        kc.device_blocks = blocks;
        m.tiered = true;
        m.stamp.assign(static_cast<size_t>(c.n_layer * kc.max_blocks), 0);
    }
    std::string error;
    m.cache = DeviceKvCache::create(kc, &error);
    if (!m.cache) throw Error("CUDA model: " + error);
    m.bytes += kc.device_blocks * 2 * static_cast<int64_t>(c.n_kv_head) * kc.block_size * c.head_dim * 2;
    m.bytes += static_cast<int64_t>(c.n_layer) * kc.max_blocks * c.n_kv_head * c.head_dim * 2;  // mean keys
}

CudaLlamaRunner::~CudaLlamaRunner() = default;

int64_t CudaLlamaRunner::n_past() const { return impl_->n_past; }
void CudaLlamaRunner::reset() {  // positions are rewritten before they are read
    impl_->n_past = 0;
    impl_->backed = 0;
    impl_->written = 0;
    impl_->forget_from(0);
    impl_->last_top_k = 0;
    impl_->rec_top_k = 0;
}

void CudaLlamaRunner::truncate(int64_t n) {
    Impl& m = *impl_;
    if (n < 0 || n > m.n_past)
        throw Error("CUDA model: truncate to " + std::to_string(n) + " positions of " + std::to_string(m.n_past));
    // The kept blocks' K/V stay; the partial last block's mean key is recomputed by the next append
    // (DeviceKvCache::append averages a block over its tokens before the append's end).
    m.n_past = n;
    m.backed = std::min(m.backed, n);
    m.written = n;
    m.forget_from(n);
    m.last_top_k = 0;
    m.rec_top_k = 0;
}

void CudaLlamaRunner::set_backing(const KvCache* mirror, int64_t n) {
    Impl& m = *impl_;
    m.backing = mirror;
    m.backed = mirror ? std::clamp<int64_t>(n, 0, m.n_past) : 0;
}

namespace {

// The runner's device cache as kv_transfer sees it: blocks read back through the stream, host rows
// staged through the forward pass's K/V scratch (cap rows at a time) and appended.
class DeviceStore final : public KvBlockStore {
public:
    DeviceStore(CudaLlamaRunner::Impl& m, DeviceKvCache& cache, cudaStream_t stream, float* k_scratch, float* v_scratch,
                int64_t cap)
        : m_(m), cache_(cache), stream_(stream), k_(k_scratch), v_(v_scratch), cap_(cap) {}
    int block_size() const override { return cache_.config().block_size; }
    void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) override {
        std::string error;
        if (!cache_.read_block(layer, block, k, v, stream_, &error)) throw DeviceError("CUDA model: " + error);
    }
    // A save's batches: pinned, so that the device-to-host copies of a batch run asynchronously at
    // the bus's rate and are waited for once (pageable memory: plain, when pinning fails).
    HostBuffer host_buffer(size_t elems) override {
        void* p = nullptr;
        if (cudaHostAlloc(&p, std::max<size_t>(elems, 1) * 2, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();  // not sticky: clear it
            return KvBlockStore::host_buffer(elems);
        }
        return HostBuffer(static_cast<uint16_t*>(p), [](uint16_t* q) { cudaFreeHost(q); });
    }
    void read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride) override {
        std::string error;
        if (!cache_.read_blocks(n, layer, block, k, v, stride, stream_, &error)) throw DeviceError("CUDA model: " + error);
    }
    void append_rows(int layer, int64_t pos0, int64_t n, const float* k, const float* v) override {
        const int64_t row = static_cast<int64_t>(cache_.config().n_kv_head) * cache_.config().head_dim;
        for (int64_t i = 0; i < n; i += cap_) {
            const int64_t m = std::min(cap_, n - i);
            const size_t bytes = static_cast<size_t>(m * row) * 4;
            ck(cudaMemcpyAsync(k_, k + i * row, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload K)");
            ck(cudaMemcpyAsync(v_, v + i * row, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload V)");
            m_.append(layer, pos0 + i, m, k_, v_);
            // The next copy reuses the scratch and `k` / `v` may be freed by the caller: wait.
            ck(cudaStreamSynchronize(stream_), "upload");
        }
    }

    // Whole blocks (a restore): copied into the runner's pinned staging, sent asynchronously, the
    // stream waited for when the staging is full and at flush().
    ~DeviceStore() override {  // an upload cut short by an exception: its staged copies finish first
        if (staged_ > 0 || room_ >= 0) cudaStreamSynchronize(stream_);
        for (cudaEvent_t e : done_)
            if (e) cudaEventDestroy(e);
    }
    DeviceStore(const DeviceStore&) = delete;
    DeviceStore& operator=(const DeviceStore&) = delete;
    bool takes_blocks() const override { return true; }
    void write_block(int layer, int64_t block, const uint16_t* k, const uint16_t* v, int n_tokens) override {
        if (staged_ == CudaLlamaRunner::Impl::kStageBlocks || room_ >= 0) flush();  // room 0 may be in flight
        const auto elems = static_cast<size_t>(cache_.block_elems());
        uint16_t* dst = m_.staging() + static_cast<size_t>(staged_) * 2 * elems;
        std::memcpy(dst, k, elems * 2);
        std::memcpy(dst + elems, v, elems * 2);
        ++staged_;
        m_.write_block(layer, block, dst, dst + elems, n_tokens);
    }
    void flush() override {
        ck(cudaStreamSynchronize(stream_), "upload");
        staged_ = 0;
        room_ = -1;
        recorded_[0] = recorded_[1] = false;
    }

    // Converted straight into the pinned staging (kv_upload): two rooms alternate; before a room is
    // handed out again, the copies issued from it (an event recorded when the other was taken) are
    // waited for, so one batch converts on the host while the last one's copies run.
    int stage_capacity() const override { return CudaLlamaRunner::Impl::kStageBlocks; }
    uint16_t* stage(int n) override {
        if (n > CudaLlamaRunner::Impl::kStageBlocks) return nullptr;
        if (staged_ > 0) flush();  // write_block's copies use room 0
        for (cudaEvent_t& e : done_)
            if (!e) ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (restore staging)");
        if (room_ >= 0) {
            ck(cudaEventRecord(done_[room_], stream_), "cudaEventRecord (restore staging)");
            recorded_[room_] = true;
        }
        room_ = room_ == 0 ? 1 : 0;
        if (recorded_[room_]) ck(cudaEventSynchronize(done_[room_]), "cudaEventSynchronize (restore staging)");
        recorded_[room_] = false;
        return room(room_);
    }
    void write_staged(int i, int layer, int64_t block, int n_tokens) override {
        if (room_ < 0 || i < 0 || i >= CudaLlamaRunner::Impl::kStageBlocks)
            throw Error("CUDA model: write_staged of slot " + std::to_string(i) + " without a room staged");
        const auto elems = static_cast<size_t>(cache_.block_elems());
        uint16_t* src = room(room_) + static_cast<size_t>(i) * 2 * elems;
        m_.write_block(layer, block, src, src + elems, n_tokens);
    }

private:
    uint16_t* room(int r) {
        return m_.staging() + static_cast<size_t>(r) * CudaLlamaRunner::Impl::kStageBlocks * 2 * static_cast<size_t>(cache_.block_elems());
    }
    CudaLlamaRunner::Impl& m_;
    int staged_ = 0;
    int room_ = -1;  // the room stage() last gave
    cudaEvent_t done_[2] = {nullptr, nullptr};
    bool recorded_[2] = {false, false};
    DeviceKvCache& cache_;
    cudaStream_t stream_;
    float *k_, *v_;
    int64_t cap_;
};

}  // namespace

void CudaLlamaRunner::download_kv(KvCache& dst, int64_t from) const {
    Impl& m = *impl_;
    ck(cudaStreamSynchronize(m.stream), "download");
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    kv_download(store, dst, from, m.n_past);
}

bool CudaLlamaRunner::save_pages(const KvCache& mirror, int64_t from, const std::function<void(KvPageSource&)>& write) const {
    Impl& m = *impl_;
    if (mirror.block_size() != m.cache->config().block_size) return false;
    ck(cudaStreamSynchronize(m.stream), "download");
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    KvStorePages pages(store, mirror, from, m.n_past);
    write(pages);
    return true;
}

void CudaLlamaRunner::upload_kv(const KvCache& src, int64_t from, int64_t n) {
    Impl& m = *impl_;
    if (from < 0 || from > m.n_past || from > n)
        throw Error("CUDA model: upload of positions [" + std::to_string(from) + ", " + std::to_string(n) + ") after " +
                    std::to_string(m.n_past));
    if (n > m.n_ctx)
        throw Error("CUDA model: a context of " + std::to_string(n) + " positions does not fit " + std::to_string(m.n_ctx));
    if (from == 0) reset();
    else truncate(from);  // the partial block at `from` is appended to (its mean key recomputed)
    m.grow(256);
    // `src` holds the whole context: blocks written here may leave the device without a copy
    // (the third tier) when the host tier is full.
    m.backing = &src;
    m.backed = n;
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    try {
        kv_upload(src, store, from, n, m.cap);
    } catch (...) {
        m.backed = std::min(m.backed, m.n_past);  // cut back to `from`
        m.written = m.n_past;
        throw;
    }
    m.n_past = n;
}
int64_t CudaLlamaRunner::device_bytes() const { return impl_->bytes; }
int CudaLlamaRunner::last_top_k() const { return impl_->last_top_k; }

void CudaLlamaRunner::set_record_mass(bool on) { impl_->record = on; }

CudaKvTiers CudaLlamaRunner::kv_tiers() const {
    const Impl& m = *impl_;
    return {m.cache->config().device_blocks, m.cache->config().host_blocks, m.fetched, m.evicted, m.dropped, m.refilled};
}

std::vector<Selection> CudaLlamaRunner::recorded_selections(int layer) const {
    const Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    if (m.rec_top_k == 0 || layer < 0 || layer >= c.n_layer) return {};
    const int k = m.rec_top_k, B = m.cache->config().block_size;
    const int32_t* sel = m.rec_sel.data() + (m.rec_shared_sel ? 0 : static_cast<size_t>(layer) * c.n_kv_head * k);
    const float* mass = m.rec_mass.data() + static_cast<size_t>(layer) * c.n_kv_head * k * B;
    std::vector<Selection> out(static_cast<size_t>(c.n_kv_head));
    for (int g = 0; g < c.n_kv_head; ++g) {
        Selection& x = out[static_cast<size_t>(g)];
        x.kv_head = g;
        x.q_pos0 = m.rec_pos0;
        x.n_queries = 1;
        for (int i = 0; i < k; ++i) {
            const int32_t b = sel[g * k + i];
            if (b < 0) continue;
            const float* t = mass + (static_cast<size_t>(g) * k + i) * B;
            x.blocks.push_back(b);
            x.token_mass.insert(x.token_mass.end(), t, t + B);
            float sum = 0.0f;
            for (int j = 0; j < B; ++j) sum += t[j];
            x.mass.push_back(sum);
        }
    }
    return out;
}

std::vector<int32_t> CudaLlamaRunner::last_selection(int layer) const {
    const Impl& m = *impl_;
    if (m.last_top_k == 0 || layer < 0 || layer >= m.model.config().n_layer) return {};
    const int64_t n = m.last_tasks * m.last_top_k;
    std::vector<int32_t> out(static_cast<size_t>(n));
    ck(cudaMemcpy(out.data(), m.sel + layer * n, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost),
       "cudaMemcpy (selection)");
    return out;
}

void CudaLlamaRunner::forward(const int32_t* tokens, int n, float* logits, const float* embeddings) {
    Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    if (n <= 0) return;
    if (m.n_past + n > m.n_ctx)
        throw Error("CUDA model: context full (" + std::to_string(m.n_past + n) + " > " + std::to_string(m.n_ctx) + ")");
    for (int i = 0; i < n; ++i)
        if (!(embeddings && tokens[i] == LlamaModel::kEmbeddingToken) && (tokens[i] < 0 || tokens[i] >= c.n_vocab))
            throw Error("CUDA model: token id " + std::to_string(tokens[i]) + " outside the vocabulary");
    // As the CPU's MSA (core/attention/msa_attention.cpp, split_last): the call's last query, whose
    // logits it returns, selects on its own when its query block holds other queries of the call
    // (the prompt's last token: the first answer token's selection). Here: the others as one call,
    // then the last as a call of one, which sees their K/V as the CPU's does.
    if (m.msa.enabled && n > 1 && !m.in_split) {
        const int64_t B = kDeviceBlock, end = m.n_past + n;
        const bool sparse_now = (end + B - 1) / B > m.msa.top_k + m.msa.force.window;
        if (sparse_now && end - std::max(m.n_past, (end - 1) / B * B) > 1) {
            m.in_split = true;
            try {
                forward(tokens, n - 1, logits, embeddings);
            } catch (...) {
                m.in_split = false;
                throw;
            }
            m.in_split = false;
            forward(tokens + n - 1, 1, logits, embeddings ? embeddings + static_cast<int64_t>(n - 1) * c.d_model : nullptr);
            return;
        }
    }
    // Memory tiers: a layer's step keeps every block its tasks shortlist or select (up to
    // max(shortlist, selection) per query block and group) and the blocks it appends on the device
    // at once. A call of more query blocks than the device budget holds that way goes in parts at
    // query-block boundaries — the same selections and attention as one call (a query block's rows
    // and its causal keys do not depend on the split), the parts' last queries not split off.
    if (m.tiered && m.msa.enabled) {
        const int64_t B = kDeviceBlock;
        const int64_t qblocks = (m.n_past + n - 1) / B - m.n_past / B + 1;
        const int64_t per_group = std::max(m.msa.n_cand, m.msa.width());
        const int64_t fit = std::max<int64_t>(1, (m.cache->config().device_blocks - 8) / (c.n_kv_head * per_group + 1));
        if (qblocks > fit) {
            const bool was = m.in_split;
            m.in_split = true;
            try {
                for (int done = 0; done < n;) {
                    const int part = static_cast<int>(std::min<int64_t>(n - done, (m.n_past / B + fit) * B - m.n_past));
                    forward(tokens + done, part, logits,
                            embeddings ? embeddings + static_cast<int64_t>(done) * c.d_model : nullptr);
                    done += part;
                }
            } catch (...) {
                m.in_split = was;
                throw;
            }
            m.in_split = was;
            return;
        }
    }
    m.grow(n);
    const int64_t d = c.d_model, dq = static_cast<int64_t>(c.n_head) * c.head_dim,
                  dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    m.host_x.resize(static_cast<size_t>(n * d));
    for (int i = 0; i < n; ++i) {  // as LlamaModel::forward (no embed_scale: cuda_unsupported refuses it)
        if (embeddings && tokens[i] == LlamaModel::kEmbeddingToken)
            std::copy(embeddings + i * d, embeddings + (i + 1) * d, m.host_x.data() + i * d);
        else
            embed_row(m.model.weights().tok_embd, tokens[i], m.host_x.data() + i * d);
    }
    ck(cudaMemcpyAsync(m.x, m.host_x.data(), m.host_x.size() * 4, cudaMemcpyHostToDevice, m.stream), "cudaMemcpyAsync (embeddings)");

    cuda::MsaShape s;
    s.pos0 = m.n_past;
    s.n_q = n;
    s.n_head = c.n_head;
    s.n_kv_head = c.n_kv_head;
    s.head_dim = c.head_dim;
    s.block_size = m.cache->config().block_size;
    // Sparse once the context has more blocks than the top-k and the window hold (else every
    // block is read, as on the CPU). A selection row holds the top-k, the window and the growth.
    const bool sparse = m.msa.enabled && s.n_kv_blocks() > m.msa.top_k + m.msa.force.window;
    const int top_k = sparse ? m.msa.width() : static_cast<int>(s.n_kv_blocks());
    const int splits = n == 1 ? std::clamp(top_k / 4, 1, 16) : 1;
    m.last_top_k = 0;  // until this call's selections are complete (sel may be reallocated below)
    const int64_t sel_need = s.n_tasks() * top_k * (sparse ? c.n_layer : 1);
    m.reserve(m.sel, m.sel_ints, sel_need, 4);
    // Token masses for citations: MSA calls of one query, when asked for.
    const bool rec = m.record && m.msa.enabled && n == 1;
    const int64_t mass_per_layer = static_cast<int64_t>(c.n_kv_head) * top_k * s.block_size;
    m.rec_top_k = 0;
    if (rec) m.reserve(m.tmass, m.tmass_floats, mass_per_layer * c.n_layer, 4);
    const int n_cand = sparse ? std::max(m.msa.top_k, m.msa.n_cand) : 0;
    if (sparse) m.reserve(m.hws, m.hws_bytes, cuda::msa_hybrid_workspace_bytes(s, n_cand, m.msa.top_k), 1);
    if (sparse && m.msa.extends()) {
        m.reserve(m.top_sel, m.top_sel_ints, s.n_tasks() * m.msa.top_k, 4);
        m.reserve(m.xws, m.xws_bytes, cuda::msa_extend_workspace_bytes(s, m.msa.growth.room), 1);
    }
    m.reserve(m.ws, m.ws_floats, cuda::msa_workspace_floats(s, splits), 4);
    if (!sparse) ck(cuda::msa_select_all(s, top_k, m.sel, m.stream), "msa_select_all");
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const int style = c.rope_style == kernels::RopeStyle::Neox ? 1 : 0;
    const int64_t nd = static_cast<int64_t>(n) * d;
    // Position remapping (MsaConfig::positions = Remap): on for calls whose last query lies far
    // from block 0 (before that no block is far from any query). Each layer's far rows are
    // q^ = R(W - p) q (its q rotated by W - p, per query), their group means the index's rows.
    cuda::MsaRemap remap;
    const int64_t W = m.msa.enabled ? m.msa.remap_window : 0;
    if (W > 0 && s.n_kv() - 1 >= s.block_size - 1 + W) {
        remap.window = W;
        remap.q_far = m.q_far;
        remap.iq_far = m.iq_far;
        remap.rel = m.msa.rel;
        remap.rot_dim = c.rope_dim;
        remap.style = style;
        m.host_far_pos.resize(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) m.host_far_pos[static_cast<size_t>(i)] = W - (m.n_past + i);
        ck(cudaMemcpyAsync(m.far_pos, m.host_far_pos.data(), static_cast<size_t>(n) * 8, cudaMemcpyHostToDevice,
                           m.stream),
           "cudaMemcpyAsync (remap positions)");
    }
    std::string error;
    for (int l = 0; l < c.n_layer; ++l) {
        const Impl::Layer& L = m.layers[static_cast<size_t>(l)];
        ck(cuda::rms_norm(m.xn, m.x, L.attn_norm, n, d, c.rms_eps, m.stream), "rms_norm");
        m.linear(L.wq, m.xn, n, m.q);
        m.linear(L.wk, m.xn, n, m.k);
        m.linear(L.wv, m.xn, n, m.v);
        for (int i = 0; i < n; ++i) {  // biases (qwen2): one add per row
            if (L.bq) ck(cuda::add(m.q + i * dq, L.bq, dq, m.stream), "add (bq)");
            if (L.bk) ck(cuda::add(m.k + i * dkv, L.bk, dkv, m.stream), "add (bk)");
            if (L.bv) ck(cuda::add(m.v + i * dkv, L.bv, dkv, m.stream), "add (bv)");
        }
        ck(cuda::rope(m.q, n, c.n_head, c.head_dim, c.rope_dim, m.n_past, nullptr, c.rope_base, c.rope_freq_scale, style,
                      m.stream, m.rope_freq_factors), "rope (q)");
        ck(cuda::rope(m.k, n, c.n_kv_head, c.head_dim, c.rope_dim, m.n_past, nullptr, c.rope_base, c.rope_freq_scale,
                      style, m.stream, m.rope_freq_factors), "rope (k)");
        m.append(l, m.n_past, n, m.k, m.v);
        if (remap.on()) {
            ck(cudaMemcpyAsync(m.q_far, m.q, static_cast<size_t>(n) * dq * 4, cudaMemcpyDeviceToDevice, m.stream),
               "cudaMemcpyAsync (far rows)");
            ck(cuda::rope(m.q_far, n, c.n_head, c.head_dim, c.rope_dim, 0, m.far_pos, c.rope_base, c.rope_freq_scale,
                          style, m.stream, m.rope_freq_factors),
               "rope (far rows)");
            if (sparse) ck(cuda::msa_group_mean(m.q_far, s, m.iq_far, m.stream), "msa_group_mean (far rows)");
        }
        int32_t* sel = m.sel;
        const int64_t ab0 = m.n_past / s.block_size, ab1 = (m.n_past + n - 1) / s.block_size;
        if (sparse) {
            sel = m.sel + static_cast<int64_t>(l) * s.n_tasks() * top_k;
            ck(cuda::msa_group_mean(m.q, s, m.iq, m.stream), "msa_group_mean");
            m.select_tiered(s, l, n_cand, sel, ab0, ab1, remap);
        } else if (m.tiered) {  // a short context: every block of the layer attended
            std::vector<int64_t> all, keep;
            for (int64_t b = 0; b < s.n_kv_blocks(); ++b) {
                all.push_back(b);
                keep.push_back(m.key(l, b));
            }
            m.ensure_resident(l, all, keep);
        }
        ck(cuda::msa_sparse_attention(s, m.q, m.att, scale, sel, top_k, m.cache->k_view(l), m.cache->v_view(l), splits,
                                      m.ws, m.ws_floats, m.stream, remap), "attention");
        if (rec)
            ck(cuda::msa_token_mass(s, m.q, scale, sel, top_k, m.cache->k_view(l), m.tmass + l * mass_per_layer, m.stream,
                                    remap),
               "msa_token_mass");
        m.linear(L.wo, m.att, n, m.o);
        ck(cuda::add(m.x, m.o, nd, m.stream), "add (residual)");
        ck(cuda::rms_norm(m.xn, m.x, L.ffn_norm, n, d, c.rms_eps, m.stream), "rms_norm");
        m.linear(L.gate, m.xn, n, m.g);
        m.linear(L.up, m.xn, n, m.u);
        ck(cuda::silu_mul(m.g, m.g, m.u, static_cast<int64_t>(n) * c.n_ff, m.stream), "silu_mul");
        m.linear(L.down, m.g, n, m.o);
        ck(cuda::add(m.x, m.o, nd, m.stream), "add (residual)");
    }
    const float* last = m.x + (n - 1) * d;
    ck(cuda::rms_norm(m.xn, last, m.output_norm, 1, d, c.rms_eps, m.stream), "rms_norm (output)");
    m.linear(m.output, m.xn, 1, m.logits);
    ck(cudaMemcpyAsync(logits, m.logits, static_cast<size_t>(c.n_vocab) * 4, cudaMemcpyDeviceToHost, m.stream),
       "cudaMemcpyAsync (logits)");
    if (rec) {
        m.rec_sel.resize(static_cast<size_t>(sel_need));
        m.rec_mass.resize(static_cast<size_t>(mass_per_layer * c.n_layer));
        ck(cudaMemcpyAsync(m.rec_sel.data(), m.sel, m.rec_sel.size() * 4, cudaMemcpyDeviceToHost, m.stream),
           "cudaMemcpyAsync (selections)");
        ck(cudaMemcpyAsync(m.rec_mass.data(), m.tmass, m.rec_mass.size() * 4, cudaMemcpyDeviceToHost, m.stream),
           "cudaMemcpyAsync (token mass)");
    }
    ck(cudaStreamSynchronize(m.stream), "forward");
    if (rec) {
        m.rec_top_k = top_k;
        m.rec_pos0 = m.n_past;
        m.rec_shared_sel = !sparse;
    }
    m.n_past += n;
    m.last_tasks = s.n_tasks();
    m.last_top_k = sparse ? top_k : 0;
}

#else  // built without CUDA

struct CudaLlamaRunner::Impl {};
CudaLlamaRunner::CudaLlamaRunner(const LlamaModel&, int, const MsaConfig*, int64_t, int64_t) {
    throw Error("CUDA model: built without CUDA");
}
CudaLlamaRunner::~CudaLlamaRunner() = default;
void CudaLlamaRunner::forward(const int32_t*, int, float*, const float*) { throw Error("CUDA model: built without CUDA"); }
int64_t CudaLlamaRunner::n_past() const { return 0; }
void CudaLlamaRunner::reset() {}
void CudaLlamaRunner::truncate(int64_t) {}
void CudaLlamaRunner::set_backing(const KvCache*, int64_t) {}
void CudaLlamaRunner::download_kv(KvCache&, int64_t) const { throw Error("CUDA model: built without CUDA"); }
bool CudaLlamaRunner::save_pages(const KvCache&, int64_t, const std::function<void(KvPageSource&)>&) const {
    throw Error("CUDA model: built without CUDA");
}
void CudaLlamaRunner::upload_kv(const KvCache&, int64_t, int64_t) { throw Error("CUDA model: built without CUDA"); }
int64_t CudaLlamaRunner::device_bytes() const { return 0; }
std::vector<int32_t> CudaLlamaRunner::last_selection(int) const { return {}; }
void CudaLlamaRunner::set_record_mass(bool) {}
CudaKvTiers CudaLlamaRunner::kv_tiers() const { return {}; }
std::vector<Selection> CudaLlamaRunner::recorded_selections(int) const { return {}; }
int CudaLlamaRunner::last_top_k() const { return 0; }

#endif

}  // namespace sl
