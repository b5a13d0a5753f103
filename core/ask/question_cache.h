// A question's prefilled context in the library's kv/ folder, saved so that the same context asked
// again restores instead of prefilling, without a full copy per question: a question context that
// starts like a saved whole context (the library's own prefill, or an earlier question's context)
// is prefilled from where they part and saved as a delta file over it (Session::save_delta,
// core/kvcache/kv_file.h), holding only its own tokens' pages.
//
//   ask ──► restore_question_context(key)            the same context again: restored, no prefill
//        └► find_context_base(tokens) ─► restore base, truncate to the shared prefix
//           ─► prefill the rest ─► save_question_context(key, base)   (a delta over the base)
//
// A base is a whole file (never a delta) of the same model, documents, attention and block size.
// Records are the library's kv_caches rows (Library::save_kv_cache); their settings column is the
// ContextSpec, whose prefix_sha256 hashes the whole context's tokens.
//
// Threading: the calling thread, which owns `lib` and `session`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/ask/context_spec.h"
#include "core/library/library.h"

namespace sl {

class Session;

// What a use of the cache did, for the answer's kv note; `used` collects the files touched (kept
// by kv/'s size cap this time).
struct QuestionCacheNote {
    std::string note;
    std::vector<std::string> used;
    bool onto = false;  // restore_question_context restored a delta onto the context the session held
    void add(const std::string& s) { note += (note.empty() ? "" : "; ") + s; }
};

// A whole saved context whose first `shared` tokens are the context's.
struct ContextBase {
    std::string path;
    int64_t shared = 0;
};

// Restores the context saved under `spec` (encode()) for these documents when it holds exactly
// `tokens`; true then. Otherwise the note says why when a record existed, and the session is left
// empty when one was read (untouched without a record). `held_base`, when given: the session holds
// a prefix of that whole saved context (a library prefill kept in memory, restored from that file,
// cut back to where the question's part begins): a delta file over it is restored onto the session
// (Session::restore_delta: the base is neither read nor indexed again; note.onto says so; a delta
// refused there leaves the session as it was, or empty); anything else is restored whole.
bool restore_question_context(Library& lib, Session& session, const std::string& fingerprint,
                              const std::vector<DocId>& ids, const ContextSpec& spec, const std::vector<int32_t>& tokens,
                              QuestionCacheNote& note, const std::string& held_base = {});

// The whole saved context (same model, documents, attention: msa, block and top-k of `spec`) that
// shares the longest token prefix with `tokens`, when that prefix is at least `min_shared` tokens;
// `shared` is at most tokens.size() - 1 (the rest must be prefilled to have logits).
std::optional<ContextBase> find_context_base(Library& lib, const std::string& fingerprint, const std::vector<DocId>& ids,
                                             const ContextSpec& spec, const std::vector<int32_t>& tokens, int64_t min_shared);

// Saves the session's context under `spec` (a record for these documents): a delta over `base`
// when given (its first base->shared tokens are the session's), else a whole file. Errors are
// noted, not thrown: the answer does not depend on the save.
void save_question_context(Library& lib, const Session& session, const std::string& fingerprint,
                           const std::vector<DocId>& ids, const ContextSpec& spec, const ContextBase* base,
                           QuestionCacheNote& note);

}  // namespace sl
