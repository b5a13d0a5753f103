// The OpenAI chat API's JSON as `sightline-cli serve` reads and writes it: requests to
// /v1/chat/completions (untrusted: parsed with core/embed/json.h, fuzzed by fuzz_http_request), the
// streamed chunks and whole responses, /v1/models and errors. Free of Qt; reentrant.
//
// Sightline's answers carry their citations in an extra member "sightline" of the response (and of
// the last streamed chunk): {"question", "citations": [{"number", "locator", "path", "kind",
// "unit", "page" (PDF), "slide" (slides), "section" (DOCX, Markdown, HTML, EPUB, text), "t0"/"t1"
// (video/audio, seconds), "snippet", "weak"}],
// "read", "chat_id"}; the text carries inline markers ("... lm() [1].").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/answer/answer.h"
#include "core/tokenizer/chat_template.h"

namespace sl {

struct ChatCompletionRequest {
    std::string model;
    std::vector<ChatMessage> messages;  // text parts of array contents joined; other parts dropped
    bool stream = false;
    bool include_usage = false;         // stream_options.include_usage
    int max_tokens = 0;                 // max_completion_tokens / max_tokens; 0: the server's default
    double temperature = -1;            // -1: not given
    std::optional<std::string> effort;  // Sightline's extension: "low" | "medium" | "high"
};

// Throws FormatError ("...: messages is missing") for what a client must fix (answered with 400).
ChatCompletionRequest parse_chat_completion_request(std::string_view body);

// The last user message's text (the question); empty when there is none.
std::string last_user_text(const ChatCompletionRequest& r);

struct ModelCard {
    std::string id;
    int64_t context_length = 0;
    std::string owned_by = "sightline";
};
std::string models_json(const std::vector<ModelCard>& models, int64_t created);

struct CompletionUsage {
    int64_t prompt_tokens = 0, completion_tokens = 0;
};

// One "chat.completion.chunk": the delta's content (role "assistant" when `first`), the
// finish_reason when given, usage and the "sightline" member (JSON text) when given.
std::string chunk_json(const std::string& id, int64_t created, const std::string& model, std::string_view content,
                       bool first, const std::optional<std::string>& finish_reason,
                       const std::optional<CompletionUsage>& usage = std::nullopt, std::string_view extra = {});
// A whole "chat.completion".
std::string completion_json(const std::string& id, int64_t created, const std::string& model, std::string_view content,
                            const std::string& finish_reason, const CompletionUsage& usage, std::string_view extra = {});
// {"error": {"message", "type", "code"}}
std::string error_json(std::string_view message, std::string_view type, int code);

// The "sightline" member for an answer: citations with their places, what was read, the chat.
std::string answer_extra_json(const Answer& a, const std::string& read_summary, int64_t chat_id);

// OpenAI's finish_reason for an Answer::stop_reason / GenerateStats::stop_reason ("length" for
// "max tokens" and "context full", else "stop").
const char* finish_reason_of(const std::string& stop_reason);

}  // namespace sl
