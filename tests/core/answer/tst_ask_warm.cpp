// The library prefill kept in memory between questions (core/ask/warm_context.h, AskOptions::warm)
// answers as a restore from the file does: on a library of five R-intro.pdf pages (SmolLM2, MSA),
// each question is asked once without a warm context (restored from the file; the reference) and
// once through one WarmContext, and the two answers must agree — text, citations, what was read.
//
//   partial prefill (the first ~1,024 tokens saved): Q1 then Q2 then Q2 again through the warm
//       context: Q1 restores (nothing held yet), Q2 takes the session Q1 left (cut back to the
//       saved part, its units prefilled), Q2 again prefills nothing; Q1 again (its context saved)
//       restores its own part of that saved context onto the held session (on the CPU faster
//       than prefilling its units);
//   invalidation: the file touched, another effort (top-k), or a context too small -> restored
//       from the file again; clear() drops it; complete_only does not hold a partial prefill;
//   complete prefill of a context smaller than the library (units left to preselect): Q1 restores
//       and reopens the context before its closing, Q2 takes the session after it;
//   a question stopped mid-answer leaves the session held, and the next question takes it and
//       answers as from the file; a question that does not read the library prefill (its own
//       context) releases what is held first.
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <chrono>
#include <filesystem>

#include "core/ask/ask.h"
#include "core/ask/context_spec.h"
#include "core/ask/library_context.h"
#include "core/ask/warm_context.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/assets.h"
#include "ingest/reader.h"
#include "tests/common/library_prefill_support.h"
#include "tests/common/test_support.h"

class TstAskWarm : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void partialPrefill();
    void invalidation();
    void completePrefillOfPartOfTheLibrary();
    void stoppedQuestionLeavesItUsable();

private:
    // A fresh library in `dir` holding the five pages.
    sl::Library make_library(const QTemporaryDir& dir);
    // The library prefill of a context of at most max_tokens, run to its end; its size.
    int64_t prefill_whole(sl::Library& lib, int64_t max_tokens);
    // The same question asked from the file (no warm context) and through `warm`: equal answers.
    sl::AskResult ask_both(sl::Library& lib, sl::AskOptions o, sl::WarmContext& warm, bool expect_warm);

    std::unique_ptr<sl::LoadedModel> model_;
    std::filesystem::path pdf_;
    std::vector<sl::doc::Unit> units_;
    sl::doc::Document doc_;
};

void TstAskWarm::initTestCase() {
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf_path, "samples/pdf/R-intro.pdf");
    model_ = sl::load_model(model_path);
    pdf_ = pdf_path;
    sl::ingest::IngestOptions io;
    io.ocr = false;
    io.thumbnail_px = 0;
    sl::ingest::IngestContext ictx(io);
    doc_ = sl::ingest::read_document(pdf_path.string(), ictx);
    const std::vector<sl::doc::Unit> all = doc_.units;
    doc_.units = {all[10], all[27], all[54], all[66], all[39]};  // labels p. 5, 22, 49, 61, then p. 34
}

sl::Library TstAskWarm::make_library(const QTemporaryDir& dir) {
    sl::Library lib = sl::Library::open(dir.path().toStdString());
    sl::Library::FileInfo fi;
    fi.path = pdf_.string();
    lib.store_document(doc_, fi);
    return lib;
}

int64_t TstAskWarm::prefill_whole(sl::Library& lib, int64_t max_tokens) {
    sl::LibraryPrefillOptions po;
    po.max_tokens = max_tokens;
    sl::LibraryPrefill p(lib, *model_, po);
    p.run();
    p.record();
    if (!p.status().finished) qFatal("the library prefill did not finish: %s", p.status().error.c_str());
    return static_cast<int64_t>(p.context().stream.tokens.size());
}

