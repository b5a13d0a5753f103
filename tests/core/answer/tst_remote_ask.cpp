// ask_remote (core/ask/remote_ask.h) with a scripted ChatEngine, no network: the context is planned
// for the engine's context length in its token count (the ratio from its tokenize endpoint, or the
// 1.25 estimate without one), the messages carry the units with their places and the question,
// the streamed answer is cited from the units sent (verification alone), the chat is stored naming
// the engine and never a key, and a cancel during the stream throws Cancelled.
#include <QTemporaryDir>
#include <QTest>

#include <atomic>

#include "core/ask/remote_ask.h"
#include "core/embed/json.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/remote/chat_engine.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/assets.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"

namespace {

// Answers with a fixed text in pieces; counts tokens as `ratio` x the local tokenizer (or has no
// tokenize endpoint when ratio is 0).
class ScriptedEngine final : public sl::ChatEngine {
public:
    ScriptedEngine(const sl::Tokenizer& tok, double ratio, int64_t ctx, std::string answer)
        : tok_(tok), ratio_(ratio), ctx_(ctx), answer_(std::move(answer)) {}
    std::string describe() const override { return "scripted://engine, model big"; }
    std::string model() const override { return "big"; }
    int64_t context_length() const override { return ctx_; }
    std::optional<int64_t> count_tokens(const std::string& text) override {
        if (ratio_ <= 0) return std::nullopt;
        return static_cast<int64_t>(static_cast<double>(tok_.encode(text, false, false).size()) * ratio_);
    }
    sl::ChatReply chat(const sl::ChatRequest& r, const std::function<bool(std::string_view)>& on_delta,
                       const std::atomic<bool>* cancel) override {
        request = r;
        sl::ChatReply out;
        for (size_t at = 0; at < answer_.size(); at += 7) {
            if (cancel_after_ >= 0 && static_cast<int64_t>(at) >= cancel_after_) cancel_flag->store(true);
            if (cancel && cancel->load()) {
                out.finish_reason = "cancelled";
                return out;
            }
            if (!on_delta(std::string_view(answer_).substr(at, 7))) break;
        }
        out.finish_reason = "stop";
        out.prompt_tokens = 1234;
        out.completion_tokens = 42;
        return out;
    }
    sl::ChatRequest request;
    int64_t cancel_after_ = -1;  // >= 0: set *cancel_flag after that many bytes
    std::atomic<bool>* cancel_flag = nullptr;

private:
    const sl::Tokenizer& tok_;
    double ratio_;
    int64_t ctx_;
    std::string answer_;
};

const char* const kAnswer =
    "Use the function read.table() to read a data frame from a file. "
    "The scan() function reads data into a vector or list from the console or a file.";

}  // namespace

class TstRemoteAsk : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;
    std::unique_ptr<sl::LoadedModel> model_;
    std::unique_ptr<sl::Library> lib_;

