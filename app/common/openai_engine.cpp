#include "app/common/openai_engine.h"

#include <QElapsedTimer>
#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTimer>
#include <QUrl>

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/remote/sse.h"

namespace sl::app {

struct OpenAiEngine::Exchange {
    int status = 0;
    QByteArray reason;
    QByteArray body;            // the body when not streamed to on_bytes (errors), at most 1 MiB
    QNetworkReply::NetworkError error = QNetworkReply::NoError;
    QString error_text;
    int retry_after_s = -1;
    bool cancelled = false;     // `cancel` was set
    bool stopped = false;       // on_bytes asked to stop
    bool timed_out = false;     // no headers in connect_timeout_ms or no bytes in read_timeout_ms
    std::exception_ptr failure; // thrown by on_bytes
};

namespace {

constexpr qsizetype kMaxBody = qsizetype{1} << 20;

bool retryable(int status) { return status == 429 || status == 500 || status == 502 || status == 503 || status == 504; }

QString strip_slash(QString s) {
    while (s.endsWith(QLatin1Char('/'))) s.chop(1);
    return s;
}

}  // namespace

OpenAiEngine::OpenAiEngine(OpenAiEngineOptions options) : o_(std::move(options)), net_(std::make_unique<QNetworkAccessManager>()) {
    const QUrl url(o_.url);
    if (!url.isValid() || (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")) ||
        url.host().isEmpty())
        throw RemoteError(o_.url.toStdString() + ": not an http:// or https:// URL of a server");
    base_ = strip_slash(o_.url);
    if (url.path().isEmpty() || url.path() == QLatin1String("/")) base_ += QStringLiteral("/v1");
    root_ = base_.endsWith(QLatin1String("/v1")) ? base_.chopped(3) : base_;
    fetch_models();
}

OpenAiEngine::~OpenAiEngine() = default;

std::string OpenAiEngine::describe() const { return base_.toStdString() + (model_.empty() ? "" : ", model " + model_); }

QByteArray OpenAiEngine::api_key_from_env(const char* name) { return qgetenv(name); }

OpenAiEngine::Exchange OpenAiEngine::send(const QByteArray& method, const QString& url, const QByteArray& body,
                                          const std::function<bool(const QByteArray&)>& on_bytes,
                                          const std::atomic<bool>* cancel) {
    QNetworkRequest req{QUrl(url)};
    req.setHeader(QNetworkRequest::ContentTypeHeader, QByteArrayLiteral("application/json"));
    req.setRawHeader("Accept", on_bytes ? QByteArrayLiteral("text/event-stream") : QByteArrayLiteral("application/json"));
    if (!o_.api_key.isEmpty()) req.setRawHeader("Authorization", "Bearer " + o_.api_key);
    req.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::NoLessSafeRedirectPolicy);
    QNetworkReply* reply = method == "GET" ? net_->get(req) : net_->sendCustomRequest(req, method, body);

    Exchange x;
    bool headers = false;
    QElapsedTimer since_bytes;
    since_bytes.start();
    auto take = [&] {
        if (!headers || !reply->isOpen()) return;
        const QByteArray b = reply->readAll();
        if (b.isEmpty()) return;
        since_bytes.restart();
        if (x.status == 200 && on_bytes && !x.stopped && !x.failure) {
            try {
                if (!on_bytes(b)) {
                    x.stopped = true;
                    reply->abort();
                }
            } catch (...) {
                x.failure = std::current_exception();
                reply->abort();
            }
        } else if (x.body.size() < kMaxBody) {
            x.body += b.left(kMaxBody - x.body.size());
        }
    };
    QEventLoop loop;
    QObject::connect(reply, &QNetworkReply::metaDataChanged, &loop, [&] {
        if (headers) return;
        headers = true;
        x.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        x.reason = reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toByteArray();
        bool ok = false;
        const int ra = reply->rawHeader("Retry-After").trimmed().toInt(&ok);
        if (ok) x.retry_after_s = ra;
    });
    QObject::connect(reply, &QNetworkReply::readyRead, &loop, take);
    QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
    QTimer poll;
    poll.setInterval(50);
    QObject::connect(&poll, &QTimer::timeout, &loop, [&] {
        if (reply->isFinished()) return;
        if (cancel && cancel->load()) {
            x.cancelled = true;
            reply->abort();
        } else if ((!headers && since_bytes.elapsed() > o_.connect_timeout_ms) ||
                   (headers && since_bytes.elapsed() > o_.read_timeout_ms)) {
            x.timed_out = true;
            reply->abort();
        }
    });
    poll.start();
    if (!reply->isFinished()) loop.exec();
    poll.stop();
    if (!headers && reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).isValid()) {
        headers = true;
        x.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        x.reason = reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toByteArray();
    }
    take();
    x.error = reply->error();
    x.error_text = reply->errorString();
    reply->deleteLater();
    return x;
}