sl::AskResult TstAskWarm::ask_both(sl::Library& lib, sl::AskOptions o, sl::WarmContext& warm, bool expect_warm) {
    // Each from the library prefill alone: the question contexts saved before are removed first
    // (a saved context of the question would be restored instead of computed).
    auto forget_questions = [&] {
        for (const auto& rec : lib.list_kv_caches()) {
            const auto spec = sl::ContextSpec::decode(rec.settings);
            if (!spec || !spec->library_prefill) lib.remove_kv_cache(rec.id);
        }
    };
    forget_questions();
    o.warm = &warm;
    const sl::AskResult w = sl::ask(lib, *model_, o);
    forget_questions();
    o.warm = nullptr;
    const sl::AskResult cold = sl::ask(lib, *model_, o);
    qInfo("Q: %s\n  from the file: prefilled %lld, %.2f s to the context; %s\n  warm (%s): prefilled %lld, %.2f s; %s\n  %s",
          o.question.c_str(), static_cast<long long>(cold.prefilled_tokens), cold.prefill_seconds, cold.kv_note.c_str(),
          w.warm ? "taken" : "restored", static_cast<long long>(w.prefilled_tokens), w.prefill_seconds, w.kv_note.c_str(),
          w.answer.with_markers().c_str());
    [&] {
        QVERIFY2(cold.from_library_prefill && w.from_library_prefill, w.kv_note.c_str());
        QVERIFY(!cold.warm);
        QCOMPARE(w.warm, expect_warm);
        QCOMPARE(w.library_saved, cold.library_saved);
        QCOMPARE(w.context_tokens, cold.context_tokens);
        QCOMPARE(w.read_summary, cold.read_summary);
        QVERIFY(cold.prefilled_tokens > 0 || cold.context_tokens == cold.library_saved);  // computed, not restored
        if (w.prefilled_tokens > 0) QCOMPARE(w.prefilled_tokens, cold.prefilled_tokens);  // the same calls
        QCOMPARE(w.answer.text, cold.answer.text);
        QCOMPARE(w.answer.with_markers(), cold.answer.with_markers());
        QCOMPARE(w.answer.sources_text(), cold.answer.sources_text());
        if (expect_warm) QVERIFY2(w.kv_note.find("kept in memory") != std::string::npos, w.kv_note.c_str());
    }();
    return w;
}

void TstAskWarm::partialPrefill() {
    QVERIFY(model_);
    QTemporaryDir dir;
    sl::Library lib = make_library(dir);
    const sl::test::StoppedPrefill stopped = sl::test::stop_library_prefill_after(lib, *model_, 1024);
    const int64_t total = stopped.total, saved = stopped.saved;
    QVERIFY2(saved >= 1024 && saved < total, qPrintable(QStringLiteral("%1 of %2").arg(saved).arg(total)));

    sl::WarmContext warm;
    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.preselect_tokens = 1536;
    o.question = "Which function reads a data frame from the file houses.data?";
    const auto r1 = ask_both(lib, o, warm, false);  // nothing held yet: restored, then held
    QVERIFY(warm.holds());
    QCOMPARE(r1.library_saved, saved);
    o.question = "What does the scan() function return?";
    const auto r2 = ask_both(lib, o, warm, true);
    QVERIFY(warm.holds());
    const auto r3 = ask_both(lib, o, warm, true);  // the same units: nothing to prefill
    QCOMPARE(r3.prefilled_tokens, int64_t{0});
    QCOMPARE(warm.hits(), int64_t{2});
    // A warm question prefills no more than one from the file (which prefills the units after the
    // saved part, or restores them from the question cache).
    QVERIFY(r2.prefilled_tokens <= r2.context_tokens - saved);
    // Q1 again, its context saved and the session holding Q2's: on the CPU the question's own
    // part of its saved context is restored onto the held session (faster than prefilling its
    // units; the library prefill is not read again), answering as from the file.
    o.question = "Which function reads a data frame from the file houses.data?";
    o.warm = nullptr;
    const auto r1c = sl::ask(lib, *model_, o);  // computed and saved (the session held untouched)
    o.warm = &warm;
    const auto r1b = sl::ask(lib, *model_, o);
    QVERIFY2(r1b.warm, r1b.kv_note.c_str());
    if (r1b.device.rfind("CPU", 0) == 0)
        QVERIFY2(r1b.prefilled_tokens == 0 && r1b.kv_note.find(" own tokens from ") != std::string::npos &&
                     r1b.kv_note.find("kept in memory") != std::string::npos,
                 r1b.kv_note.c_str());
    // else a device prefills the units (milliseconds)
    QCOMPARE(r1b.answer.text, r1c.answer.text);
    QCOMPARE(r1b.answer.with_markers(), r1c.answer.with_markers());
    QCOMPARE(r1b.answer.sources_text(), r1c.answer.sources_text());
    QCOMPARE(r1c.answer.text, r1.answer.text);
    QVERIFY(warm.holds());

    // An owner that holds complete prefills only does not keep this one.
    sl::WarmContext complete_only(true);
    o.warm = &complete_only;
    const auto r4 = sl::ask(lib, *model_, o);
    QVERIFY(!r4.warm);
    QVERIFY(!complete_only.holds());
}

