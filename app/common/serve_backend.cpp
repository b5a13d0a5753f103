#include "app/common/serve_backend.h"

#include <algorithm>
#include <filesystem>

#include "core/answer/think_filter.h"
#include "core/ask/ask.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace sl::app {

LocalServeBackend::LocalServeBackend(Library& lib, const LoadedModel& model, Embedder* embedder, Effort effort, int n_ctx,
                                     bool keep_context)
    : lib_(lib), model_(model), embedder_(embedder), effort_(effort), n_ctx_(n_ctx), keep_context_(keep_context) {
    raw_id_ = std::filesystem::path(model.file.name()).filename().string();
    if (raw_id_.size() > 5 && raw_id_.ends_with(".gguf")) raw_id_.resize(raw_id_.size() - 5);
}

std::vector<ModelCard> LocalServeBackend::models() const {
    const int64_t n_train = std::max(2048, model_.model->config().n_ctx_train);
    return {{kLibraryModel, n_ctx_ > 0 ? n_ctx_ : n_train, "sightline"}, {raw_id_, n_train, "sightline"}};
}

std::vector<int32_t> LocalServeBackend::tokenize(std::string_view text) const {
    return model_.tokenizer->encode(text, false, false);
}

ServeResult LocalServeBackend::run(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                                   const std::atomic<bool>& cancel) {
    if (request.model.empty() || request.model == kLibraryModel) return ask_library(request, on_text, cancel);
    if (request.model == raw_id_) return chat(request, on_text, cancel);
    throw FormatError("the request: no model '" + request.model.substr(0, 100) + "' here (the models are " + kLibraryModel +
                      " and " + raw_id_ + ")");
}

ServeResult LocalServeBackend::ask_library(const ChatCompletionRequest& request,
                                           const std::function<void(std::string_view)>& on_text,
                                           const std::atomic<bool>& cancel) {
    AskOptions o;
    o.question = last_user_text(request);
    if (o.question.empty()) throw FormatError("the request: no user message holds a question");
    o.effort = request.effort ? parse_effort(*request.effort) : effort_;
    o.embedder = embedder_;
    o.n_ctx = n_ctx_;
    o.cancel = &cancel;
    o.warm = keep_context_ ? &warm_ : nullptr;
    AskCallbacks cb;
    cb.on_text = on_text;
    ServeResult out;
    AskResult r;
    try {
        r = ask(lib_, model_, o, cb);
    } catch (const Cancelled&) {
        out.finish_reason = "stop";
        return out;
    }
    out.content = r.answer.with_markers();
    out.finish_reason = finish_reason_of(r.answer.stop_reason);
    out.usage.prompt_tokens = r.context_tokens;
    out.usage.completion_tokens = r.answer.steps;
    out.extra = answer_extra_json(r.answer, r.read_summary, r.chat_id);
    return out;
}

ServeResult LocalServeBackend::chat(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                                    const std::atomic<bool>& cancel) {
    const int n_train = std::max(2048, model_.model->config().n_ctx_train);
    const int max_tokens = request.max_tokens > 0 ? std::min(request.max_tokens, n_train / 2) : 256;
    const std::string prompt = model_.chat->render(request.messages, true);
    const std::vector<int32_t> tokens = model_.tokenizer->encode(prompt, false, true);
    if (static_cast<int64_t>(tokens.size()) + max_tokens > n_train)
        throw FormatError("the request: the messages are " + std::to_string(tokens.size()) + " tokens; with " +
                          std::to_string(max_tokens) + " for the answer they exceed the model's context of " +
                          std::to_string(n_train));
    SessionOptions so;
    so.n_ctx = static_cast<int>(tokens.size()) + max_tokens + 8;
    Session session(model_, so);
    session.prefill(tokens);
    GenerateOptions g;
    g.max_tokens = max_tokens;
    g.stop = model_.chat->stop_strings();
    if (request.temperature == 0) g.sampling.greedy = true;
    else if (request.temperature > 0) g.sampling.temperature = static_cast<float>(request.temperature);
    ServeResult out;
    ThinkFilter think(model_.chat->opens_thinking());
    const bool thinks = model_.chat->thinks();
    auto visible = [&](std::string_view t) {
        if (t.empty()) return;
        out.content.append(t);
        on_text(t);
    };
    const GenerateStats st = session.generate(g, [&](std::string_view t) {
        if (thinks) visible(think.feed(t));
        else visible(t);
        return !cancel.load();
    }, &cancel);
    if (thinks) visible(think.finish());
    out.finish_reason = finish_reason_of(st.stop_reason);
    out.usage.prompt_tokens = static_cast<int64_t>(tokens.size());
    out.usage.completion_tokens = st.generated_tokens;
    return out;
}

}  // namespace sl::app
