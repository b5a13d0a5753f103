// A conversation with a loaded model: one context (KV cache), prefill, then streamed generation.
//
// Threading: a Session is used from one thread at a time (it drives its own ThreadPool). The
// LoadedModel it reads must outlive it. on_text callbacks run on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/attention/attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/model/llama_model.h"
#include "core/runtime/backend.h"
#include "core/runtime/device_runner.h"
#include "core/runtime/sampler.h"
#include "core/runtime/thread_pool.h"

namespace sl {

struct LoadedModel;
class MsaAttention;
struct MsaConfig;

// What a caller will ask of a session beyond prefill and generate. A backend that cannot do it
// yet keeps the session on the CPU from the start (device_reason() says why), rather than failing
// halfway through a question: the CUDA runner has no bidirectional runs today (#23). Saved
// contexts, truncation (the device context is mirrored through the host cache) and image
// embeddings in causal calls run there.
struct SessionNeeds {
    bool save_restore = false;   // save(), save_delta(), restore()
    bool truncate = false;       // truncate()
    bool bidirectional = false;  // prefill with bidirectional runs (Gemma 3's image tokens)
};

struct SessionOptions {
    int n_ctx = 4096;     // most positions the context may hold (pages are allocated as filled)
    int n_threads = 0;    // 0: all cores
    int n_batch = 256;    // prefill chunk (tokens per forward pass)
    KvType kv_type = KvType::F16;  // KV storage: F32 (exact), F16, Int8 (per-row scales)
    int kv_block = 128;            // positions per KV page
    // RAM for KV pages; 0: unlimited; beyond it pages spill to a mapped file. On a device with a
    // device_kv_budget_bytes it also bounds the pinned host tier: blocks of the saved context past
    // it leave the device without a copy (the third tier); a context past both tiers that is not
    // saved anywhere goes on on the CPU (DeviceError).
    int64_t kv_budget_bytes = 0;
    std::string kv_spill_dir;      // where the spill file goes; empty: the system temp dir
    // On CUDA with MSA: bytes of KV blocks kept on the device, the rest in pinned host memory
    // (CudaLlamaRunner's memory tiers); 0: the whole context on the device.
    int64_t device_kv_budget_bytes = 0;
    std::string device = "auto";   // auto | cpu | cuda (core/runtime/backend.h); CUDA runs dense attention and the MSA it has (cuda_msa_lacks)
    SessionNeeds needs;            // what the caller will use; decides, with the attention, the device
    // Where the model runs when set: the runner it returns (given the session's MSA configuration,
    // or null for dense attention) instead of the backend `device` chooses — the seam the device
    // paths are tested through on machines without a GPU, and a place for other devices.
    std::function<std::unique_ptr<DeviceRunner>(const LoadedModel&, const MsaConfig*)> runner_factory;
};

struct GenerateOptions {
    int max_tokens = 256;
    SamplingParams sampling;
    std::vector<std::string> stop;  // texts that end the answer (not included in it)
};

struct GenerateStats {
    int prompt_tokens = 0;      // prefilled by the last prefill()
    int generated_tokens = 0;
    double prefill_seconds = 0;
    double decode_seconds = 0;
    std::string stop_reason;    // "eos", "stop string", "max tokens", "context full", "cancelled"
};

class Session {
public:
    Session(const LoadedModel& model, SessionOptions options = {}, std::unique_ptr<Attention> attention = {});
    ~Session();

