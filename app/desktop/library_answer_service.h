// The answer pipeline of the library issue behind the chat's AnswerService seam: app::ask over
// the documents in the library store (one long context, MSA prefill saved and reused, citations
// from the engine's own block selections, each verified against the sentence it backs). Weak
// citations ("[2?]" in the text) stay, flagged; sources the answer read but no sentence used are
// listed as "read, not cited".
//
// When the library's background prefill (prefill_controller.h) recorded a context for these
// documents, app::ask answers from it (what is prefilled so far plus a preselection of the rest);
// Answer::read_summary then says what was read. Stop (the chat's cancel flag) stops app::ask
// between prefill chunks and during generation; the text so far is kept.
//
// Threading: answer() runs on a worker thread; it opens its own sl::Library connection there (a
// Library is one connection per thread) and loads the model once (SharedModel: kept, shared
// read-only with the background prefill).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>

#include "app/desktop/answer_service.h"
#include "app/desktop/shared_model.h"

namespace sl::desktop {

class LibraryAnswerService : public AnswerService {
public:
    // `library_dir`: the store the IngestQueue writes to. `n_ctx` 0: the model's trained context.
    LibraryAnswerService(std::filesystem::path library_dir, std::string model_path, int n_ctx = 0);
    // The same with a model shared with others (the background prefill).
    LibraryAnswerService(std::filesystem::path library_dir, std::shared_ptr<SharedModel> model, int n_ctx = 0);
    ~LibraryAnswerService() override;
    std::string name() const override { return "library context (MSA selections)"; }
    Answer answer(const std::string& question, const DocumentList& docs, const AnswerOptions& options,
                  const std::function<bool(std::string_view)>& on_text, const std::atomic<bool>* cancel) override;

private:
    std::filesystem::path dir_;
    std::shared_ptr<SharedModel> model_;
    int n_ctx_;
    std::mutex mutex_;  // one answer at a time
};

}  // namespace sl::desktop
