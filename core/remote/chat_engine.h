// A chat engine the ask flow can use instead of the local model: an OpenAI-compatible server
// (vLLM, SGLang, llama.cpp's server, Ollama, or another Sightline's `serve`). core/ask/remote_ask.h
// plans the context locally and sends it; the HTTP side lives outside core (it needs Qt Network:
// app/common/openai_engine.h).
//
// Threading: an engine is used from one thread at a time; on_delta runs on that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/chat_template.h"
#include "core/util/error.h"

namespace sl {

struct ChatRequest {
    std::vector<ChatMessage> messages;
    int max_tokens = 256;
    double temperature = 0;  // 0: greedy
    bool logprobs = false;   // ask for the sampled tokens' log-probabilities where the server has them
};

struct ChatReply {
    std::string finish_reason;  // "stop", "length", ... as the server said; "cancelled" when cut by us
    int64_t prompt_tokens = -1;      // from the server's usage, -1 when it gave none
    int64_t completion_tokens = -1;
    std::vector<double> logprobs;    // one per streamed token when the server gave them
    int attempts = 1;                // requests made (retries after 429 / 5xx included)
};

// A failure of the remote engine: the message names the server and the HTTP status or the network
// error ("http://10.0.0.5:8000/v1: HTTP 503 Service Unavailable: model is loading").
struct RemoteError : Error {
    using Error::Error;
    int status = 0;  // the HTTP status, 0 for network errors
};

class ChatEngine {
public:
    virtual ~ChatEngine() = default;
    // "http://127.0.0.1:8080/v1, model qwen2.5-72b" — for messages and the stored chat.
    virtual std::string describe() const = 0;
    virtual std::string model() const = 0;
    // The model's context length in tokens as the server reports it; 0 when unknown.
    virtual int64_t context_length() const = 0;
    // Tokens of `text` by the server's own tokenizer, or nullopt when it has no tokenize endpoint.
    virtual std::optional<int64_t> count_tokens(const std::string& text) = 0;
    // One streamed chat completion. on_delta gets each piece of answer text (reasoning text that a
    // server streams apart is not passed); returning false stops the stream (finish "cancelled").
    // `cancel` set (polled while waiting): the request is aborted and the reply's finish_reason is
    // "cancelled". Throws RemoteError on failures after the configured retries.
    virtual ChatReply chat(const ChatRequest& request, const std::function<bool(std::string_view)>& on_delta,
                           const std::atomic<bool>* cancel) = 0;
};

}  // namespace sl