void TstAskWarm::invalidation() {
    QVERIFY(model_);
    QTemporaryDir dir;
    sl::Library lib = make_library(dir);
    prefill_whole(lib, sl::LibraryPrefillOptions().max_tokens);
    sl::WarmContext warm;
    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.question = "How are the elements of a list accessed?";
    o.warm = &warm;
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    const auto r = sl::ask(lib, *model_, o);
    QVERIFY2(r.warm, r.kv_note.c_str());
    QCOMPARE(r.prefilled_tokens, int64_t{0});  // the whole library read, nothing after it to prefill

    // The file touched: restored from it again (and held anew).
    const auto rec = lib.list_kv_caches().at(0);
    std::filesystem::last_write_time(rec.path, std::filesystem::last_write_time(rec.path) + std::chrono::seconds(2));
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    QVERIFY(sl::ask(lib, *model_, o).warm);
    // Another effort (another top-k): another attention, restored.
    o.effort = sl::Effort::Medium;
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    QVERIFY(sl::ask(lib, *model_, o).warm);
    // Dense attention over the same file: another attention.
    o.msa = false;
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    o.msa = true;
    // Dropped: restored.
    QVERIFY(warm.holds());
    warm.clear();
    QVERIFY(!warm.holds());
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    // Released (handed to the owner, as the app frees it on a worker): nothing held, restored.
    {
        QVERIFY(warm.holds());
        const std::string key = warm.key();
        sl::WarmSession out = warm.release();
        QVERIFY(out.session && out.key == key && !warm.holds() && warm.key().empty());
    }
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    // A session too small for what is asked, or made another way, is not taken (and dropped).
    QVERIFY(warm.holds());
    const std::string key = warm.key();
    QVERIFY(!warm.take(key, 1 << 30).session);
    QVERIFY(!warm.holds());
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    QVERIFY(!warm.take(key + "x", 0).session);
    QVERIFY(!warm.holds());
    QVERIFY(!sl::ask(lib, *model_, o).warm);
    QVERIFY(warm.take(key, 0).session);
}

void TstAskWarm::completePrefillOfPartOfTheLibrary() {
    QVERIFY(model_);
    QTemporaryDir dir;
    sl::Library lib = make_library(dir);
    // A context of part of the library: the rest is preselected per question.
    const int64_t total = prefill_whole(lib, 2048);
    sl::WarmContext warm(true);  // as the app holds them
    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.preselect_tokens = 700;
    o.question = "Which function reads a data frame from the file houses.data?";
    const auto r1 = ask_both(lib, o, warm, false);
    QCOMPARE(r1.library_saved, total);
    QVERIFY2(r1.read_summary.find("preselected") != std::string::npos, r1.read_summary.c_str());
    QVERIFY(warm.holds());
    o.question = "What is a generalized linear model made of?";
    const auto r2 = ask_both(lib, o, warm, true);
    QVERIFY(warm.holds());
    QVERIFY2(r2.read_summary != r1.read_summary, r2.read_summary.c_str());  // other units after the saved part
}

void TstAskWarm::stoppedQuestionLeavesItUsable() {
    QVERIFY(model_);
    QTemporaryDir dir;
    sl::Library lib = make_library(dir);
    prefill_whole(lib, 2048);
    sl::WarmContext warm;
    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.preselect_tokens = 700;
    o.question = "Which function reads a data frame from the file houses.data?";
    std::atomic<bool> stop{false};
    o.cancel = &stop;
    o.warm = &warm;
    sl::AskCallbacks cb;
    cb.on_text = [&](std::string_view) { stop = true; };  // stopped at the answer's first text
    QVERIFY_THROWS_EXCEPTION(sl::Cancelled, sl::ask(lib, *model_, o, cb));
    QVERIFY(warm.holds());
    o.cancel = nullptr;
    o.question = "What is a generalized linear model made of?";
    ask_both(lib, o, warm, true);
    QVERIFY(warm.holds());
    // Its own context (no library prefill read): what was held goes before it is made.
    o.use_library_prefill = false;
    o.warm = &warm;
    const auto r = sl::ask(lib, *model_, o);
    QVERIFY(!r.from_library_prefill);
    QVERIFY(!warm.holds());
}

QTEST_MAIN(TstAskWarm)
#include "tst_ask_warm.moc"