void OpenAiEngine::fetch_models() {
    const Exchange x = send("GET", base_ + QStringLiteral("/models"), {}, {}, nullptr);
    const std::string where = base_.toStdString();
    if (x.status == 0) {
        RemoteError e(where + ": cannot reach the server (" +
                      (x.timed_out ? std::string("no answer in ") + std::to_string(o_.connect_timeout_ms / 1000) + " s"
                                   : x.error_text.toStdString()) +
                      ")");
        throw e;
    }
    if (x.status != 200) {
        RemoteError e(where + ": GET /models: HTTP " + std::to_string(x.status) + " " + x.reason.toStdString() + ": " +
                      error_message_of(x.body.toStdString()));
        e.status = x.status;
        throw e;
    }
    const QJsonDocument doc = QJsonDocument::fromJson(x.body);
    const QJsonArray data = doc.object().value(QLatin1String("data")).toArray();
    QJsonObject chosen;
    for (const auto& v : data) {
        const QJsonObject m = v.toObject();
        if (o_.model.isEmpty() || m.value(QLatin1String("id")).toString() == o_.model) {
            chosen = m;
            break;
        }
    }
    if (chosen.isEmpty()) {
        QStringList ids;
        for (const auto& v : data) ids << v.toObject().value(QLatin1String("id")).toString();
        if (o_.model.isEmpty()) throw RemoteError(where + ": the server lists no models");
        throw RemoteError(where + ": the server has no model '" + o_.model.toStdString() + "' (it has: " +
                          ids.join(QStringLiteral(", ")).toStdString() + ")");
    }
    model_ = chosen.value(QLatin1String("id")).toString().toStdString();
    for (const char* k : {"context_length", "max_model_len"})
        if (chosen.contains(QLatin1String(k))) context_length_ = chosen.value(QLatin1String(k)).toInteger();
    if (context_length_ <= 0)
        context_length_ = chosen.value(QLatin1String("meta")).toObject().value(QLatin1String("n_ctx_train")).toInteger();
}

std::optional<int64_t> OpenAiEngine::count_tokens(const std::string& text) {
    if (tokenize_ == 0) return std::nullopt;
    const QString content = QString::fromStdString(text);
    const QString model = QString::fromStdString(model_);
    // llama.cpp's server and vLLM: POST /tokenize {"content" | "prompt"}; llama-cpp-python's
    // server: POST /extras/tokenize/count {"input"}.
    const std::pair<const char*, QJsonObject> endpoints[] = {
        {"/tokenize", QJsonObject{{QStringLiteral("model"), model}, {QStringLiteral("content"), content},
                                  {QStringLiteral("prompt"), content}}},
        {"/extras/tokenize/count", QJsonObject{{QStringLiteral("model"), model}, {QStringLiteral("input"), content}}},
    };
    for (int i = 0; i < 2; ++i) {
        if (tokenize_ >= 10 && tokenize_ - 10 != i) continue;  // the endpoint that worked before
        const Exchange x = send("POST", root_ + QLatin1String(endpoints[i].first),
                                QJsonDocument(endpoints[i].second).toJson(QJsonDocument::Compact), {}, nullptr);
        if (x.status != 200) continue;
        const QJsonObject o = QJsonDocument::fromJson(x.body).object();
        int64_t n = o.value(QLatin1String("count")).toInteger(-1);
        if (n < 0 && o.value(QLatin1String("tokens")).isArray()) n = o.value(QLatin1String("tokens")).toArray().size();
        if (n >= 0) {
            tokenize_ = 10 + i;
            return n;
        }
    }
    tokenize_ = 0;
    return std::nullopt;
}

