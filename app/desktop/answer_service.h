// The seam between the chat pane and whatever answers questions. Today's implementation is
// LexicalAnswerService (BM25 page/slide/segment ranking + a Session on the chosen model, as
// `sightline-cli quickstart`); the long-context answer pipeline (core/answer) plugs in behind the
// same interface.
//
// Threading: answer() runs on a worker thread (the chat pane calls it through QtConcurrent) and
// never touches widgets; on_text runs on that worker thread. One answer() at a time per service.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "app/desktop/answer_types.h"
#include "core/document/document.h"

namespace sl {
struct LoadedModel;
}

namespace sl::desktop {

using DocumentList = std::vector<std::shared_ptr<const doc::Document>>;

enum class Effort { Low, Medium, High };
const char* to_string(Effort e);
Effort effort_from_string(const std::string& s);  // unknown -> Medium

struct AnswerOptions {
    Effort effort = Effort::Medium;  // sources read and answer length
    bool greedy = true;
};

class AnswerService {
public:
    virtual ~AnswerService() = default;
    virtual std::string name() const = 0;
    // Answers `question` from `docs`. Streams the answer's text through on_text (return false
    // to stop); the returned Answer holds the whole text with its [n] markers and citations.
    // Throws sl::Error (no model, model file bad, ...); `cancel` stops early.
    virtual Answer answer(const std::string& question, const DocumentList& docs, const AnswerOptions& options,
                          const std::function<bool(std::string_view)>& on_text, const std::atomic<bool>* cancel) = 0;
};

// BM25 over the units of the documents, the best few given to the model as numbered sources; the
// citations are those sources, each verified by lexical overlap with the answer.
class LexicalAnswerService : public AnswerService {
public:
    // `model_path` is loaded on first use (on the worker thread) and kept.
    explicit LexicalAnswerService(std::string model_path);
    ~LexicalAnswerService() override;
    std::string name() const override { return "lexical (BM25) + " + model_name(); }
    Answer answer(const std::string& question, const DocumentList& docs, const AnswerOptions& options,
                  const std::function<bool(std::string_view)>& on_text, const std::atomic<bool>* cancel) override;
    std::string model_name() const;

private:
    std::string model_path_;
    std::mutex mutex_;
    std::unique_ptr<LoadedModel> model_;
};

// A place in a document for a question, without a model: the best units by BM25 and, within each,
// the region (union of the best blocks' boxes) or time range. Exposed for tests and the budget
// preview. Thread-safe.
std::vector<Citation> rank_sources(const std::string& question, const DocumentList& docs, size_t k);

// Marks each citation weak when the answer shares few content words with its excerpt.
void verify_citations(const std::string& answer_text, std::vector<Citation>& citations);

}  // namespace sl::desktop