    // Appends `tokens` to the context and runs them through the model in chunks of n_batch.
    // Afterwards last_logits() are the logits after the final token.
    void prefill(std::span<const int32_t> tokens);
    // The same with image embeddings (core/vision/patch_tokens.h): positions whose token is
    // LlamaModel::kEmbeddingToken take their input row from `embeddings`, (tokens.size(), d_model),
    // rows of other positions ignored; null: plain tokens. The context keeps kEmbeddingToken at
    // those positions (the sampler's repeat penalty skips them).
    void prefill(std::span<const int32_t> tokens, const float* embeddings);
    // The same where the [begin, end) runs of `bidirectional` (positions within `tokens`, in order,
    // not overlapping) attend to each other both ways: each run is one forward call of its own,
    // whatever n_batch (Gemma 3's image tokens: MultimodalStream::bidirectional). Dense attention
    // only (MSA refuses such a call in its sparse layers).
    void prefill(std::span<const int32_t> tokens, const float* embeddings,
                 std::span<const std::pair<int64_t, int64_t>> bidirectional);

    // Samples up to max_tokens tokens after the current context, feeding each back in. on_text
    // receives the answer as complete UTF-8 pieces; returning false from it stops generation.
    GenerateStats generate(const GenerateOptions& options, const std::function<bool(std::string_view)>& on_text,
                           const std::atomic<bool>* cancel = nullptr);

    // Drops the whole context.
    void reset();

    // Keeps the first n tokens of the context and forgets the rest (a probe decoded after a prefix,
    // a question turn), without touching the prefix's KV pages. Afterwards last_logits() is empty
    // until the next prefill. Throws sl::Error when n exceeds the context.
    void truncate(int64_t n);  // on CUDA too (the device keeps its first n positions)

    // Saves the context (tokens, KV pages, logits after the last token, and the attention's index
    // keys where it keeps any: Attention::index_keys, MSA native mode) to `path` (format:
    // core/kvcache/kv_file.h). When `path` already holds a saved prefix of this context with the
    // same model and cache settings, only what is new is appended (pages from the prefix's last
    // block on, and a commit); otherwise the file is written anew through a temp file renamed over
    // it. Crash-safe: a kill during save leaves the previously saved context readable.
    // Throws IoError / Error naming the file. On CUDA the device's K/V are first copied into the
    // host cache (what is new since the last save or restore; bf16 -> the cache's storage type), so
    // the file is the same format and restores on either engine.
    void save(const std::string& path) const;

    // Saves the context as a delta file over `base_path` (a whole saved context in the same folder
    // whose first `shared` tokens are this context's, 0 < shared < tokens): only the tokens and
    // pages from position `shared` on are written (core/kvcache/kv_file.h); restore() reads the
    // rest from the base, which must still hold those tokens then. Written anew (temp file renamed
    // over `path`). Throws Error / IoError naming the file when the base does not fit.
    void save_delta(const std::string& path, const std::string& base_path, int64_t shared) const;

    // Replaces the context with the one saved in `path`, without prefill: tokens, last logits, the
    // KV pages (read from the file through a map; pages the session writes afterwards go to RAM),
    // and the index keys the file holds for every token (handed to the attention).
    // Throws FormatError naming the file and what is wrong when it is corrupt, truncated, of another
    // version, of another model (fingerprint) or other cache settings (storage type, block size), or
    // holds more tokens than n_ctx; the session is then left empty (callers rebuild by prefilling).
    // A delta file (save_delta) restores with its base; a missing or changed base is a FormatError.
    // A file saved under another attention (Attention::signature(), e.g. dense vs MSA) restores (its
    // K/V are valid, just computed differently); save() appends only to files of the same signature.
    // One writer per file at a time.
    // keep >= 0 and fewer than the file holds: only its first `keep` tokens (as restore, then
    // truncate(keep), but the file may hold more than n_ctx); last_logits() is then empty.
    // On CUDA the restored K/V are then uploaded to the device (rounded to bf16); with MSA and
    // block summaries in the file only their mean keys are (DeviceRunner::place_kv), and the
    // device reads a block from the mapped file when its attention first picks it, so a damaged
    // page there is found by the step that first reads it, as on the CPU.
    // Pages are checked against their checksums when first read (KvCache::attach), not here: a
    // restore reads only the file's headers, tokens, logits, index keys and block summaries, and
    // an answer only the pages it attends to (with MSA a few blocks of a million tokens). A page
    // that fails its check makes the call that read it (prefill, generate, an upload onto the
    // device within restore, a save) throw DamagedContextError naming the file it came from; the
    // session is then emptied (a save leaves it as it was and writes nothing).
    void restore(const std::string& path, int64_t keep = -1);