ChatReply OpenAiEngine::chat(const ChatRequest& request, const std::function<bool(std::string_view)>& on_delta,
                             const std::atomic<bool>* cancel) {
    QJsonObject req;
    req.insert(QStringLiteral("model"), QString::fromStdString(model_));
    QJsonArray messages;
    for (const auto& m : request.messages) {
        QJsonObject jm;
        jm.insert(QStringLiteral("role"), QString::fromStdString(m.role));
        jm.insert(QStringLiteral("content"), QString::fromStdString(m.content));
        messages.append(jm);
    }
    req.insert(QStringLiteral("messages"), messages);
    req.insert(QStringLiteral("stream"), true);
    req.insert(QStringLiteral("stream_options"), QJsonObject{{QStringLiteral("include_usage"), true}});
    req.insert(QStringLiteral("max_tokens"), request.max_tokens);
    req.insert(QStringLiteral("temperature"), request.temperature);
    if (request.logprobs) req.insert(QStringLiteral("logprobs"), true);
    const QByteArray body = QJsonDocument(req).toJson(QJsonDocument::Compact);
    const std::string where = describe();

    ChatReply out;
    for (int attempt = 0;; ++attempt) {
        out = ChatReply{};
        out.attempts = attempt + 1;
        SseDecoder sse(where);
        bool streamed = false, done = false, stop = false;
        size_t received = 0;
        auto on_bytes = [&](const QByteArray& b) {
            sse.feed(std::string_view(b.constData(), static_cast<size_t>(b.size())), [&](const std::string& data) {
                if (done || stop) return;
                const ChatChunk c = parse_chat_chunk(data, where);
                if (c.done) {
                    done = true;
                    return;
                }
                if (!c.error.empty()) throw RemoteError(where + ": the server reported an error during the answer: " + c.error);
                if (!c.content.empty()) {
                    streamed = true;
                    received += c.content.size();
                    if (!on_delta(c.content)) stop = true;
                }
                out.logprobs.insert(out.logprobs.end(), c.logprobs.begin(), c.logprobs.end());
                if (c.finish_reason) out.finish_reason = *c.finish_reason;
                if (c.prompt_tokens >= 0) out.prompt_tokens = c.prompt_tokens;
                if (c.completion_tokens >= 0) out.completion_tokens = c.completion_tokens;
            });
            return !(done || stop);
        };
        const Exchange x = send("POST", base_ + QStringLiteral("/chat/completions"), body, on_bytes, cancel);
        if (x.failure) std::rethrow_exception(x.failure);
        if (x.cancelled) {
            out.finish_reason = "cancelled";
            return out;
        }
        if (stop) {  // the caller stopped the stream
            out.finish_reason = "stop";
            return out;
        }
        if (x.status == 200 && (done || !out.finish_reason.empty()) && !x.timed_out) return out;

        std::string what;
        int status = x.status;
        if (x.status == 200) {
            what = x.timed_out ? "the answer stopped streaming for " + std::to_string(o_.read_timeout_ms / 1000) + " s"
                               : "the connection closed before the answer was complete (" + std::to_string(received) +
                                     " bytes of answer received)";
        } else if (x.status == 0) {
            what = x.timed_out ? "no answer in " + std::to_string(o_.connect_timeout_ms / 1000) + " s"
                               : "cannot reach the server (" + x.error_text.toStdString() + ")";
        } else {
            what = "HTTP " + std::to_string(x.status) + " " + x.reason.toStdString() + ": " +
                   error_message_of(x.body.toStdString());
        }
        const bool again = !streamed && attempt < o_.retries &&
                           (retryable(x.status) || (x.status == 0 && x.error == QNetworkReply::ConnectionRefusedError) ||
                            (x.status == 0 && x.timed_out));
        if (!again) {
            RemoteError e(where + ": " + what + (attempt > 0 ? " (after " + std::to_string(attempt + 1) + " attempts)" : ""));
            e.status = status;
            throw e;
        }
        double wait = o_.backoff_s * std::pow(2.0, attempt);
        if (x.retry_after_s >= 0) wait = std::min(30, x.retry_after_s);
        QEventLoop pause;
        QTimer poll;
        QElapsedTimer waited;
        waited.start();
        QObject::connect(&poll, &QTimer::timeout, &pause, [&] {
            if ((cancel && cancel->load()) || waited.elapsed() >= static_cast<qint64>(wait * 1000)) pause.quit();
        });
        poll.start(20);
        pause.exec();
        if (cancel && cancel->load()) {
            out.finish_reason = "cancelled";
            return out;
        }
    }
}

}  // namespace sl::app
