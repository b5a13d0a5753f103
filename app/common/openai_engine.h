// The remote engine: an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, Ollama, or
// another Sightline's `serve`) spoken to over HTTP(S) with Qt Network. core/ask/remote_ask.h plans
// what is sent; this sends it and streams the answer back.
//
//   GET  {base}/models              the model (the first listed unless one is named) and its
//                                   context length (context_length, vLLM's max_model_len or
//                                   llama.cpp's meta.n_ctx_train)
//   POST {root}/tokenize            the server's token count (llama.cpp, vLLM, Sightline), else
//   POST {root}/extras/tokenize/count  (llama-cpp-python); when both fail: no endpoint (asked once)
//   POST {base}/chat/completions    stream: true; server-sent events (core/remote/sse.h)
//
// base is the URL as given with "/v1" appended when it has no path; root is base without "/v1".
// TLS certificates are verified (Qt's defaults). The API key goes only in the Authorization header,
// never into messages, logs or the library. Requests that fail with 429 or 5xx, or cannot connect,
// are retried `retries` times with exponential backoff (1 s, 2 s, 4 s; a Retry-After of at most
// 30 s is honoured), but never once answer text has streamed. A stream that stops for
// read_timeout_ms, or ends without its finish, is an error naming the server.
//
// Threading: create and use on one thread that may run a QEventLoop (the CLI's main thread, or a
// worker thread in the desktop app): each call spins a local event loop until it is done.
#pragma once

#include <QByteArray>
#include <QString>

#include <memory>

#include "core/remote/chat_engine.h"

class QNetworkAccessManager;

namespace sl::app {

struct OpenAiEngineOptions {
    QString url;                  // "http://127.0.0.1:8080/v1", "https://llm.example.org"
    QString model;                // empty: the first model the server lists
    QByteArray api_key;           // empty: no Authorization header
    int connect_timeout_ms = 15000;
    int read_timeout_ms = 180000;  // no bytes for this long: the request fails
    int retries = 3;
    double backoff_s = 1.0;
};

class OpenAiEngine final : public ChatEngine {
public:
    // Asks the server for its models; throws RemoteError naming the server when it cannot.
    explicit OpenAiEngine(OpenAiEngineOptions options);
    ~OpenAiEngine() override;

    std::string describe() const override;
    std::string model() const override { return model_; }
    int64_t context_length() const override { return context_length_; }
    std::optional<int64_t> count_tokens(const std::string& text) override;
    ChatReply chat(const ChatRequest& request, const std::function<bool(std::string_view)>& on_delta,
                   const std::atomic<bool>* cancel) override;

    // The API key from the environment variable `name` (SIGHTLINE_API_KEY by default), or empty.
    static QByteArray api_key_from_env(const char* name = "SIGHTLINE_API_KEY");

private:
    struct Exchange;
    Exchange send(const QByteArray& method, const QString& url, const QByteArray& body,
                  const std::function<bool(const QByteArray&)>& on_bytes, const std::atomic<bool>* cancel);
    void fetch_models();

    OpenAiEngineOptions o_;
    QString base_, root_;
    std::string model_;
    int64_t context_length_ = 0;
    int tokenize_ = -1;  // -1 not tried, 0 no endpoint, 10 + i: endpoint i works
    std::unique_ptr<QNetworkAccessManager> net_;
};

}  // namespace sl::app
