// Asking the library a question: the one flow `sightline-cli ask`, `quickstart` and the desktop app
// share (they are thin adapters around ask()). Free of Qt.
//
//   documents -> every unit ranked for the question (unit_ranking.h: BM25 fused with MiniLM)
//   -> a context: the library's own saved prefill when one is recorded (restored; the best
//      ranked units it has not read appended after it), else the best ranked units of the whole
//      library that fit the budget (plan_budget with global priorities)
//   -> prefill (saved, and restored when the same context recurs; the kv/ folder's cap evicts the
//      least recently used files); an owner that asks again and again (the app, serve) keeps the
//      library prefill's session in memory between questions (AskOptions::warm, warm_context.h)
//   -> the question turn -> the answer streams (AnswerGuard stops repetition loops; an answer cut
//      by the token budget is cut back to its last sentence end and says so) while the
//      SelectionCollector records MSA's selections
//   -> citations: attention mass fused with each unit's support of each sentence (citations.h)
//   -> the chat stored in the library; the kv/ folder trimmed to its size cap (kv_budget.h).
//
// The attention configuration comes from choose_attention (attention_choice.h), the saved
// context's identity from ContextSpec (context_spec.h).
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
#include "core/ask/visual_context.h"
#include "core/context/effort.h"
#include "core/document/document.h"
#include "core/util/error.h"

namespace sl {
class Library;
using DocId = int64_t;
struct LoadedModel;
class Embedder;
class WarmContext;

struct AskOptions {
    std::string question;
    Effort effort = Effort::Medium;
    bool msa = true;               // false: dense attention (citations from text support alone)
    int n_ctx = 0;                 // 0: the model's training context (SmolLM2: 8192)
    int block_size = 128;          // MSA block / KV page
    bool reuse_kv = true;          // restore / save contexts through the library
    Embedder* embedder = nullptr;  // MiniLM: semantic ranking of units and of citations
    // Subtract the positional baseline (citations.h): after the prefix, a content-free probe (an
    // empty question, probe_tokens answer tokens) is decoded, then cut off (Session::truncate).
    // Needs MSA.
    bool baseline = true;
    int probe_tokens = 16;
    // Answer from the library's own prefill (library_context.h) when one is recorded for these
    // documents, complete or partial: restore what is saved, append the best ranked units it has
    // not read.
    bool use_library_prefill = true;
    int64_t preselect_tokens = 0;  // tokens of unread units appended to a library prefill (0: 1024 << effort)
    // The kv/ folder's cap (<= 0: no cap); the library prefill a question reads is not counted
    // (it has its own budget: kv_budget.h).
    int64_t kv_cap_bytes = int64_t{2} << 30;
    const std::atomic<bool>* cancel = nullptr;  // set: stops prefill between chunks and generation; throws Cancelled
    // The answer's sampling: 0 = greedy (the default: citations and evaluations are reproducible);
    // > 0 samples at that temperature (top-k 40, top-p 0.95, min-p 0.05). The probe is always greedy.
    float temperature = 0;
    int threads = 0;  // the session's threads (0: all cores)
    // Where the model runs: auto | cpu | cuda (core/runtime/backend.h). The session stays on the
    // CPU where the device cannot do what the question needs yet (Gemma 3's bidirectional image
    // runs), and AskResult::device says so;
    // "cuda" without a usable device throws sl::Error.
    std::string device = "auto";
    // On the device with MSA: bytes of KV blocks kept in device memory, the rest in pinned host
    // memory (SessionOptions::device_kv_budget_bytes); 0: the whole context on the device.
    int64_t device_kv_budget_bytes = 0;
    // Host RAM for KV pages (SessionOptions::kv_budget_bytes; 0: unlimited): on the CPU the pages
    // past it spill to a mapped temp file; on the device it bounds the pinned host tier, blocks of
    // the saved context past it leaving the device without a copy (the third tier).
    int64_t kv_budget_bytes = 0;
    // A vision tower (model set): the visuals the plan keeps enter as image-patch tokens
    // (visual_context.h), on the CPU; the library's own prefill (text only) is not used then.
    AskVision vision;
    // Owners that answer question after question (the app, serve): the library prefill's session
    // is kept here between questions and taken again instead of restoring the file
    // (warm_context.h). Null: every question restores. Used by this call only.
    WarmContext* warm = nullptr;
};

struct AskResult {
    Answer answer;
    std::string plan;              // what the context holds (BudgetPlan::to_text, or the library's)
    int64_t context_tokens = 0;    // the prefix
    int64_t prefilled_tokens = 0;  // 0 when a saved KV cache was restored whole
    bool restored = false;
    bool warm = false;             // the library prefill came from AskOptions::warm, not its file
    bool baseline = false;         // the positional baseline was measured and subtracted
    std::string kv_note;           // what happened with the KV cache (restored, saved, why not)
    // What the answer read, for the person asking: "all 78,379 tokens of the library (prefilled)"
    // or "31,744 of 78,379 prefilled tokens (R-intro.pdf p. 1-40) and 5 units ranked for the
    // question (R-intro.pdf p. 65, ...); not read: 68 units", or on the question path "12 units
    // ranked best for the question of 310 (R-intro.pdf p. 30, ...)".
    std::string read_summary;
    bool from_library_prefill = false;
    int64_t library_tokens = 0;      // the library context's size (library prefill path)
    int64_t library_saved = 0;       // of which were prefilled (restored from its file)
    double prefill_seconds = 0, decode_seconds = 0;
    double first_token_seconds = 0;  // from the call to the answer's first streamed text
    int64_t chat_id = 0;           // the stored chat
    std::string settings_json;     // as stored with the chat
    std::string attention;         // "msa <mode>, top-k N" or "dense"
    std::string device;            // where the answer ran and why (Session::device_reason)
    // Vision: visuals placed as image tokens, their positions, encoded (0 when restored), seconds.
    int image_visuals = 0;
    int64_t image_positions = 0;
    int images_encoded = 0;
    double encode_seconds = 0;
    std::string vision_note;       // "" without a vision tower; else what the images did
};

struct AskCallbacks {
    std::function<void(const std::string&)> on_status;  // progress lines ("embedding 310 units (once)")
    // The plan, before anything is prefilled.
    std::function<void(const std::string&)> on_plan;
    // Prefill progress: tokens done of total, seconds so far (called after each chunk).
    std::function<void(int64_t, int64_t, double)> on_progress;
    std::function<void(std::string_view)> on_text;      // the answer as it streams (no markers)
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

}  // namespace sl
