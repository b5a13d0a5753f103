// What `sightline-cli serve` answers with: the library and the local engine (core/ask/ask.h).
//
//   model "sightline" (or none named): the last user message is a question to the library; the
//       answer's text carries citation markers, its "sightline" member the places (openai_api.h);
//       the request's "effort" (low|medium|high) picks the effort, max_tokens is not used (the
//       effort sets the answer's budget). The chat is stored in the library as `ask` stores it.
//   model "<the model file's name>": a plain chat with the local model over the messages as sent
//       (its chat template; greedy when temperature is 0, sampled otherwise; max_tokens, default
//       256); the library is not read. This is what a remote Sightline (`ask --engine`) uses.
//
// The library's prefilled context stays in memory between questions (sl::WarmContext): a question
// after the first on the same saved context does not restore the file again.
//
// Threading: run() on the server's worker thread only (it owns the Library and the sessions);
// models() and tokenize() from the server's thread (the tokenizer is reentrant).
#pragma once

#include <string>

#include "app/common/api_server.h"
#include "core/ask/warm_context.h"
#include "core/context/effort.h"

namespace sl {
class Library;
struct LoadedModel;
class Embedder;
}  // namespace sl

namespace sl::app {

class LocalServeBackend final : public ServeBackend {
public:
    static constexpr const char* kLibraryModel = "sightline";
    // `lib`, `model` and `embedder` (may be null) must outlive the backend.
    // keep_context: the library prefill's session stays in memory between questions (false:
    // restored from its file for each).
    LocalServeBackend(Library& lib, const LoadedModel& model, Embedder* embedder, Effort effort, int n_ctx = 0,
                      bool keep_context = true);

    std::vector<ModelCard> models() const override;
    std::vector<int32_t> tokenize(std::string_view text) const override;
    ServeResult run(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                    const std::atomic<bool>& cancel) override;
    // The kept session's context, a slice of it, brought from its saved file onto the device
    // (WarmContext::fill).
    bool idle() override { return keep_context_ && warm_.fill() > 0; }

    // The plain model's id: the file name without ".gguf".
    const std::string& raw_id() const { return raw_id_; }

private:
    ServeResult ask_library(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                            const std::atomic<bool>& cancel);
    ServeResult chat(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                     const std::atomic<bool>& cancel);

    Library& lib_;
    const LoadedModel& model_;
    Embedder* embedder_;
    Effort effort_;
    int n_ctx_;  // library answers' context (0: the model's)
    std::string raw_id_;
    // The library prefill's session, kept between questions (the next one on the same saved
    // context takes it instead of restoring the file).
    WarmContext warm_;
    bool keep_context_;
};

}  // namespace sl::app
