// Asking the library with a remote engine (an OpenAI-compatible server: core/remote/chat_engine.h)
// for the answer while everything else stays local: the documents, the ranking of their units for
// the question, the plan of the context and the citations.
//
//   documents -> units ranked for the question (unit_ranking.h, as ask.h)
//   -> the context planned for the remote model's context length, counted in its tokens: the local
//      tokenizer's counts scaled by the ratio the server's tokenize endpoint gives on a sample of
//      the library (x 1.05), or by 1.25 where the server has none
//   -> a system message with the instructions and the units, each opened by its place in
//      brackets ("[R-intro.pdf p. 12]"), then the question -> the answer streams (AnswerGuard
//      stops loops, reasoning text is kept out)
//   -> citations from verification alone: each sentence ranked against the units sent by its words
//      (BM25) and MiniLM cosine (citations.h with no attention record) -> the chat stored.
// Attention-based citations need the local engine; the result's kv_note says so.
//
// Nothing is sent anywhere but to `engine`. Threading as ask.h; the engine is used on the calling
// thread.
#pragma once

#include <string>
#include <vector>

#include "core/ask/ask.h"
#include "core/context/token_stream.h"
#include "core/tokenizer/chat_template.h"

namespace sl {

class ChatEngine;

// `local` gives the tokenizer and chat template the context is planned with (its weights are not
// used). Throws sl::Error (RemoteError from the engine) or Cancelled as ask() does.
AskResult ask_remote(Library& lib, const LoadedModel& local, ChatEngine& engine, const AskOptions& options,
                     const AskCallbacks& cb = {});

// The messages sent for `question` over the units of `ts` (each unit's text from `texts`,
// parallel to ts.units): [system: instructions + the units, user: question]. For tests.
std::vector<ChatMessage> remote_messages(const std::string& instructions, const TokenStream& ts,
                                         const std::vector<std::string>& texts, const std::string& question);

}  // namespace sl
