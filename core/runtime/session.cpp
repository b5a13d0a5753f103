#include "core/runtime/session.h"

#include <chrono>

#include "core/attention/dense_attention.h"
#include "core/model/model_loader.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace sl {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`: text that
// must be held back because the next token may complete a stop string.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
    size_t keep = 0;
    for (const auto& s : stops) {
        for (size_t len = std::min(s.size() - 1, text.size()); len > keep; --len) {
            if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
                keep = len;
                break;
            }
        }
    }
    return keep;
}

}  // namespace

Session::Session(const LoadedModel& model, SessionOptions options, std::unique_ptr<Attention> attention)
    : model_(model),
      options_(options),
      pool_(options.n_threads),
      kv_(model.model->config().n_layer, options.n_ctx, model.model->config().n_kv_head, model.model->config().head_dim),
      attention_(attention ? std::move(attention) : std::make_unique<DenseAttention>()) {}

void Session::step(std::span<const int32_t> tokens) {
    logits_.resize(static_cast<size_t>(model_.model->config().n_vocab));
    model_.model->forward(tokens.data(), static_cast<int>(tokens.size()), static_cast<int64_t>(tokens_.size()), kv_,
                          *attention_, pool_, scratch_, logits_.data(), false);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
}

void Session::prefill(std::span<const int32_t> tokens) {
    const auto start = std::chrono::steady_clock::now();
    if (tokens_.size() + tokens.size() > static_cast<size_t>(kv_.n_ctx()))
        throw Error("prompt of " + std::to_string(tokens.size()) + " tokens does not fit the context (" +
                    std::to_string(kv_.n_ctx() - static_cast<int>(tokens_.size())) + " positions left)");
    const size_t batch = static_cast<size_t>(std::max(1, options_.n_batch));
    for (size_t i = 0; i < tokens.size(); i += batch) step(tokens.subspan(i, std::min(batch, tokens.size() - i)));
    stats_.prompt_tokens = static_cast<int>(tokens.size());
    stats_.prefill_seconds = seconds_since(start);
}

GenerateStats Session::generate(const GenerateOptions& o, const std::function<bool(std::string_view)>& on_text,
                                const std::atomic<bool>* cancel) {
    if (logits_.empty()) throw Error("generate: nothing prefilled");
    const Tokenizer& tok = *model_.tokenizer;
    Sampler sampler(o.sampling);
    const auto start = std::chrono::steady_clock::now();
    stats_.generated_tokens = 0;
    stats_.stop_reason = "max tokens";
    std::string pending;  // decoded bytes not yet passed to on_text
    bool stopped = false;
    std::vector<float> scratch;
    while (stats_.generated_tokens < o.max_tokens) {
        if (cancel && cancel->load()) {
            stats_.stop_reason = "cancelled";
            break;
        }
        scratch = logits_;
        const int32_t next = sampler.sample(scratch.data(), static_cast<int>(scratch.size()), tokens_);
        if (tok.is_end_of_generation(next)) {
            stats_.stop_reason = "eos";
            break;
        }
        if (tokens_.size() >= static_cast<size_t>(kv_.n_ctx())) {
            stats_.stop_reason = "context full";
            break;
        }
        const int32_t one[1] = {next};
        step(one);
        ++stats_.generated_tokens;
        if (!tok.is_control(next)) pending += tok.piece(next);
        // A stop string ends the answer before it.
        for (const auto& s : o.stop) {
            if (const size_t at = pending.find(s); !s.empty() && at != std::string::npos) {
                pending.resize(at);
                stopped = true;
            }
        }
        size_t ready = stopped ? pending.size() : pending.size() - held_back(pending, o.stop);
        ready = unicode::utf8_complete_prefix(std::string_view(pending).substr(0, ready));
        if (ready > 0) {
            if (!on_text(std::string_view(pending).substr(0, ready))) {
                stats_.stop_reason = "cancelled";
                pending.erase(0, ready);
                break;
            }
            pending.erase(0, ready);
        }
        if (stopped) {
            stats_.stop_reason = "stop string";
            break;
        }
    }
    if (!pending.empty() && !stopped && stats_.stop_reason != "cancelled") on_text(pending);
    stats_.decode_seconds = seconds_since(start);
    return stats_;
}

void Session::reset() {
    tokens_.clear();
    logits_.clear();
    kv_.set_n_past(0);
}

}  // namespace sl
