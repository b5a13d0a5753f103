// `sightline-cli serve` and `sightline-cli ask --engine`, on loopback only: Sightline's own server
// with the default model over a small library (the pandoc deck and the first pages' worth of
// R-intro.pdf a 2,048-token context reads), spoken to by raw sockets, by the `openai` package as a
// real client (tests/app/serve_client.py), and by `ask --engine` as a remote engine: streaming,
// citations, the queue's 429 and the client's retry after it, Ctrl-C, a server killed mid-answer,
// the bearer token, and requests that are not HTTP. With llama-cpp-python's server installed
// (scripts/setup.sh --with-peers, or $SIGHTLINE_PEERS_PYTHON), ask --engine against it too.
#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <memory>

#include <QTcpServer>

#include "core/util/assets.h"
#include "core/util/paths.h"
#include "tests/common/test_support.h"

namespace {

const QString kCli = QStringLiteral(SIGHTLINE_CLI_PATH);

struct Reply {
    int status = 0;
    QByteArray head, body;
};

// One request on its own connection (Connection: close); the whole reply, or status 0.
Reply http(quint16 port, const QByteArray& raw, int timeout_ms = 120000) {
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), port);
    if (!s.waitForConnected(5000)) return {};
    s.write(raw);
    QByteArray all;
    QElapsedTimer t;
    t.start();
    while (s.state() == QAbstractSocket::ConnectedState && t.elapsed() < timeout_ms) {
        s.waitForReadyRead(200);
        all += s.readAll();
    }
    all += s.readAll();
    Reply r;
    const qsizetype split = all.indexOf("\r\n\r\n");
    r.head = all.left(split);
    r.body = split >= 0 ? all.mid(split + 4) : QByteArray();
    const auto m = QRegularExpression(QStringLiteral("^HTTP/1\\.1 (\\d{3})")).match(QString::fromLatin1(r.head));
    r.status = m.hasMatch() ? m.captured(1).toInt() : 0;
    return r;
}

QByteArray post(const QByteArray& path, const QByteArray& body, const QByteArray& extra = {}) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n" + extra +
           "Content-Length: " + QByteArray::number(body.size()) + "\r\n\r\n" + body;
}

QByteArray get(const QByteArray& path, const QByteArray& extra = {}) {
    return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra + "\r\n";
}

// A running `serve`; its port from the "listening on" line.
struct Server {
    std::unique_ptr<QProcess> p;
    quint16 port = 0;
    QByteArray err;
    bool start(const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
        p = std::make_unique<QProcess>();
        p->setProcessEnvironment(env);
        p->start(kCli, QStringList{QStringLiteral("serve"), QStringLiteral("--port"), QStringLiteral("0")} + args);
        QByteArray out;
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 120000 && p->state() != QProcess::NotRunning) {
            p->waitForReadyRead(200);
            out += p->readAllStandardOutput();
            const auto m = QRegularExpression(QStringLiteral("listening on http://127\\.0\\.0\\.1:(\\d+)/v1")).match(QString::fromUtf8(out));
            if (m.hasMatch()) {
                port = static_cast<quint16>(m.captured(1).toUInt());
                return true;
            }
        }
        err = out + p->readAllStandardError();
        return false;
    }
    ~Server() {
        if (p && p->state() != QProcess::NotRunning) {
            ::kill(static_cast<pid_t>(p->processId()), SIGTERM);
            if (!p->waitForFinished(10000)) p->kill();
            p->waitForFinished(5000);
        }
    }
};

struct Run {
    int exit_code = -1;
    QByteArray out;
};

// Runs the CLI; `on_output(process, output so far)` is called as output comes.
Run cli(const QStringList& args, const std::function<void(QProcess&, const QByteArray&)>& on_output = {},
        const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(kCli, args);
    if (!p.waitForStarted()) return {};
    QByteArray all;
    QElapsedTimer t;
    t.start();
    while (p.state() != QProcess::NotRunning && t.elapsed() < 600000) {
        p.waitForReadyRead(100);
        all += p.readAllStandardOutput() + p.readAllStandardError();
        if (on_output) on_output(p, all);
    }
    p.waitForFinished(10000);
    all += p.readAllStandardOutput() + p.readAllStandardError();
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, all};
}

}  // namespace