private Q_SLOTS:
    void initTestCase() {
        REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
        REQUIRE_ASSET(pdf_path, "samples/pdf/R-intro.pdf");
        model_ = sl::load_model(model_path);
        lib_ = std::make_unique<sl::Library>(sl::Library::open(dir_.path().toStdString()));
        sl::ingest::IngestOptions io;
        io.ocr = false;
        io.thumbnail_px = 0;
        sl::ingest::IngestContext ictx(io);
        sl::doc::Document d = sl::ingest::read_document(pdf_path.string(), ictx);
        sl::Library::FileInfo fi;
        fi.path = pdf_path.string();
        lib_->store_document(d, fi);
    }

    void plansForTheEngineAndCites() {
        ScriptedEngine engine(*model_->tokenizer, 2.0, 4096, kAnswer);
        sl::AskOptions o;
        o.effort = sl::Effort::Low;
        o.question = "Which function reads a data frame from a file?";
        std::string streamed;
        sl::AskCallbacks cb;
        cb.on_text = [&](std::string_view t) { streamed += t; };
        const sl::AskResult r = sl::ask_remote(*lib_, *model_, engine, o, cb);
        QCOMPARE(streamed, std::string(kAnswer));
        QCOMPARE(r.answer.text, std::string(kAnswer));
        // Two messages: the units with their places, then the question.
        QCOMPARE(engine.request.messages.size(), size_t{2});
        const std::string& sys = engine.request.messages[0].content;
        QVERIFY(sys.find("[R-intro.pdf p. ") != std::string::npos);
        QCOMPARE(engine.request.messages[1].content, o.question);
        QCOMPARE(engine.request.temperature, 0.0);
        // In the engine's tokens (2 per local token) the messages fit its 4,096-token context with
        // the answer's budget.
        const int64_t remote = *engine.count_tokens(sys) + *engine.count_tokens(o.question);
        QVERIFY2(remote + engine.request.max_tokens <= 4096, qPrintable(QString::number(remote)));
        QVERIFY2(remote > 2000, qPrintable(QString::number(remote)));  // and it is used, not wasted
        // Cited from the units sent: read.table's page among the sources.
        QVERIFY(!r.answer.citations.empty());
        bool table = false;
        for (const auto& c : r.answer.citations) table |= c.text.find("read.table") != std::string::npos;
        QVERIFY2(table, r.answer.sources_text().c_str());
        QCOMPARE(r.context_tokens, int64_t{1234});  // the server's usage
        QCOMPARE(r.answer.steps, 42);
        QVERIFY(r.attention.rfind("remote (scripted://engine", 0) == 0);
        QVERIFY(r.kv_note.find("attention-based citations need the local engine") != std::string::npos);
        // The stored chat names the engine and its model.
        const auto chats = lib_->list_chats();
        QVERIFY(!chats.empty());
        const sl::JsonValue settings = sl::JsonValue::parse(chats.back().settings, "settings");
        QCOMPARE(settings.find("attention")->text(), std::string("remote"));
        QCOMPARE(settings.find("engine")->text(), std::string("scripted://engine, model big"));
        QCOMPARE(settings.find("token_ratio")->as_double(), 2.0 * 1.05);
    }

    void estimatesWithoutTokenizeEndpoint() {
        ScriptedEngine engine(*model_->tokenizer, 0, 2048, kAnswer);
        sl::AskOptions o;
        o.effort = sl::Effort::Low;
        o.question = "What does scan() return?";
        std::vector<std::string> status;
        sl::AskCallbacks cb;
        cb.on_status = [&](const std::string& s) { status.push_back(s); };
        const sl::AskResult r = sl::ask_remote(*lib_, *model_, engine, o, cb);
        bool said = false;
        for (const auto& s : status) said |= s.find("estimated at 1.25 x the local count") != std::string::npos;
        QVERIFY(said);
        const int64_t local = static_cast<int64_t>(model_->tokenizer->encode(engine.request.messages[0].content).size());
        QVERIFY2(static_cast<double>(local) * 1.25 + engine.request.max_tokens <= 2048, qPrintable(QString::number(local)));
        QVERIFY(!r.answer.text.empty());
    }

    void cancelDuringTheStream() {
        ScriptedEngine engine(*model_->tokenizer, 1.0, 4096, kAnswer);
        std::atomic<bool> cancel{false};
        engine.cancel_after_ = 20;
        engine.cancel_flag = &cancel;
        sl::AskOptions o;
        o.effort = sl::Effort::Low;
        o.question = "Which function reads a data frame from a file?";
        o.cancel = &cancel;
        const size_t chats = lib_->list_chats().size();
        QVERIFY_THROWS_EXCEPTION(sl::Cancelled, sl::ask_remote(*lib_, *model_, engine, o));
        QCOMPARE(lib_->list_chats().size(), chats);  // nothing stored
    }
};

QTEST_APPLESS_MAIN(TstRemoteAsk)
#include "tst_remote_ask.moc"
