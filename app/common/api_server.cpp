#include "app/common/api_server.h"

#include <QPointer>
#include <QTcpServer>
#include <QTcpSocket>

#include <chrono>
#include <ctime>

#include "core/embed/json.h"
#include "core/serve/http_request.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

namespace sl::app {

struct ApiServer::Conn {
    HttpRequestParser parser;
    bool busy = false;                // a response is being computed
    std::shared_ptr<Job> job;         // the completion running or waiting for this connection
};

struct ApiServer::Job {
    ChatCompletionRequest request;
    std::string id;
    int64_t created = 0;
    bool keep_alive = true;
    QPointer<QTcpSocket> socket;      // touched on the server's thread only
    std::atomic<bool> cancel{false};  // the client went away
    std::chrono::steady_clock::time_point queued;
    std::string line;                 // the log line's start ("POST /v1/chat/completions sightline")
};

namespace {

QByteArray head(int status, const QByteArray& type, qsizetype length, bool keep_alive,
                const std::vector<std::pair<QByteArray, QByteArray>>& extra) {
    QByteArray h = "HTTP/1.1 " + QByteArray::number(status) + " " + QByteArray(http_reason(status)) + "\r\n";
    h += "Content-Type: " + type + "\r\n";
    if (length >= 0) h += "Content-Length: " + QByteArray::number(length) + "\r\n";
    else h += "Cache-Control: no-cache\r\n";
    h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
    h += "\r\n";
    return h;
}

QByteArray bytes(const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); }

QByteArray sse(const std::string& json) { return "data: " + bytes(json) + "\n\n"; }

// Constant-time comparison of the bearer token.
bool same(const QByteArray& a, std::string_view b) {
    if (static_cast<size_t>(a.size()) != b.size()) return false;
    unsigned char d = 0;
    for (size_t i = 0; i < b.size(); ++i) d |= static_cast<unsigned char>(a[static_cast<qsizetype>(i)] ^ b[i]);
    return d == 0;
}

}  // namespace

ApiServer::ApiServer(ServeBackend& backend, ApiServerOptions options, QObject* parent)
    : QObject(parent), backend_(backend), o_(std::move(options)) {
    worker_ = std::thread([this] { worker(); });
}

ApiServer::~ApiServer() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        for (auto& j : queue_) j->cancel = true;
    }
    cv_.notify_all();
    worker_.join();
}

void ApiServer::listen() {
    server_ = new QTcpServer(this);
    if (!server_->listen(o_.host, o_.port))
        throw Error("cannot listen on " + o_.host.toString().toStdString() + ":" + std::to_string(o_.port) + ": " +
                    server_->errorString().toStdString());
    connect(server_, &QTcpServer::newConnection, this, [this] { on_connection(); });
}

quint16 ApiServer::port() const { return server_ ? server_->serverPort() : 0; }

void ApiServer::on_connection() {
    while (QTcpSocket* s = server_->nextPendingConnection()) {
        conns_[s] = std::make_unique<Conn>();
        connect(s, &QTcpSocket::readyRead, this, [this, s] { on_ready(s); });
        connect(s, &QTcpSocket::disconnected, this, [this, s] {
            auto it = conns_.find(s);
            if (it != conns_.end()) {
                if (it->second->job) it->second->job->cancel = true;
                conns_.erase(it);
            }
            s->deleteLater();
        });
    }
}

void ApiServer::on_ready(QTcpSocket* s) {
    auto it = conns_.find(s);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    const QByteArray b = s->readAll();
    c.parser.feed(std::string_view(b.constData(), static_cast<size_t>(b.size())));
    if (!c.busy) handle(s, c);
}

void ApiServer::respond(QTcpSocket* s, int status, const QByteArray& type, const QByteArray& body,
                        const std::vector<std::pair<QByteArray, QByteArray>>& extra_headers) {
    auto it = conns_.find(s);
    const bool keep = it != conns_.end() && it->second->parser.state() == HttpRequestParser::State::Complete &&
                      it->second->parser.request().keep_alive();
    s->write(head(status, type, body.size(), keep, extra_headers) + body);
    if (!keep) {
        s->disconnectFromHost();
        return;
    }
    finish_request(s);
}

