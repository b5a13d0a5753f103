// The streaming side of the OpenAI chat API as servers send it: server-sent events
// ("data: {json}\n\n", ended by "data: [DONE]") whose JSON is a chat.completion.chunk. Free of Qt:
// the HTTP client (app/common/openai_engine.h) feeds the bytes as they arrive.
//
// Untrusted input: an event larger than kMaxEvent bytes is a FormatError; a chunk that is not
// JSON or not an object is a FormatError naming `origin`. Not thread-safe; one decoder per stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sl {

class SseDecoder {
public:
    static constexpr size_t kMaxEvent = size_t{4} << 20;
    explicit SseDecoder(std::string origin) : origin_(std::move(origin)) {}
    // Feeds received bytes; on_data(data) for each complete event with data (its data lines joined
    // by '\n'; comments, "event:", "id:" and "retry:" lines are skipped). Lines end with LF, CRLF or CR.
    void feed(std::string_view bytes, const std::function<void(const std::string&)>& on_data);

private:
    void line(std::string_view l, const std::function<void(const std::string&)>& on_data);
    std::string origin_;
    std::string pending_;  // an unfinished line
    std::string data_;     // the current event's data
    bool has_data_ = false;
    bool after_cr_ = false;
};

// One event of a streamed chat completion.
struct ChatChunk {
    bool done = false;                   // "[DONE]"
    std::string content;                 // choices[0].delta.content (or message.content)
    std::string reasoning;               // choices[0].delta.reasoning_content / reasoning (not the answer)
    std::optional<std::string> finish_reason;
    int64_t prompt_tokens = -1, completion_tokens = -1;  // usage, when sent
    std::vector<double> logprobs;        // choices[0].logprobs.content[*].logprob
    std::string error;                   // {"error": {"message": ...}} sent in the stream
    std::string extra;                   // the chunk's "sightline" member as JSON text (Sightline's serve)
};

ChatChunk parse_chat_chunk(const std::string& data, const std::string& origin);

// The message of an error body ({"error": {"message": "..."}} or {"error": "..."} or
// {"detail": "..."}), or the body itself cut to 300 bytes when it is not such JSON.
std::string error_message_of(std::string_view body);

}  // namespace sl
