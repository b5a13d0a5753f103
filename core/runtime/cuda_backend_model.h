// A LlamaModel's forward pass on CUDA device 0 (kernels/cuda): the weights uploaded once (types the
// device kernels take as they are; any other type dequantized on the host and uploaded as f16), a
// paged bf16 KV cache on the device (core/kvcache/device_kv_cache.h), and attention through the MSA
// sparse kernel: dense (every visible block selected) by default, or MSA with the hybrid index
// (an MsaConfig the device runs: cuda_msa_lacks). Linear layers: decode calls through the
// quantized matrix-vector kernels with f32 activations (up to 4 tokens per pass over the weights);
// prefill calls of 16 tokens or more through cuBLAS GEMMs in bf16 (weights dequantized per call),
// or the matrix-vector kernels when cuBLAS does not load.
//
// Built only with CUDA (SIGHTLINE_HAVE_CUDA); construction throws sl::Error naming the CUDA error
// or what does not fit (e.g. a head_dim the kernels do not take). One forward at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/device_runner.h"

namespace sl {

class LlamaModel;
struct LlamaConfig;
struct MsaConfig;  // core/attention/msa_attention.h

// Why the CUDA runner cannot run a model of this configuration ("" when it can): the pieces its
// kernels do not have yet (Gemma 3's norms, GELU and sliding window; head dims other than 64/128).
// Sessions use it to stay on the CPU with the reason instead of failing.
std::string cuda_unsupported(const LlamaConfig& c);

// One attention configuration for both engines: why the device cannot run the CPU's MsaConfig `c`
// the same way ("BlockMax scoring", "2 dense leading layers", ...), or "" when it can. What the
// device runs (kernels/cuda/msa.cuh): once a call's context has more blocks of 128 tokens than the
// top_k and the window hold, every (query block, KV group) of every layer attends to the local
// block, block 0 when `sink`, the `window_blocks` blocks before the local one, the best of a
// mean-key shortlist by exact block score (top_k blocks with the local one and the sink), and with
// top_p > 0 the blocks the mass-adaptive growth adds (msa_extend_selection); before that, every
// block — the CPU's "hybrid<factor>/group-mean[/sink][/wN][/pNxM][/cNk]" modes
// (core/attention/block_select.h; kTrainingFreeMode, the ask flow's) with top_k 1..64, one
// shortlist factor for prefill and decode, shortlists and growth rooms of up to 256 blocks, and
// original or remapped positions (MsaRemap); no dense leading layers. A call's last query selects
// on its own, as on the CPU (forward runs it as a call of one after the others). Per-token attention mass
// (MsaConfig::token_mass, citations) runs for calls of one query (set_record_mass). Pure; usable
// without CUDA.
std::string cuda_msa_lacks(const MsaConfig& c);

// The device KV cache's tiers (CudaLlamaRunner::kv_tiers): blocks on the device and in the pinned
// host tier (0: no tiers), blocks fetched from / evicted to the host so far, and blocks dropped to
// / refilled from the third tier (the session's saved context, mapped on the host); blocks a lazy
// restore left in the saved context (place_kv; refilled as any dropped one when read).
struct CudaKvTiers {
    int64_t device_blocks = 0, host_blocks = 0;
    int64_t fetched = 0, evicted = 0;
    int64_t dropped = 0, refilled = 0;
    int64_t placed = 0;
};

// Errors: sl::DeviceError for CUDA failures (and device memory exhausted), sl::Error for bad calls.
class CudaLlamaRunner final : public DeviceRunner {
public:
    // n_ctx: most positions the device cache holds. msa: null for dense attention, else the MSA
    // the device runs (copied). device_kv_bytes > 0 and less than the context's K/V: memory tiers
    // (MSA only) — that many bytes of KV blocks on the device, the rest in pinned host memory,
    // the least recently used blocks leaving the device first and the MSA shortlist's blocks
    // fetched before each selection (the same selections as with every block resident); a call
    // of more query blocks than the budget holds at once goes in parts (forward).
    // Throws sl::Error without a usable device, naming what of `msa` the device lacks
    // (cuda_msa_lacks), or for a budget below 2 x n_kv_head x (the widest shortlist or
    // selection) + 8 blocks, or with dense attention.
    // host_kv_bytes > 0 (tiers only): the pinned host tier holds that many bytes of blocks at most;
    // past it, blocks of the saved context (set_backing) leave the device without a copy and are
    // read back from the host's mapped file (the third tier); a block not saved yet that finds the
    // host tier full is a DeviceError.
    CudaLlamaRunner(const LlamaModel& model, int n_ctx, const MsaConfig* msa = nullptr, int64_t device_kv_bytes = 0,
                    int64_t host_kv_bytes = 0);
    ~CudaLlamaRunner() override;
    CudaLlamaRunner(const CudaLlamaRunner&) = delete;
    CudaLlamaRunner& operator=(const CudaLlamaRunner&) = delete;