class TstCliServe : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    QString lib_;
    QString raw_;  // the plain model's id
    Server server_;

    QStringList ask_engine(quint16 port, const QString& question, const QString& effort = QStringLiteral("low")) const {
        return {QStringLiteral("ask"), QStringLiteral("--library"), lib_, QStringLiteral("--engine"),
                QStringLiteral("http://127.0.0.1:%1").arg(port), QStringLiteral("--engine-model"), raw_,
                QStringLiteral("--ctx"), QStringLiteral("2048"), QStringLiteral("--effort"), effort, question};
    }

private Q_SLOTS:
    void initTestCase() {
        REQUIRE_ASSET(model, sl::assets::kDefaultModel);
        REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
        REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
        lib_ = dir_.filePath(QStringLiteral("library"));
        const Run add = cli({QStringLiteral("add"), QStringLiteral("--library"), lib_, QStringLiteral("--no-ocr"),
                             QString::fromStdString(pdf.string()), QString::fromStdString(deck.string())});
        QVERIFY2(add.exit_code == 0, add.out.constData());
        QVERIFY2(server_.start({QStringLiteral("--library"), lib_, QStringLiteral("--ctx"), QStringLiteral("2048"),
                                QStringLiteral("--queue"), QStringLiteral("1"), QStringLiteral("--effort"), QStringLiteral("low")}),
                 server_.err.constData());
        const Reply models = http(server_.port, get("/v1/models"));
        QCOMPARE(models.status, 200);
        const auto m = QRegularExpression(QStringLiteral("\"id\":\"([^\"]+)\"")).globalMatch(QString::fromUtf8(models.body));
        QStringList ids;
        for (auto it = m; it.hasNext();) ids << it.next().captured(1);
        QVERIFY2(ids.contains(QStringLiteral("sightline")) && ids.size() == 2, models.body.constData());
        raw_ = ids[0] == QLatin1String("sightline") ? ids[1] : ids[0];
    }

    // Requests that are not what the API takes get their status, and the server goes on.
    void refusesBadRequests() {
        QCOMPARE(http(server_.port, "hello\r\n\r\n").status, 400);
        QCOMPARE(http(server_.port, "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status, 501);
        QCOMPARE(http(server_.port, get("/v2/nothing")).status, 404);
        QCOMPARE(http(server_.port, get("/v1/chat/completions")).status, 405);
        const Reply bad = http(server_.port, post("/v1/chat/completions", R"({"model":"sightline","messages":[]})"));
        QCOMPARE(bad.status, 400);
        QVERIFY2(bad.body.contains("messages"), bad.body.constData());
        const Reply unknown = http(server_.port, post("/v1/chat/completions", R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}]})"));
        QCOMPARE(unknown.status, 400);
        QVERIFY2(unknown.body.contains("gpt-9") && unknown.body.contains("sightline"), unknown.body.constData());
        const Reply tok = http(server_.port, post("/tokenize", R"({"content":"hello world"})"));
        QCOMPARE(tok.status, 200);
        QVERIFY2(tok.body.contains("\"count\":2"), tok.body.constData());
        QCOMPARE(http(server_.port, get("/health")).status, 200);
    }

    // The openai package: models, a streamed plain chat, a library answer whole and streamed.
    void openaiClient() {
        const QString py = sl::test::require_venv_python();
        if (py.isEmpty()) return;
        if (QProcess::execute(py, {QStringLiteral("-c"), QStringLiteral("import openai")}) != 0)
            QSKIP("the venv has no openai package: run scripts/setup.sh");
        QProcess p;
        p.start(py, {QStringLiteral(SIGHTLINE_SOURCE_DIR "/tests/app/serve_client.py"), QStringLiteral("--base"),
                     QStringLiteral("http://127.0.0.1:%1/v1").arg(server_.port), QStringLiteral("--question"),
                     QStringLiteral("How do I quit R?")});
        QVERIFY(p.waitForFinished(600000));
        const QByteArray out = p.readAllStandardOutput() + p.readAllStandardError();
        qInfo().noquote() << out;
        QVERIFY2(p.exitCode() == 0, out.constData());
        QVERIFY(out.contains("stream ok"));
    }

    // ask --engine against serve's plain model: the answer streams and is cited from the units sent.
    void askWithEngine() {
        const Run r = cli(ask_engine(server_.port, QStringLiteral("How do I quit R?")) << QStringLiteral("--json"));
        QVERIFY2(r.exit_code == 0, r.out.constData());
        QVERIFY2(r.out.contains("Answer (streaming): "), r.out.constData());
        QVERIFY2(r.out.contains(QStringLiteral("Engine: the answer came from http://127.0.0.1:%1/v1, model %2")
                                    .arg(server_.port).arg(raw_).toUtf8()), r.out.constData());
        QVERIFY2(r.out.contains("its tokenizer") || r.out.contains("of its tokens per local token"), r.out.constData());
        QVERIFY2(r.out.contains("Sources:") && r.out.contains("attention remote ("), r.out.constData());
        QVERIFY2(r.out.contains("\"citations\":["), r.out.constData());
    }

    // The local engine with a sampling temperature and one thread (and out-of-range values refused).
    void localAskSampling() {
        const Run r = cli({QStringLiteral("ask"), QStringLiteral("--library"), lib_, QStringLiteral("--ctx"), QStringLiteral("1024"),
                           QStringLiteral("--effort"), QStringLiteral("low"), QStringLiteral("--temp"), QStringLiteral("0.8"),
                           QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--no-cache"), QStringLiteral("What is R?")});
        QVERIFY2(r.exit_code == 0 && r.out.contains("Answer with citations:"), r.out.constData());
        for (const char* bad : {"--temp", "--threads"}) {
            const Run b = cli({QStringLiteral("ask"), QStringLiteral("--library"), lib_, QString::fromLatin1(bad), QStringLiteral("-1"),
                               QStringLiteral("What is R?")});
            QCOMPARE(b.exit_code, 2);
        }
    }

    // queue 1: one running, one waiting, the third gets 429; ask --engine waits it out and answers.
    void busyServer429AndRetry() {
        const QByteArray body = "{\"model\":\"" + raw_.toUtf8() +
                                "\",\"stream\":true,\"max_tokens\":400,\"temperature\":0.8,\"messages\":[{\"role\":\"user\","
                                "\"content\":\"Write a very long story about a lighthouse keeper.\"}]}";
        auto open = [&](QTcpSocket& s) {
            s.connectToHost(QStringLiteral("127.0.0.1"), server_.port);
            QVERIFY(s.waitForConnected(5000));
            s.write(post("/v1/chat/completions", body));
            s.flush();
        };
        QTcpSocket running, waiting;
        open(running);
        QByteArray got;
        QElapsedTimer t;
        t.start();
        while (!got.contains("data: ") && t.elapsed() < 60000) {
            running.waitForReadyRead(200);
            got += running.readAll();
        }
        QVERIFY2(got.contains("200 OK"), got.constData());
        open(waiting);
        // Queued (not just sent) before the next one comes: /health counts the waiting jobs.
        QElapsedTimer q;
        q.start();
        bool queued = false;
        while (!(queued = http(server_.port, get("/health"), 5000).body.contains("\"queued\":1")) && q.elapsed() < 30000)
            QTest::qWait(50);
        QVERIFY2(queued, "the second request was never counted as queued (did the first one end already?)");
        const Reply full = http(server_.port, post("/v1/chat/completions", body));
        QCOMPARE(full.status, 429);
        QVERIFY2(full.head.contains("Retry-After: 2") && full.body.contains("busy"), full.head + full.body);

        // The client retries after Retry-After; the blockers go away meanwhile (their jobs cancelled).
        bool released = false;
        const Run r = cli(ask_engine(server_.port, QStringLiteral("What is R?")), [&](QProcess&, const QByteArray& out) {
            if (!released && out.contains("asking http://")) {
                QTest::qWait(500);
                running.abort();
                waiting.abort();
                released = true;
            }
        });
        QVERIFY2(released && r.exit_code == 0, r.out.constData());
        QVERIFY2(r.out.contains("attempts"), r.out.constData());
    }

    // Ctrl-C while the answer streams: exit 130, "cancelled".
    void cancelMidAnswer() {
        bool sent = false;
        const Run r = cli(ask_engine(server_.port, QStringLiteral("Explain in detail how R handles data frames, with examples."),
                                     QStringLiteral("high")),
                          [&](QProcess& p, const QByteArray& out) {
                              if (!sent && out.contains("Answer (streaming): ")) {
                                  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
                                  sent = true;
                              }
                          });
        QVERIFY2(sent, r.out.constData());
        QVERIFY2(r.exit_code == 130 && r.out.contains("cancelled"), r.out.constData());
    }

    // A server killed while it streams: the client fails naming the server and what happened.
    void serverKilledMidAnswer() {
        Server victim;
        QVERIFY2(victim.start({QStringLiteral("--library"), lib_}), victim.err.constData());
        const quint16 port = victim.port;
        bool killed = false;
        const Run r = cli(ask_engine(port, QStringLiteral("Explain in detail how R handles data frames, with examples."),
                                     QStringLiteral("high")),
                          [&](QProcess&, const QByteArray& out) {
                              if (!killed && out.contains("Answer (streaming): ")) {
                                  victim.p->kill();
                                  killed = true;
                              }
                          });
        QVERIFY2(killed, r.out.constData());
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.out.contains(QStringLiteral("http://127.0.0.1:%1/v1").arg(port).toUtf8()), r.out.constData());
        QVERIFY2(r.out.contains("closed before the answer was complete") || r.out.contains("cannot reach"), r.out.constData());
    }

    // With a token set, every request needs it; off loopback, serve refuses to start without one.
    void bearerToken() {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SIGHTLINE_SERVE_TOKEN"), QStringLiteral("s3cret"));
        Server guarded;
        QVERIFY2(guarded.start({QStringLiteral("--library"), lib_}, env), guarded.err.constData());
        QCOMPARE(http(guarded.port, get("/v1/models")).status, 401);
        QCOMPARE(http(guarded.port, get("/v1/models", "Authorization: Bearer wrong\r\n")).status, 401);
        QCOMPARE(http(guarded.port, get("/v1/models", "Authorization: Bearer s3cret\r\n")).status, 200);
        QProcessEnvironment wrong = QProcessEnvironment::systemEnvironment();
        wrong.insert(QStringLiteral("SIGHTLINE_API_KEY"), QStringLiteral("nope"));
        const Run refused = cli(ask_engine(guarded.port, QStringLiteral("What is R?")), {}, wrong);
        QCOMPARE(refused.exit_code, 1);
        QVERIFY2(refused.out.contains("HTTP 401") && !refused.out.contains("nope"), refused.out.constData());

        QProcessEnvironment none = QProcessEnvironment::systemEnvironment();
        none.remove(QStringLiteral("SIGHTLINE_SERVE_TOKEN"));
        const Run open = cli({QStringLiteral("serve"), QStringLiteral("--library"), lib_, QStringLiteral("--host"),
                              QStringLiteral("0.0.0.0"), QStringLiteral("--port"), QStringLiteral("0")},
                             {}, none);
        QCOMPARE(open.exit_code, 2);
        QVERIFY2(open.out.contains("needs a bearer token"), open.out.constData());
    }

    // A real peer: llama-cpp-python's OpenAI-compatible server with the default model. Streaming
    // and citations, Ctrl-C, and the peer killed mid-answer.
    void llamaCppPeer() {
        QString py = qEnvironmentVariable("SIGHTLINE_PEERS_PYTHON");
        if (py.isEmpty()) py = QString::fromStdString((sl::paths::cache_dir() / "peers-venv" / "bin" / "python").string());
        if (!QFile::exists(py) || QProcess::execute(py, {QStringLiteral("-c"), QStringLiteral("import llama_cpp.server.app")}) != 0)
            QSKIP("llama-cpp-python's server is not installed (scripts/setup.sh --with-peers); Sightline's own serve stood in");
        REQUIRE_ASSET(model, sl::assets::kDefaultModel);
        auto start = [&](QProcess& p) -> quint16 {
            QTcpServer probe;  // a free port
            if (!probe.listen(QHostAddress::LocalHost, 0)) return 0;
            const quint16 port = probe.serverPort();
            probe.close();
            p.setProcessChannelMode(QProcess::MergedChannels);
            p.start(py, {QStringLiteral("-m"), QStringLiteral("llama_cpp.server"), QStringLiteral("--model"),
                         QString::fromStdString(model.string()), QStringLiteral("--host"), QStringLiteral("127.0.0.1"),
                         QStringLiteral("--port"), QString::number(port), QStringLiteral("--n_ctx"), QStringLiteral("4096"),
                         QStringLiteral("--n_threads"), QStringLiteral("2")});
            QElapsedTimer t;
            t.start();
            while (t.elapsed() < 120000 && p.state() != QProcess::NotRunning) {
                if (http(port, get("/v1/models"), 5000).status == 200) return port;
                QTest::qWait(500);
            }
            return 0;
        };
        QProcess peer;
        const quint16 port = start(peer);
        QVERIFY2(port != 0, peer.readAll().constData());
        auto args = [&](const QString& q, const QString& effort) {
            return QStringList{QStringLiteral("ask"), QStringLiteral("--library"), lib_, QStringLiteral("--engine"),
                               QStringLiteral("http://127.0.0.1:%1").arg(port), QStringLiteral("--ctx"), QStringLiteral("2048"),
                               QStringLiteral("--effort"), effort, q};
        };
        const Run r = cli(args(QStringLiteral("How do I quit R?"), QStringLiteral("low")) << QStringLiteral("--json"));
        QVERIFY2(r.exit_code == 0 && r.out.contains("Answer (streaming): ") && r.out.contains("\"citations\":["), r.out.constData());
        QVERIFY2(r.out.contains("of its tokens per local token"), r.out.constData());  // /extras/tokenize/count

        bool sent = false;
        const Run c = cli(args(QStringLiteral("Explain in detail how R handles data frames, with examples."), QStringLiteral("high")),
                          [&](QProcess& p, const QByteArray& out) {
                              if (!sent && out.contains("Answer (streaming): ")) {
                                  ::kill(static_cast<pid_t>(p.processId()), SIGINT);
                                  sent = true;
                              }
                          });
        QVERIFY2(sent && c.exit_code == 130, c.out.constData());

        bool killed = false;
        const Run k = cli(args(QStringLiteral("Explain in detail how R handles data frames, with examples."), QStringLiteral("high")),
                          [&](QProcess&, const QByteArray& out) {
                              if (!killed && out.contains("Answer (streaming): ")) {
                                  peer.kill();
                                  killed = true;
                              }
                          });
        QVERIFY2(killed && k.exit_code == 1, k.out.constData());
        QVERIFY2(k.out.contains(QStringLiteral("http://127.0.0.1:%1/v1").arg(port).toUtf8()), k.out.constData());
        peer.waitForFinished(10000);
    }

    // TLS is verified: a server with a self-signed certificate is refused, naming it.
    void tlsVerified() {
        const QString py = sl::test::require_venv_python();
        if (py.isEmpty()) return;
        QTemporaryDir tmp;
        const QString key = tmp.filePath(QStringLiteral("key.pem")), cert = tmp.filePath(QStringLiteral("cert.pem"));
        QByteArray ignored;
        QVERIFY(sl::test::run_process(QStringLiteral("openssl"),
                                      {QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"), QStringLiteral("rsa:2048"),
                                       QStringLiteral("-nodes"), QStringLiteral("-keyout"), key, QStringLiteral("-out"), cert,
                                       QStringLiteral("-days"), QStringLiteral("1"), QStringLiteral("-subj"), QStringLiteral("/CN=127.0.0.1")},
                                      &ignored, 60000));
        QTcpServer probe;
        QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
        const quint16 port = probe.serverPort();
        probe.close();
        QProcess https;
        https.start(py, {QStringLiteral("-c"),
                         QStringLiteral("import http.server, ssl, sys\n"
                                        "s = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)\n"
                                        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2], sys.argv[3])\n"
                                        "s.socket = c.wrap_socket(s.socket, server_side=True)\n"
                                        "print('ready', flush=True); s.serve_forever()\n"),
                         QString::number(port), cert, key});
        QVERIFY(https.waitForReadyRead(30000));
        const Run r = cli({QStringLiteral("ask"), QStringLiteral("--library"), lib_, QStringLiteral("--engine"),
                           QStringLiteral("https://127.0.0.1:%1").arg(port), QStringLiteral("What is R?")});
        https.kill();
        https.waitForFinished(5000);
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.out.contains(QStringLiteral("https://127.0.0.1:%1/v1: cannot reach the server").arg(port).toUtf8()) &&
                     r.out.contains("certificate"),
                 r.out.constData());
    }

    // No server there: a clear error naming the address, after the retries.
    void noServer() {
        const Run r = cli(ask_engine(1, QStringLiteral("What is R?")));
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.out.contains("http://127.0.0.1:1/v1: cannot reach the server"), r.out.constData());
    }
};

QTEST_GUILESS_MAIN(TstCliServe)
#include "tst_cli_serve.moc"
