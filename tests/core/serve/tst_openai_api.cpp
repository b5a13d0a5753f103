// The OpenAI chat API's JSON (core/serve/openai_api.h), the server-sent events a remote engine
// streams (core/remote/sse.h) and the messages a remote ask sends (core/ask/remote_ask.h).
#include <QTest>

#include <string>
#include <vector>

#include "core/answer/answer.h"
#include "core/ask/remote_ask.h"
#include "core/embed/json.h"
#include "core/remote/sse.h"
#include "core/serve/openai_api.h"
#include "core/util/error.h"

class TstOpenAiApi : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void parsesRequest() {
        const auto r = sl::parse_chat_completion_request(
            R"({"model":"sightline","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0,
                "effort":"low","messages":[{"role":"developer","content":"Be brief."},
                {"role":"user","content":[{"type":"text","text":"Where is lm"},{"type":"image_url","image_url":{"url":"x"}},
                {"type":"text","text":"discussed?"}]},{"role":"assistant","content":null}]})");
        QCOMPARE(r.model, std::string("sightline"));
        QVERIFY(r.stream);
        QVERIFY(r.include_usage);
        QCOMPARE(r.max_tokens, 64);
        QCOMPARE(r.temperature, 0.0);
        QCOMPARE(*r.effort, std::string("low"));
        QCOMPARE(r.messages.size(), size_t{3});
        QCOMPARE(r.messages[0].role, std::string("system"));
        QCOMPARE(sl::last_user_text(r), std::string("Where is lm\ndiscussed?"));
    }

    void refusesRequest_data() {
        QTest::addColumn<QString>("body");
        QTest::addColumn<QString>("says");
        QTest::newRow("not json") << "{" << "JSON";
        QTest::newRow("array") << "[]" << "not a JSON object";
        QTest::newRow("no messages") << R"({"model":"m"})" << "messages";
        QTest::newRow("empty messages") << R"({"messages":[]})" << "messages";
        QTest::newRow("bad role") << R"({"messages":[{"role":"tool","content":"x"}]})" << "role";
        QTest::newRow("no role") << R"({"messages":[{"content":"x"}]})" << "no role";
        QTest::newRow("bad content") << R"({"messages":[{"role":"user","content":5}]})" << "content";
        QTest::newRow("zero tokens") << R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})" << "max_tokens";
        QTest::newRow("hot") << R"({"messages":[{"role":"user","content":"x"}],"temperature":3})" << "temperature";
        QTest::newRow("effort") << R"({"messages":[{"role":"user","content":"x"}],"effort":"max"})" << "effort";
    }
    void refusesRequest() {
        QFETCH(QString, body);
        QFETCH(QString, says);
        try {
            sl::parse_chat_completion_request(body.toStdString());
            QFAIL("accepted");
        } catch (const sl::FormatError& e) {
            QVERIFY2(QString::fromStdString(e.what()).contains(says), e.what());
        }
    }

    void chunksRoundTrip() {
        const std::string c = sl::chunk_json("id1", 5, "m", "héllo \"x\"", true, std::nullopt);
        const sl::ChatChunk k = sl::parse_chat_chunk(c, "test");
        QCOMPARE(k.content, std::string("héllo \"x\""));
        QVERIFY(!k.finish_reason);
        const std::string last = sl::chunk_json("id1", 5, "m", "", false, std::string("length"), sl::CompletionUsage{12, 3},
                                                R"({"question":"q","citations":[]})");
        const sl::ChatChunk e = sl::parse_chat_chunk(last, "test");
        QCOMPARE(*e.finish_reason, std::string("length"));
        QCOMPARE(e.prompt_tokens, int64_t{12});
        QCOMPARE(e.completion_tokens, int64_t{3});
        QCOMPARE(e.extra, std::string(R"({"question":"q","citations":[]})"));
        QVERIFY(sl::parse_chat_chunk("[DONE]", "test").done);
        const sl::ChatChunk err = sl::parse_chat_chunk(sl::error_json("boom", "server_error", 500), "test");
        QCOMPARE(err.error, std::string("boom"));
        // Reasoning streamed apart stays out of the content; log-probabilities are read.
        const sl::ChatChunk r = sl::parse_chat_chunk(
            R"({"choices":[{"delta":{"reasoning_content":"hmm"},"logprobs":{"content":[{"token":"a","logprob":-0.5}]}}]})", "t");
        QVERIFY(r.content.empty());
        QCOMPARE(r.reasoning, std::string("hmm"));
        QCOMPARE(r.logprobs, std::vector<double>{-0.5});
        QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::parse_chat_chunk("not json", "t"));
        QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::parse_chat_chunk("[1]", "t"));
    }

    void completionAndModels() {
        const sl::JsonValue v = sl::JsonValue::parse(
            sl::completion_json("id", 7, "sightline", "Fit it with lm() [1].", "stop", {100, 8}, R"({"chat_id":3})"), "t");
        QCOMPARE(v.find("choices")->items()[0].find("message")->find("content")->text(), std::string("Fit it with lm() [1]."));
        QCOMPARE(*v.find("usage")->find("total_tokens")->as_u64(), uint64_t{108});
        QCOMPARE(*v.find("sightline")->find("chat_id")->as_u64(), uint64_t{3});
        const sl::JsonValue m = sl::JsonValue::parse(sl::models_json({{"sightline", 8192, "sightline"}, {"raw", 0, "x"}}, 1), "t");
        QCOMPARE(m.find("data")->items().size(), size_t{2});
        QCOMPARE(*m.find("data")->items()[0].find("max_model_len")->as_u64(), uint64_t{8192});
        QVERIFY(!m.find("data")->items()[1].find("context_length"));
        QCOMPARE(std::string(sl::finish_reason_of("max tokens")), std::string("length"));
        QCOMPARE(std::string(sl::finish_reason_of("eos")), std::string("stop"));
    }

    void answerExtra() {
        sl::Answer a;
        a.question = "where?";
        a.text = "Here.";
        a.sentences.push_back({0, 5, {{0, 1.0, 0.8, std::nullopt, true, false}}});
        sl::Citation pdf;
        pdf.number = 1;
        pdf.locator = "R-intro.pdf p. 12";
        pdf.kind = sl::doc::DocumentKind::Pdf;
        pdf.ref.unit = 11;
        a.citations.push_back(pdf);
        sl::Citation video;
        video.number = 2;
        video.locator = "talk.mp4 00:01:05";
        video.kind = sl::doc::DocumentKind::Video;
        video.ref.time = sl::doc::TimeRange{65, 70};
        a.citations.push_back(video);
        a.sentences[0].supports.push_back({1, 0.5, 0.1, std::nullopt, true, true});
        const sl::JsonValue v = sl::JsonValue::parse(sl::answer_extra_json(a, "3 units", 9), "t");
        const auto& cs = v.find("citations")->items();
        QCOMPARE(cs.size(), size_t{2});
        QCOMPARE(*cs[0].find("page")->as_u64(), uint64_t{12});
        QCOMPARE(cs[0].find("weak")->as_bool(), false);
        QCOMPARE(cs[1].find("t0")->as_double(), 65.0);
        QVERIFY(!cs[1].find("page"));
        QCOMPARE(cs[1].find("weak")->as_bool(), true);
        QCOMPARE(v.find("read")->text(), std::string("3 units"));
    }

    void sseDecoder() {
        std::vector<std::string> got;
        sl::SseDecoder d("test");
        const std::string stream = ": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\nid: 3\rdata: [DONE]\r\r";
        // Any split of the bytes gives the same events.
        for (size_t step : {size_t{1}, size_t{2}, size_t{7}, stream.size()}) {
            got.clear();
            sl::SseDecoder s("test");
            for (size_t i = 0; i < stream.size(); i += step)
                s.feed(std::string_view(stream).substr(i, step), [&](const std::string& e) { got.push_back(e); });
            QCOMPARE(got, (std::vector<std::string>{"{\"a\":1}", "line1\nline2", "[DONE]"}));
        }
        sl::SseDecoder big("test");
        QVERIFY_THROWS_EXCEPTION(sl::FormatError, big.feed(std::string(sl::SseDecoder::kMaxEvent + 1, 'x'), [](const std::string&) {}));
        QCOMPARE(sl::error_message_of(R"({"error":{"message":"model is loading"}})"), std::string("model is loading"));
        QCOMPARE(sl::error_message_of(R"({"detail":"Not Found"})"), std::string("Not Found"));
        QCOMPARE(sl::error_message_of("Bad Gateway\n"), std::string("Bad Gateway"));
    }

    void remoteMessages() {
        sl::TokenStream ts;
        ts.prefix_tokens = 100;
        sl::StreamUnit u1;
        u1.locator = "R-intro.pdf p. 3";
        u1.begin = 10;
        sl::StreamUnit u2;
        u2.locator = "talk.mp4 00:00:05";
        u2.begin = 50;
        sl::StreamUnit after;  // after the prefix: not sent
        after.locator = "late";
        after.begin = 120;
        ts.units = {u1, u2, after};
        const auto m = sl::remote_messages("Answer.", ts, {"page text", "spoken text", "never"}, "where?");
        QCOMPARE(m.size(), size_t{2});
        QCOMPARE(m[0].role, std::string("system"));
        QVERIFY(m[0].content.starts_with("Answer.\n\n[R-intro.pdf p. 3]\npage text\n\n[talk.mp4 00:00:05]\nspoken text"));
        QVERIFY(m[0].content.find("never") == std::string::npos);
        QCOMPARE(m[1].content, std::string("where?"));
    }
};

QTEST_APPLESS_MAIN(TstOpenAiApi)
#include "tst_openai_api.moc"
