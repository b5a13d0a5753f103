// The serve worker's idle time (ApiServer, app/common/api_server.h): after a completion the
// backend's idle() slices run on the worker until it has none; a request that comes meanwhile is
// answered after the slice in flight (the library backend brings a GPU session's context onto
// the device then: WarmContext::fill). A scripted backend on loopback, spoken to by a socket on
// the test's event loop (the server lives on this thread).
#include <QTcpSocket>
#include <QTest>

#include <atomic>

#include "app/common/api_server.h"
#include "tests/common/scripted_idle.h"

namespace {

class ScriptedBackend final : public sl::app::ServeBackend {
public:
    std::vector<sl::ModelCard> models() const override { return {{"scripted", 2048, "sightline"}}; }
    std::vector<int32_t> tokenize(std::string_view text) const override {
        return std::vector<int32_t>(text.size(), 1);
    }
    sl::app::ServeResult run(const sl::ChatCompletionRequest& request, const std::function<void(std::string_view)>& on_text,
                             const std::atomic<bool>&) override {
        ++runs;
        const std::string text = "answer to " + sl::last_user_text(request);
        on_text(text);
        return {text, "stop", {}, {}};
    }
    bool idle() override { return idle_script.step(); }
    std::atomic<int> runs{0};
    sl::test::ScriptedIdle idle_script;
};

// One completion on its own connection; the reply's body ("" when none came in time).
QByteArray complete(quint16 port, const QByteArray& question) {
    const QByteArray body = "{\"model\":\"scripted\",\"messages\":[{\"role\":\"user\",\"content\":\"" + question + "\"}]}";
    QTcpSocket s;
    s.connectToHost(QStringLiteral("127.0.0.1"), port);
    s.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            "Content-Length: " + QByteArray::number(body.size()) + "\r\n\r\n" + body);
    QByteArray all;
    const bool came = QTest::qWaitFor(
        [&] {
            all += s.readAll();
            return s.state() == QAbstractSocket::UnconnectedState || all.contains("\"finish_reason\"");
        },
        30000);
    all += s.readAll();
    return came ? all : QByteArray();
}

}  // namespace

class TstApiServerIdle : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void idleSlicesRunBetweenCompletions();
};

void TstApiServerIdle::idleSlicesRunBetweenCompletions() {
    ScriptedBackend backend;
    sl::app::ApiServerOptions o;
    o.port = 0;
    sl::app::ApiServer server(backend, o);
    server.listen();
    backend.idle_script.slices = 5;
    QVERIFY(complete(server.port(), "first").contains("answer to first"));
    QTRY_COMPARE_WITH_TIMEOUT(backend.idle_script.calls.load(), 5, 10000);
    QTest::qWait(50);
    QCOMPARE(backend.idle_script.calls.load(), 5);  // it said there was no more
    backend.idle_script.slices = -1;  // from now on, always more
    QVERIFY(complete(server.port(), "second").contains("answer to second"));
    QTRY_VERIFY_WITH_TIMEOUT(backend.idle_script.calls.load() > 20, 10000);
    QVERIFY(complete(server.port(), "third").contains("answer to third"));  // answered while it idled
    QCOMPARE(backend.runs.load(), 3);
    backend.idle_script.slices = 0;  // the idle run after it ends at its next slice (before the server goes)
}

QTEST_GUILESS_MAIN(TstApiServerIdle)
#include "tst_api_server_idle.moc"