// The connection is ready for its next request (bytes that came meanwhile are parsed).
void ApiServer::finish_request(QTcpSocket* s) {
    auto it = conns_.find(s);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    c.busy = false;
    c.job.reset();
    c.parser.reset();
    if (c.parser.state() != HttpRequestParser::State::Incomplete) handle(s, c);
}

void ApiServer::handle(QTcpSocket* s, Conn& c) {
    using State = HttpRequestParser::State;
    if (c.parser.state() == State::Incomplete) return;
    const QByteArray json = "application/json";
    auto log = [&](const std::string& line) {
        if (o_.log) o_.log(line);
    };
    if (c.parser.state() == State::Error) {
        log("bad request from " + s->peerAddress().toString().toStdString() + ": " + c.parser.error());
        const QByteArray body = bytes(error_json(c.parser.error(), "invalid_request_error", c.parser.error_status()));
        s->write(head(c.parser.error_status(), json, body.size(), false, {}) + body);
        s->disconnectFromHost();
        c.busy = true;  // nothing more is read from it
        return;
    }
    const HttpRequest& rq = c.parser.request();
    const std::string what = rq.method + " " + rq.path;
    if (!o_.token.isEmpty()) {
        const auto auth = rq.header("authorization");
        const std::string_view prefix = "Bearer ";
        if (!auth || auth->substr(0, prefix.size()) != prefix || !same(o_.token, auth->substr(prefix.size()))) {
            log(what + " 401 (no valid bearer token)");
            respond(s, 401, json, bytes(error_json("a bearer token is required (Authorization: Bearer ...)", "authentication_error", 401)),
                    {{"WWW-Authenticate", "Bearer"}});
            return;
        }
    }
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    if (rq.path == "/health" && rq.method == "GET") {
        size_t n = 0;
        {
            std::lock_guard lock(mu_);
            n = queue_.size();
        }
        respond(s, 200, json, bytes("{\"status\":\"ok\",\"queued\":" + std::to_string(n) + "}"));
        return;
    }
    if (rq.path == "/v1/models" || rq.path == "/models") {
        if (rq.method != "GET") {
            respond(s, 405, json, bytes(error_json("use GET", "invalid_request_error", 405)), {{"Allow", "GET"}});
            return;
        }
        respond(s, 200, json, bytes(models_json(backend_.models(), created)));
        return;
    }
    if (rq.path == "/tokenize" || rq.path == "/v1/tokenize") {
        if (rq.method != "POST") {
            respond(s, 405, json, bytes(error_json("use POST", "invalid_request_error", 405)), {{"Allow", "POST"}});
            return;
        }
        std::string text;
        try {
            const JsonValue v = JsonValue::parse(rq.body, "the request");
            const JsonValue* t = v.find("content");
            if (!t) t = v.find("prompt");
            if (!t || !t->is_string()) throw FormatError("the request: content (or prompt) is not text");
            text = t->text();
        } catch (const Error& e) {
            respond(s, 400, json, bytes(error_json(e.what(), "invalid_request_error", 400)));
            return;
        }
        const std::vector<int32_t> toks = backend_.tokenize(text);
        JsonWriter w;
        w.begin_object();
        w.key("count"), w.value(static_cast<int64_t>(toks.size()));
        w.key("tokens");
        w.begin_array();
        for (int32_t t : toks) w.value(static_cast<int64_t>(t));
        w.end_array();
        w.end_object();
        respond(s, 200, json, bytes(w.str()));
        return;
    }
    if (rq.path != "/v1/chat/completions" && rq.path != "/chat/completions") {
        log(what + " 404");
        respond(s, 404, json, bytes(error_json("no such endpoint: " + rq.path.substr(0, 200), "invalid_request_error", 404)));
        return;
    }
    if (rq.method != "POST") {
        respond(s, 405, json, bytes(error_json("use POST", "invalid_request_error", 405)), {{"Allow", "POST"}});
        return;
    }
    auto job = std::make_shared<Job>();
    try {
        job->request = parse_chat_completion_request(rq.body);
    } catch (const Error& e) {
        log(what + " 400: " + e.what());
        respond(s, 400, json, bytes(error_json(e.what(), "invalid_request_error", 400)));
        return;
    }
    job->id = "chatcmpl-sl" + std::to_string(created) + "-" + std::to_string(next_id_++);
    job->created = created;
    job->keep_alive = rq.keep_alive() && !job->request.stream;
    job->socket = s;
    job->queued = std::chrono::steady_clock::now();
    job->line = what + " (" + (job->request.model.empty() ? std::string("default model") : job->request.model) + ", " +
                (job->request.stream ? "stream" : "whole") + ")";
    size_t waiting = 0;
    bool full = false;
    {
        std::lock_guard lock(mu_);
        waiting = queue_.size();
        // One running plus `queue` waiting: the next one finds it full.
        full = static_cast<int>(waiting) + (running_job_ ? 1 : 0) >= o_.queue + 1;
        if (!full) queue_.push_back(job);
    }
    if (full) {
        log(job->line + " 429 (" + std::to_string(waiting) + " waiting)");
        respond(s, 429, json,
                bytes(error_json("the engine is busy: " + std::to_string(waiting) + " requests are waiting; try again shortly",
                                 "rate_limit_error", 429)),
                {{"Retry-After", "2"}});
        return;
    }
    c.busy = true;
    c.job = job;
    cv_.notify_one();
}

