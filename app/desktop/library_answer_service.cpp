#include "app/desktop/library_answer_service.h"

#include "app/common/ask.h"
#include "core/answer/answer.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"

namespace sl::desktop {

LibraryAnswerService::LibraryAnswerService(std::filesystem::path library_dir, std::string model_path, int n_ctx)
    : LibraryAnswerService(std::move(library_dir), std::make_shared<SharedModel>(std::move(model_path)), n_ctx) {}

LibraryAnswerService::LibraryAnswerService(std::filesystem::path library_dir, std::shared_ptr<SharedModel> model,
                                           int n_ctx)
    : dir_(std::move(library_dir)), model_(std::move(model)), n_ctx_(n_ctx) {}

LibraryAnswerService::~LibraryAnswerService() = default;

Answer LibraryAnswerService::answer(const std::string& question, const DocumentList&, const AnswerOptions& options,
                                    const std::function<bool(std::string_view)>& on_text,
                                    const std::atomic<bool>* cancel) {
    const std::lock_guard lock(mutex_);
    const std::shared_ptr<const LoadedModel> model = model_->get();
    Library lib = Library::open(dir_);
    app::AskOptions o;
    o.question = question;
    o.effort = options.effort == Effort::Low ? sl::Effort::Low
               : options.effort == Effort::High ? sl::Effort::High
                                                : sl::Effort::Medium;
    o.n_ctx = n_ctx_;
    o.cancel = cancel;
    std::string streamed;
    app::AskCallbacks cb;
    cb.on_text = [&](std::string_view t) {
        streamed += t;
        if (on_text && !(cancel && cancel->load())) on_text(t);
    };
    Answer a;
    a.question = question;
    a.model = model_->path().filename().string();
    app::AskResult r;
    try {
        r = app::ask(lib, *model, o, cb);
    } catch (const app::Cancelled&) {
        // Stopped: keep what was streamed (no citations: they come at the end).
        a.text = streamed;
        a.method = "stopped before the end";
        a.finished = true;
        return a;
    }
    const sl::Answer& in = r.answer;

    a.text = in.with_markers();
    a.context_tokens = static_cast<int>(r.context_tokens);
    a.read_summary = r.read_summary;
    a.method = "one long context with MSA; citations from the engine's block selections, verified " +
               std::string(o.embedder ? "lexically and semantically" : "lexically");
    if (r.from_library_prefill) {
        const bool all = r.library_saved >= r.library_tokens;
        a.method += all ? "; the library's prefilled context" : "; the library's prefill so far plus a preselection";
    } else if (r.restored) {
        a.method += "; prefill restored from the library";
    }
    for (size_t i = 0; i < in.citations.size(); ++i) {
        const sl::Citation& c = in.citations[i];
        Citation d;
        d.number = c.number;
        d.ref = c.ref;
        d.path = c.path;
        d.locator = c.locator;
        d.excerpt = !c.snippet.empty() ? c.snippet : c.text.substr(0, 400);
        d.score = c.share;
        if (!in.used(i)) {
            d.weak_reason = "read, not cited by any sentence";
        } else if (in.weak(i)) {
            d.weak = true;
            double best = 0;
            for (const auto& s : in.sentences)
                for (const auto& sup : s.supports)
                    if (sup.citation == static_cast<int>(i)) best = std::max(best, sup.lexical);
            d.weak_reason = "its text backs the sentence poorly (word overlap " +
                            std::to_string(static_cast<int>(best * 100)) + "%)";
        }
        a.citations.push_back(std::move(d));
    }
    a.finished = true;
    return a;
}

}  // namespace sl::desktop
