// `sightline-cli serve`: an OpenAI-compatible HTTP server over a ServeBackend (the library with the
// local engine: serve_backend.h). Plain HTTP/1.1 on a QTcpServer (requests parsed by
// core/serve/http_request.h, JSON by core/serve/openai_api.h):
//
//   GET  /v1/models              the backend's models
//   POST /v1/chat/completions    queued for the engine; "stream": true answers with server-sent
//                                events (closed after "data: [DONE]"), else one JSON response
//   POST /tokenize               {"content" | "prompt": text} -> {"count", "tokens"} (llama.cpp /
//                                vLLM style: remote clients measure their token counts with it)
//   GET  /health                 {"status": "ok", "queued": N}
//
// Bound to 127.0.0.1 unless told otherwise; a bearer token is required when one is configured (and
// cmd_serve insists on one for any address that is not loopback): 401 without it. One engine
// runs one completion at a time on a worker thread; up to `queue` more wait (FIFO), and a request
// that finds the queue full gets 429 with Retry-After. A client that disconnects cancels its job
// (waiting or running). Between completions the worker runs the backend's idle() slices while
// the queue is empty (a request waits for the slice in flight at most).
//
// Threading: ApiServer lives on the thread that created it (the CLI's main thread), which must run
// an event loop; the backend's run() is called on the worker thread only; its models() and
// count_tokens() on the server's thread. Responses computed on the worker thread reach sockets
// through queued calls.
#pragma once

#include <QByteArray>
#include <QHostAddress>
#include <QObject>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/serve/openai_api.h"

class QTcpServer;
class QTcpSocket;

namespace sl::app {

struct ServeResult {
    std::string content;        // the whole answer text (with citation markers for library answers)
    std::string finish_reason;  // "stop" | "length"
    CompletionUsage usage;
    std::string extra;          // the "sightline" member (JSON text), or empty
};

class ServeBackend {
public:
    virtual ~ServeBackend() = default;
    virtual std::vector<ModelCard> models() const = 0;
    // Tokens of `text` by the engine's tokenizer.
    virtual std::vector<int32_t> tokenize(std::string_view text) const = 0;
    // Runs one completion on the worker thread: streamed text to on_text (without markers), the
    // whole result returned. Stops early (result as far as it got) when `cancel` is set. Throws
    // sl::Error for a request it cannot answer (an unknown model: the message says which exist).
    virtual ServeResult run(const ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                            const std::atomic<bool>& cancel) = 0;
    // One short slice of idle-time work on the worker thread while no completion waits (after
    // one, until it returns false or a request comes): the library backend brings a GPU
    // session's context from its saved file onto the device. Throws nothing. Default: none.
    virtual bool idle() { return false; }
};

struct ApiServerOptions {
    QHostAddress host = QHostAddress::LocalHost;
    quint16 port = 8080;        // 0: any free port (port() says which)
    QByteArray token;           // required as "Authorization: Bearer TOKEN" when not empty
    int queue = 8;              // completions that may wait while one runs
    std::function<void(const std::string&)> log;  // one line per request (never the token)
};

class ApiServer : public QObject {

public:
    ApiServer(ServeBackend& backend, ApiServerOptions options, QObject* parent = nullptr);
    ~ApiServer() override;
    // Starts listening; throws sl::Error naming the address when it cannot.
    void listen();
    quint16 port() const;

private:
    struct Job;
    struct Conn;
    void on_connection();
    void on_ready(QTcpSocket* s);
    void handle(QTcpSocket* s, Conn& c);
    void respond(QTcpSocket* s, int status, const QByteArray& type, const QByteArray& body,
                 const std::vector<std::pair<QByteArray, QByteArray>>& extra_headers = {});
    void finish_request(QTcpSocket* s);
    void worker();
    void run_job(const std::shared_ptr<Job>& job);
    void post_write(const std::shared_ptr<Job>& job, QByteArray bytes, bool close, bool done);

    ServeBackend& backend_;
    ApiServerOptions o_;
    QTcpServer* server_ = nullptr;
    std::unordered_map<QTcpSocket*, std::unique_ptr<Conn>> conns_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<Job>> queue_;
    bool running_job_ = false;
    bool stopping_ = false;
    std::thread worker_;
    int64_t next_id_ = 1;
};

}  // namespace sl::app