    // Runs tokens[0..n) at positions n_past()..n_past()+n-1 and writes the logits of the last one
    // (n_vocab floats, host memory). Positions whose token is LlamaModel::kEmbeddingToken take their
    // input row from `embeddings` (n, d_model) host floats (image-patch tokens; causal, as every
    // call here); null: plain tokens. Throws sl::Error on bad tokens, a full context or a CUDA error.
    void forward(const int32_t* tokens, int n, float* logits, const float* embeddings = nullptr) override;

    int64_t n_past() const override;
    void reset() override;  // forgets the context (the cache blocks are reused)
    // Keeps the first n positions (n <= n_past()); the next forward writes from position n on.
    void truncate(int64_t n) override;
    // The third tier (DeviceRunner::set_backing): with the host tier bounded (host_kv_bytes) and
    // full, blocks of positions [0, n) leave the device without a copy and come back from `mirror`.
    void set_backing(const KvCache* mirror, int64_t n) override;
    // The context into the host cache (core/kvcache/kv_transfer.h): positions [from, n_past()) of
    // every layer are written into `dst` (positions before `from` are dst's already), then dst's
    // n_past is n_past(). For saving a context. Throws sl::Error on a CUDA error.
    void download_kv(KvCache& dst, int64_t from) const override;
    // A save without the host copy (DeviceRunner::save_pages): the blocks are read a batch at a
    // time and converted into `mirror`'s page format on the host's cores. False when the mirror's
    // pages are not the device's blocks (another block size).
    bool save_pages(const KvCache& mirror, int64_t from, const std::function<void(KvPageSource&)>& write) const override;
    // Replaces positions [from, n) of the context with `src`'s (n <= src.n_past()), uploaded: the
    // first `from` positions stay (from <= n_past(); 0: the whole context is replaced); the next
    // forward continues at position n. For a restored context (from > 0: a delta restored onto the
    // held context, Session::restore_delta). Throws sl::Error on a CUDA error or n > n_ctx, leaving
    // the context cut back to `from`.
    void upload_kv(const KvCache& src, int64_t from, int64_t n) override;
    // A lazy restore (DeviceRunner::place_kv; MSA only): every whole block of the context gets its
    // mean key (the saved means regrouped into the device's blocks of 128) and stays in `src` (the
    // third tier's backing) until read; the partial last block is uploaded. The selections read
    // the blocks they pick from then on (a host sync per layer while some are still out, as with
    // memory tiers), keeping the placed means. False without MSA, with src's pages not 128
    // positions, or means missing.
    bool place_kv(const KvCache& src, int64_t n, int means_block,
                  const std::function<std::vector<float>(int layer)>& means) override;
    // The blocks a lazy restore left in `src` brought back into free device room (DeviceRunner::
    // fill_placed): converted and copied as a selection's refill is, their placed means kept.
    int64_t fill_placed(int64_t max_blocks) override;
    // The device's mean keys of `layer` (bf16 on the device, read back as f32) for a save.
    KvBlockSummaries key_means(int layer) const override;
    int64_t device_bytes() const;  // weights + cache + scratch on the device
    // The blocks each KV group of `layer` attended in the last forward call, (query block, group)
    // rows of top_k ids, ascending, -1-padded; empty when that call attended densely.
    std::vector<int32_t> last_selection(int layer) const;
    int last_top_k() const;  // top_k of the last call's selections (0: dense)

    // Citations (MsaConfig::token_mass on the CPU): with it on, an MSA runner's calls of one query
    // also compute, per layer, the attention mass of each token of each selected block
    // (kernels/cuda/msa.cuh, msa_token_mass) and bring the selections and masses to the host at
    // the end of the call. Off by default; no effect on a dense runner.
    void set_record_mass(bool on) override;
    // The last call's selections of `layer` as the CPU's MsaAttention makes them (msa_attention.h,
    // Selection): one per KV group, blocks ascending with their mass and token_mass (averaged over
    // the group's heads; the call's one query). Empty unless that call had one query and recorded
    // (set_record_mass); a context of at most top_k blocks gives every block, as on the CPU.
    std::vector<Selection> recorded_selections(int layer) const override;

    CudaKvTiers kv_tiers() const;  // the device cache's tiers and their traffic so far

    struct Impl;  // public for the implementation's files (cuda_runner_impl.h)

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace sl