void ApiServer::post_write(const std::shared_ptr<Job>& job, QByteArray data, bool close, bool done) {
    QMetaObject::invokeMethod(this, [this, job, data = std::move(data), close, done] {
        QTcpSocket* s = job->socket.data();
        if (!s || conns_.find(s) == conns_.end()) return;
        s->write(data);
        if (close) s->disconnectFromHost();
        else if (done) finish_request(s);
    }, Qt::QueuedConnection);
}

void ApiServer::worker() {
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            job = queue_.front();
            queue_.pop_front();
            running_job_ = true;
        }
        if (!job->cancel) run_job(job);
        {
            std::lock_guard lock(mu_);
            running_job_ = false;
        }
        for (;;) {  // idle time: the backend's slices until it has none or a request comes
            {
                std::lock_guard lock(mu_);
                if (stopping_ || !queue_.empty()) break;
            }
            bool more = false;
            try {
                more = backend_.idle();
            } catch (...) {  // (it throws nothing; idle work is optional)
            }
            if (!more) break;
        }
    }
}

void ApiServer::run_job(const std::shared_ptr<Job>& job) {
    const auto t0 = std::chrono::steady_clock::now();
    const double waited = std::chrono::duration<double>(t0 - job->queued).count();
    const ChatCompletionRequest& rq = job->request;
    const QByteArray json = "application/json";
    bool first = true;
    std::string model = rq.model;
    if (rq.stream) post_write(job, head(200, "text/event-stream", -1, false, {}), false, false);
    auto on_text = [&](std::string_view t) {
        if (!rq.stream || t.empty() || job->cancel) return;
        post_write(job, sse(chunk_json(job->id, job->created, model, t, first, std::nullopt)), false, false);
        first = false;
    };
    std::string status;
    try {
        const ServeResult r = backend_.run(rq, on_text, job->cancel);
        if (rq.stream) {
            QByteArray tail;
            if (first) tail += sse(chunk_json(job->id, job->created, model, "", true, std::nullopt));
            std::optional<CompletionUsage> usage;
            if (rq.include_usage) usage = r.usage;
            tail += sse(chunk_json(job->id, job->created, model, "", false, r.finish_reason, usage, r.extra));
            tail += "data: [DONE]\n\n";
            post_write(job, tail, true, true);
        } else {
            const QByteArray body = bytes(completion_json(job->id, job->created, model, r.content, r.finish_reason, r.usage, r.extra));
            post_write(job, head(200, json, body.size(), job->keep_alive, {}) + body, !job->keep_alive, true);
        }
        status = job->cancel ? "cancelled (client gone)" : "200";
    } catch (const std::exception& e) {
        status = std::string("error: ") + e.what();
        const bool client = dynamic_cast<const FormatError*>(&e) != nullptr;
        const int code = client ? 400 : 500;
        const std::string err = error_json(e.what(), client ? "invalid_request_error" : "server_error", code);
        if (rq.stream) {
            post_write(job, sse(err) + "data: [DONE]\n\n", true, true);
        } else {
            const QByteArray body = bytes(err);
            post_write(job, head(code, json, body.size(), false, {}) + body, true, true);
        }
    }
    if (o_.log) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " after %.1f s waiting, %.1f s running", waited,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        o_.log(job->line + " " + status + buf);
    }
}

}  // namespace sl::app
