// Pieces the local ask flow (ask.cpp) and the remote one (remote_ask.cpp) share: ranking the
// library's units, the evidence citations verify against, the reading summary and the stored chat.
// Internal to core/ask. Threading as ask.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/answer/citations.h"
#include "core/ask/ask.h"
#include "core/ask/unit_ranking.h"
#include "core/context/context_builder.h"
#include "core/context/token_stream.h"

namespace sl {

class JsonWriter;
class Tokenizer;

using AskClock = std::chrono::steady_clock;
double since(AskClock::time_point t);
std::string now_iso();  // "2026-12-06T04:00:00Z"

// Every unit of `p` ranked for the question (BM25 fused with MiniLM when o.embedder is set; the
// passage embeddings cached in the library's embed/ folder), with progress on cb.on_status.
UnitRanking rank_for(const PreparedContext& p, Library& lib, const Tokenizer& tok, const AskOptions& o,
                     const AskCallbacks& cb);

// What the answer could cite: each unit of `ts` with its text and passage embeddings.
std::vector<UnitEvidence> evidence_of(const TokenStream& ts, const PreparedContext& p, const UnitRanking& rank);

// "12 units ranked best for the question, of 310 (R-intro.pdf p. 30, p. 31, ...)": the units of
// `ts` from token `from` on.
std::string describe_ranked(const TokenStream& ts, size_t of, int64_t from);

// Stores the chat (question, answer with markers, citations, settings) in the library; sets
// r.settings_json and r.chat_id. The settings hold the effort, what engine_fields writes (the
// attention, model, context size), the context's units and the documents.
void store_chat(Library& lib, const AskOptions& o, const TokenStream& ts, const std::vector<DocId>& ids, AskResult& r,
                const std::function<void(JsonWriter&)>& engine_fields);

}  // namespace sl
