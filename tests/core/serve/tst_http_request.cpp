// HttpRequestParser (core/serve/http_request.h): requests whole and byte by byte, pipelined and
// kept alive, and the refusals with the status each earns.
#include <QTest>

#include <string>

#include "core/serve/http_request.h"

using sl::HttpRequestParser;
using State = HttpRequestParser::State;

class TstHttpRequest : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void wholeRequest() {
        HttpRequestParser p;
        const std::string body = R"({"model":"x"})";
        const std::string req = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Authorization:  Bearer abc \r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
        QCOMPARE(p.feed(req), State::Complete);
        const auto& r = p.request();
        QCOMPARE(r.method, std::string("POST"));
        QCOMPARE(r.path, std::string("/v1/chat/completions"));
        QCOMPARE(r.query, std::string("x=1"));
        QCOMPARE(r.body, body);
        QCOMPARE(std::string(*r.header("authorization")), std::string("Bearer abc"));
        QVERIFY(!r.header("x-missing"));
        QVERIFY(r.keep_alive());
    }

    void byteByByte() {
        const std::string req = "GET /v1/models HTTP/1.0\nConnection: keep-alive\n\n";
        HttpRequestParser p;
        for (size_t i = 0; i + 1 < req.size(); ++i) QCOMPARE(p.feed(req.substr(i, 1)), State::Incomplete);
        QCOMPARE(p.feed(req.substr(req.size() - 1)), State::Complete);
        QCOMPARE(p.request().minor_version, 0);
        QVERIFY(p.request().keep_alive());
    }

    void pipelined() {
        HttpRequestParser p;
        QCOMPARE(p.feed("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhiGET"), State::Complete);
        QCOMPARE(p.request().path, std::string("/a"));
        p.reset();
        QCOMPARE(p.state(), State::Complete);
        QCOMPARE(p.request().path, std::string("/b"));
        QCOMPARE(p.request().body, std::string("hi"));
        QVERIFY(!p.request().keep_alive());
        p.reset();
        QCOMPARE(p.state(), State::Incomplete);  // "GET" so far
        QCOMPARE(p.feed(" /c HTTP/1.1\r\n\r\n"), State::Complete);
        QCOMPARE(p.request().path, std::string("/c"));
    }

    void refused_data() {
        QTest::addColumn<QByteArray>("request");
        QTest::addColumn<int>("status");
        QTest::newRow("no version") << QByteArray("GET /\r\n\r\n") << 400;
        QTest::newRow("HTTP/2") << QByteArray("GET / HTTP/2.0\r\n\r\n") << 505;
        QTest::newRow("not http") << QByteArray("GET / FTP/1.1\r\n\r\n") << 400;
        QTest::newRow("relative target") << QByteArray("GET v1 HTTP/1.1\r\n\r\n") << 400;
        QTest::newRow("bad method") << QByteArray("G(T / HTTP/1.1\r\n\r\n") << 400;
        QTest::newRow("no colon") << QByteArray("GET / HTTP/1.1\r\nHost\r\n\r\n") << 400;
        QTest::newRow("folded") << QByteArray("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n") << 400;
        QTest::newRow("control char") << QByteArray("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 28) << 400;
        QTest::newRow("post without length") << QByteArray("POST / HTTP/1.1\r\n\r\n") << 411;
        QTest::newRow("chunked") << QByteArray("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") << 501;
        QTest::newRow("negative length") << QByteArray("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") << 400;
        QTest::newRow("huge length") << QByteArray("POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n") << 413;
        QTest::newRow("conflicting lengths")
            << QByteArray("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n") << 400;
        QTest::newRow("too many headers") << QByteArray("GET / HTTP/1.1\r\n" + QByteArray("A: b\r\n").repeated(65) + "\r\n") << 431;
        QTest::newRow("headers too large") << QByteArray("GET / HTTP/1.1\r\nA: " + QByteArray(17000, 'x')) << 431;
    }
    void refused() {
        QFETCH(QByteArray, request);
        QFETCH(int, status);
        HttpRequestParser p(1 << 20);
        QCOMPARE(p.feed(std::string_view(request.constData(), static_cast<size_t>(request.size()))), State::Error);
        QCOMPARE(p.error_status(), status);
        QVERIFY(!p.error().empty());
        QVERIFY(!std::string(sl::http_reason(status)).empty());
    }

    void bodyWaitsForAllBytes() {
        HttpRequestParser p;
        QCOMPARE(p.feed("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"), State::Incomplete);
        QCOMPARE(p.feed("cde"), State::Complete);
        QCOMPARE(p.request().body, std::string("abcde"));
    }
};

QTEST_APPLESS_MAIN(TstHttpRequest)
#include "tst_http_request.moc"
