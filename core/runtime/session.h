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
#include "core/model/llama_model.h"
#include "core/runtime/sampler.h"
#include "core/runtime/thread_pool.h"

namespace sl {

struct LoadedModel;

struct SessionOptions {
    int n_ctx = 4096;     // context length to allocate (capped by nothing but memory)
    int n_threads = 0;    // 0: all cores
    int n_batch = 256;    // prefill chunk (tokens per forward pass)
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

    // Appends `tokens` to the context and runs them through the model in chunks of n_batch.
    // Afterwards last_logits() are the logits after the final token.
    void prefill(std::span<const int32_t> tokens);

    // Samples up to max_tokens tokens after the current context, feeding each back in. on_text
    // receives the answer as complete UTF-8 pieces; returning false from it stops generation.
    GenerateStats generate(const GenerateOptions& options, const std::function<bool(std::string_view)>& on_text,
                           const std::atomic<bool>* cancel = nullptr);

    // Drops the whole context.
    void reset();

    const std::vector<int32_t>& tokens() const { return tokens_; }
    std::span<const float> last_logits() const { return logits_; }
    const GenerateStats& stats() const { return stats_; }
    int n_ctx() const { return kv_.n_ctx(); }
    ThreadPool& pool() { return pool_; }

private:
    void step(std::span<const int32_t> tokens);  // one forward pass, logits of the last token

    const LoadedModel& model_;
    SessionOptions options_;
    ThreadPool pool_;
    KvCache kv_;
    std::unique_ptr<Attention> attention_;
    ForwardScratch scratch_;
    std::vector<int32_t> tokens_;
    std::vector<float> logits_;
    GenerateStats stats_;
};

}  // namespace sl
