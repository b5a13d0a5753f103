// Asking the library a question, the flow `sightline-cli ask` and the app share: the library's
// documents -> context builder -> budget plan -> prefill (or restore a saved KV cache of the same
// context) -> the question turn -> streamed answer while the SelectionCollector records MSA's
// selections -> citations -> verification -> the chat stored in the library.
//
// When the documents do not fit n_ctx, the plan keeps the units that a lexical (BM25) ranking for
// the question prefers; the context then depends on the question and is cached per plan (its
// settings carry a hash of the prefix), so a KV cache is reused when the same context recurs.
//
// When the library's own prefill (library_prefill.h) is recorded for the current documents, that
// comes first: its saved prefix is restored (all of it when complete); when partial, a lexical
// (+ MiniLM when an embedder is given) preselection of the units it has not reached is appended
// (preselect.h), then the closing; AskResult::read_summary says what the answer read. The
// positional baseline's probe is cut off again with Session::truncate.
//
// Threading: runs on the calling thread (the model's thread pool does the work); callbacks run on
// it too. The Library and LoadedModel must outlive the call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/answer/answer.h"
#include "core/context/effort.h"
#include "core/document/document.h"
#include "core/util/error.h"

namespace sl {
class Library;
using DocId = int64_t;
struct LoadedModel;
class Embedder;
}  // namespace sl

namespace sl::app {

struct AskOptions {
    std::string question;
    Effort effort = Effort::Medium;
    bool msa = true;               // false: dense attention (no selections, so no citations)
    int n_ctx = 0;                 // 0: the model's training context (SmolLM2: 8192)
    int block_size = 128;          // MSA block / KV page
    bool reuse_kv = true;          // restore / save the prefilled prefix through the library
    Embedder* embedder = nullptr;  // semantic verification when set
    // Subtract the positional baseline (citations.h): after the prefix, a content-free probe (an
    // empty question, probe_tokens answer tokens) is decoded, then cut off (Session::truncate).
    // Needs MSA.
    bool baseline = true;
    int probe_tokens = 16;
    // Answer from the library's own prefill (library_prefill.h) when one is recorded for these
    // documents, complete or partial: restore what is saved, append a preselection of the rest.
    bool use_library_prefill = true;
    int64_t preselect_tokens = 0;     // tokens of not-yet-prefilled units placed into the context (0: 2048)
    const std::atomic<bool>* cancel = nullptr;  // set: stops prefill between chunks and generation; throws Cancelled
};

struct AskResult {
    Answer answer;
    std::string plan;              // BudgetPlan::to_text()
    int64_t context_tokens = 0;    // the prefix
    int64_t prefilled_tokens = 0;  // 0 when a saved KV cache was restored
    bool restored = false;
    bool baseline = false;         // the positional baseline was measured and subtracted
    std::string kv_note;           // what happened with the KV cache (restored, saved, why not)
    // What the answer read, for the person asking: "all 78,379 tokens of the library (prefilled)"
    // or "31,744 of 78,379 prefilled tokens (R-intro.pdf p. 1-40) and 5 preselected units
    // (R-intro.pdf p. 65, p. 88, ...); not read: 68 units". Empty on the question-specific path
    // (the plan says what was kept).
    std::string read_summary;
    bool from_library_prefill = false;
    int64_t library_tokens = 0;      // the library context's size (library prefill path)
    int64_t library_saved = 0;       // of which were prefilled (restored from its file)
    double prefill_seconds = 0, decode_seconds = 0;
    double first_token_seconds = 0;  // from the call to the answer's first streamed text
    int64_t chat_id = 0;           // the stored chat
    std::string settings_json;     // as stored with the chat
};

struct AskCallbacks {
    std::function<void(const std::string&)> on_status;       // progress lines ("prefilling 6,012 tokens")
    std::function<void(std::string_view)> on_text;           // the answer as it streams (no markers)
};

// The library's ready documents as the context builder reads them (text only: no line boxes, no
// pixels), in library order, with their ids in `ids`. Throws sl::Error when there are none.
std::vector<doc::Document> ready_documents(Library& lib, std::vector<DocId>& ids);

// Thrown when AskOptions::cancel is set during the call.
struct Cancelled : Error {
    using Error::Error;
};

// Throws sl::Error when the library has no ready documents or the context cannot be built.
AskResult ask(Library& lib, const LoadedModel& model, const AskOptions& options, const AskCallbacks& cb = {});

}  // namespace sl::app