    // Restores the delta file `path` (save_delta) onto the context this session holds, which must
    // begin with its base's p tokens: positions [0, p) stay, with what the attention derived from
    // them (MSA's block index and native index keys, up to the page holding p, which the delta
    // replaces), and only the delta's tokens, pages (through a map), index keys and logits are read
    // — on CUDA only positions [p, n) are uploaded. The result equals restore(path) when the
    // session's first p positions hold the K/V the base file holds (the caller vouches: the session
    // was restored from the base — or, on the CPU, saved it — with this model and attention, and
    // nothing rewrote those positions since); their tokens are checked against the base's hash.
    // Returns false, the session unchanged, when `path` is not a delta over what the session holds
    // (or a device session's host mirror lacks those positions): callers restore() then. Throws
    // FormatError / Error as restore() for a bad file, the session unchanged (a failure after the
    // file was checked, such as memory, leaves it empty). A device that fails during the upload
    // hands the context to the CPU, as restore() does.
    bool restore_delta(const std::string& path);

    // On a device after a restore that left the context's blocks in the saved file (MSA: a step
    // reads the blocks it picks from there): brings back up to max_blocks more into free device
    // room (DeviceRunner::fill_placed), so that later questions and decode find them resident.
    // For idle time between questions (WarmContext::fill); the context is unchanged. Returns how
    // many came back (0: none out, no room, or not on a device). A page that fails its check
    // throws DamagedContextError (the session then empty, as after a step); a device failure
    // throws DeviceError, and the next step hands the context to the CPU first (nothing is
    // recomputed in idle time for a session its owner then drops).
    int64_t fill_device(int64_t max_blocks);

    const std::vector<int32_t>& tokens() const { return tokens_; }
    std::span<const float> last_logits() const { return logits_; }
    const GenerateStats& stats() const { return stats_; }
    int n_ctx() const { return kv_.n_ctx(); }
    const KvCache& kv_cache() const { return kv_; }
    Attention& attention() { return *attention_; }
    ThreadPool& pool() { return pool_; }
    // Where the model runs and why ("CUDA: NVIDIA H200 (...)", "CPU: CUDA device not usable: ...").
    // A device that fails (sl::DeviceError) mid-context hands the context to the CPU: the host
    // mirror's positions are kept, the rest prefilled again, the call that failed run on the CPU,
    // and this says so ("CPU: the CUDA device failed (...); the context went on on the CPU").
    const std::string& device_reason() const { return backend_.reason; }
    bool on_gpu() const { return gpu_ != nullptr; }

private:
    // One forward pass, logits of the last token; `embeddings` as in prefill (rows of `tokens`).
    void step(std::span<const int32_t> tokens, const float* embeddings = nullptr, bool causal = true);

