// The library's whole context and its progressive prefill, shared by `sightline-cli prefill`, the
// desktop app's background prefill and `ask` (which answers from what is prefilled so far):
//
//   LibraryContext c = library_context(lib, model);   // every ready document -> one TokenStream
//   LibraryPrefill p(lib, model);                      // session + ProgressivePrefill on c.path
//   p.start(); ... p.status(); p.record(); ... p.wait(); p.record();
//
// The context is question-independent: every ready document in library order, cut to max_tokens
// by the budget planner (pages spread over each document) when larger. Its saved KV file lives in
// the library's kv/ folder as library-<sha256 of the tokens>.slkv and is recorded in the library
// (KvCacheRecord, Partial with the saved extent, then Complete) under its ContextSpec
// (context_spec.h), so that ask finds it by (model fingerprint, documents, spec). Adding or removing a document changes the
// context and so the file: the prefill of the new context starts from the longest prefix it shares
// with one of the library's other saved contexts (PrefillOptions::seeds: after a document is added,
// everything before it), else from the start.
//
// Attention: choose_attention (attention_choice.h) for the context's length at medium effort: the
// training-free MSA mode, block 128, top-k 16, positions remapped past the model's trained context.
//
// Threading: library_context runs on the calling thread (it tokenizes every unit: seconds for a
// long book). A LibraryPrefill is driven from one thread (the one that owns `lib`); its prefill
// runs on a background thread between start() and wait(); status()/cancel()/running() may be
// called from any thread. record() writes to `lib`: call it on the owning thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ask/context_spec.h"
#include "core/attention/msa_attention.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/document/document.h"
#include "core/prefill/progressive_prefill.h"

namespace sl {
class Library;
using DocId = int64_t;
struct LoadedModel;
class Session;
}  // namespace sl

namespace sl {

inline constexpr int64_t kLibraryContextTokens = 131072;

struct LibraryContext {
    std::vector<DocId> ids;          // the documents, in context order
    PreparedContext prepared;        // every unit tokenized (for preselection of the rest)
    BudgetPlan plan;                 // what the context keeps of each document
    TokenStream stream;              // opening + kept units + closing; prefix_tokens == tokens.size()
    ContextOptions builder_options;  // how the stream was built (ContextBuilder)
    MsaConfig msa;                   // attention the prefill runs with
    ContextSpec spec;                // what the saved file is (its KvCacheRecord settings: spec.encode())
    std::string path;                // the saved context file (lib.kv_dir()/library-<hash>.slkv)
    std::string fingerprint;         // model_fingerprint(model)
};

// Throws sl::Error when the library has no ready documents.
LibraryContext library_context(Library& lib, const LoadedModel& model, int64_t max_tokens = kLibraryContextTokens);
// The same from documents already loaded (app::ready_documents: docs and their ids).
LibraryContext library_context(const std::vector<doc::Document>& docs, const std::vector<DocId>& ids, Library& lib,
                               const LoadedModel& model, int64_t max_tokens = kLibraryContextTokens);

struct LibraryPrefillOptions {
    int64_t max_tokens = kLibraryContextTokens;
    int64_t save_every = 2048;
    double progress_interval = 0.5;
    std::string device = "auto";  // auto | cpu | cuda (core/runtime/backend.h); device_reason says
                                  // where it ran and why
    int64_t device_kv_budget_bytes = 0;  // on the device: KV bytes kept there (0: all; SessionOptions)
    int64_t kv_budget_bytes = 0;         // host RAM for KV (0: unlimited; SessionOptions::kv_budget_bytes)
};

class LibraryPrefill {
public:
    // Builds the context (library_context) and a session for it. Throws sl::Error as library_context.
    LibraryPrefill(Library& lib, const LoadedModel& model, LibraryPrefillOptions options = {});
    ~LibraryPrefill();  // cancels and joins a running prefill (what is saved stays)

    LibraryPrefill(const LibraryPrefill&) = delete;
    LibraryPrefill& operator=(const LibraryPrefill&) = delete;

    const LibraryContext& context() const { return context_; }
    // Where the prefill runs and why (Session::device_reason).
    const std::string& device_reason() const;

    void start();                    // background thread; resumes from the saved file when it can
    void run();                      // the same on the calling thread
    void cancel();                   // stops within the chunk in flight, saving what it prefilled
    void wait();
    bool running() const;
    PrefillStatus status() const;

    // Records the saved extent in the library: Partial with status().saved tokens, Complete when
    // finished. Writes only when something changed since the last call. Owning thread only.
    void record();

private:
    Library& lib_;
    LibraryContext context_;
    std::unique_ptr<Session> session_;
    std::unique_ptr<ProgressivePrefill> prefill_;
    int64_t record_id_ = 0;
    int64_t recorded_ = -1;
    bool recorded_complete_ = false;
};

}  // namespace sl