    const LoadedModel& model_;
    SessionOptions options_;
    ThreadPool pool_;
    // On CUDA the device holds the context and kv_ mirrors its first mirrored_ positions (filled by
    // save, set by restore): mutable because saving is a const operation of the session.
    mutable KvCache kv_;
    mutable int64_t mirrored_ = 0;
    void set_mirrored(int64_t n) const;  // mirrored_ = n, and the runner told (DeviceRunner::set_backing)
    // Copies the device's positions [mirrored_, tokens) into kv_ (a save to `path`, which a device
    // failure names).
    void mirror_device(const std::string& path) const;
    // Writes a save's pages through `write` (write_kv_file / append_kv_file over a KvPageSource): on
    // a device straight from its blocks (DeviceRunner::save_pages), then mirror_from_file;
    // otherwise from kv_, mirrored first. A device failure is a DeviceError naming `path`.
    void write_pages(const std::string& path, const std::function<void(KvPageSource&)>& write) const;
    // On a device: the mirror maps the pages of `path`, which holds this context (and, for a
    // delta, its base's where the mirror lacks them), then mirrors all of it; maps of earlier
    // files no page reads any more are let go. False, the mirror as
    // it was, when the file (or its base) cannot be mapped or is not this context's.
    bool mirror_from_file(const std::string& path) const;
    void fall_back_to_cpu(const std::string& what);  // the device failed: the context goes on on the CPU
    std::string device_failure_;  // an idle fill's DeviceError, handed to the CPU by the next step
    std::unique_ptr<Attention> attention_;
    BackendChoice backend_;
    std::unique_ptr<DeviceRunner> gpu_;  // set when the model runs on a device (then kv_ is the mirror)
    MsaAttention* msa_ = nullptr;           // attention_ when it is MSA run by gpu_ (selections come back to it)
    ForwardScratch scratch_;
    const std::string& fingerprint() const;
    // Throws FormatError naming `name` when a file saved as `info` does not fit this session
    // (another model, shape, KV storage type or block size).
    void check_file(const KvFileInfo& info, const std::string& name) const;
    KvFileInfo file_info() const;                   // what a save records about this session
    std::vector<KvIndexKeys> index_keys_of() const;  // the attention's index keys, per layer
    // The attention's block summaries of this whole context, per layer (none where it holds fewer).
    std::vector<KvBlockSummaries> summaries_of() const;
    // A restore hands the file's block summaries to the attention for the context's first n
    // positions (a delta file: with its base's, when `base` has them; `onto`: restore_delta, the
    // attention holds the blocks before the delta's).
    void hand_back_summaries(std::span<const uint8_t> file, const KvFileContents& saved, std::span<const uint8_t> base_file,
                             const KvFileContents* base, int64_t n, bool onto);
    // A restore on a device through DeviceRunner::place_kv: the mean keys of the saved block
    // summaries (every layer's, one block size) go up instead of the context's first n positions;
    // false (nothing changed) when the file lacks them or the runner does not take them.
    bool place_on_device(std::span<const uint8_t> file, const KvFileContents& saved, std::span<const uint8_t> base_file,
                         const KvFileContents* base, int64_t n);
    // write_pages with every page handed out checked (a damaged restored page throws before the
    // commit).
    void write_checked(const std::string& path, const std::function<void(KvPageSource&)>& write) const;
    // After reads of the cache: a restored page that failed its checksum empties the session and
    // throws DamagedContextError naming its file (`const`: a save, leaving the session as it is).
    void check_pages();
    void check_pages_saving() const;
    std::string damaged_message(std::string& file) const;
    // Which file the restored pages came from: (first block, path), ascending; later ones win.
    std::vector<std::pair<int64_t, std::string>> page_files_;

    std::vector<int32_t> tokens_;
    std::vector<float> logits_;
    GenerateStats stats_;
    mutable std::string fingerprint_;  // model_fingerprint(model_), computed on first use
    // The file this session last saved to or restored from, as it was then (path, device, inode,
    // size, mtime): a save to it that finds it unchanged checks record headers only; any other
    // file is verified in full before appending to it.
    mutable std::string file_memo_;
};

// What of `needs` the CUDA session cannot do yet, listed ("bidirectional image runs"),
// or "" when nothing: Session keeps such a session on the CPU and says so in device_reason().
std::string device_lacks(const SessionNeeds& needs);

// A cheap identity of a model file for saved contexts: sha256 (hex) of the file's size, its GGUF
// header, metadata and tensor-info region (everything before the tensor data) and 33 evenly spaced
// 4 KiB samples of the tensor data (so fine-tunes with identical metadata differ). ~1 ms.
std::string model_fingerprint(const LoadedModel& model);

}  // namespace sl
