// The desktop app's background prefill (app/desktop/prefill_controller.h) with SmolLM2 on a small
// library (two R-intro.pdf pages, ~1.4K tokens, saved every 128 tokens):
//   - the controller prefills the library context on its worker, reporting increasing progress,
//     records a Partial KvCacheRecord when paused and a Complete one at the end; resumed, it
//     continues from the saved prefix;
//   - a new controller on the same library (a restart) reports it complete without prefilling
//     again (resumed_from == total, the file untouched);
//   - a document added starts the prefill of the new context from the old context's prefix (the
//     old file is its seed); removed, the new context's record and file are gone (cancelled if it
//     still ran), and the old context is complete again;
//   - in the window: the status bar shows the progress, "paused while answering" while the chat
//     answers, then "ready"; a file added through the app's ingest path starts the prefill again;
//   - the app's own answer service (LibraryAnswerService on the shared model) asked while the
//     prefill runs answers from what is prefilled so far and shows "Read: ..." under the answer;
//     once it is complete, the second question takes the context the service kept in memory,
//     and adding a file releases it.
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

#include <algorithm>

#include "app/desktop/chat_pane.h"
#include "app/desktop/ingest_queue.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/prefill_controller.h"
#include "app/desktop/shared_model.h"
#include "core/library/library.h"
#include "core/util/assets.h"
#include "ingest/reader.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

namespace {

constexpr int kLong = 600000;  // ms: a generous bound for a prefill on a loaded 2-core machine

PrefillControllerOptions small_options() {
    PrefillControllerOptions o;
    o.prefill.save_every = 128;
    o.prefill.max_tokens = 8192;
    o.report_ms = 100;
    return o;
}

std::vector<sl::KvCacheRecord> records(const QString& dir) {
    const sl::Library lib = sl::Library::open(dir.toStdString());
    return lib.list_kv_caches();
}

// Every progress the controller reports, in order.
struct Recorder {
    QList<PrefillProgress> seen;
    bool any(PrefillState s) const {
        return std::any_of(seen.begin(), seen.end(), [s](const PrefillProgress& p) { return p.state == s; });
    }
};

void record_into(PrefillController* c, Recorder* r) {
    QObject::connect(c, &PrefillController::progressChanged, c, [r](const PrefillProgress& p) {
        if (r->seen.isEmpty() || r->seen.back().state != p.state || p.done >= r->seen.back().done + 512)
            qInfo("%s: %s (%.0f tokens/s)", to_string(p.state), qPrintable(prefill_status_text(p)), p.tokens_per_second);
        r->seen << p;
    });
}

}  // namespace

class TstDesktopPrefill : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void controllerPausesResumesAndRestarts();
    void windowShowsProgressAndPausesWhileAnswering();
    void answersFromPartialPrefill();
    void quitMidPrefillStopsWithinTheChunk();

private:
    void storePages(const QString& dir);

    std::filesystem::path model_path_, pdf_path_, hello_path_;
    sl::doc::Document pages_;
    std::vector<sl::doc::Unit> all_pages_;
};

void TstDesktopPrefill::initTestCase() {
    sl::test::use_ffmpeg_media_backend();
    QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    REQUIRE_ASSET(hello, "samples/pdf/helloworld.pdf");
    model_path_ = model;
    pdf_path_ = pdf;
    hello_path_ = hello;
    sl::ingest::IngestOptions io;
    io.ocr = false;
    io.thumbnail_px = 0;
    sl::ingest::IngestContext ctx(io);
    pages_ = sl::ingest::read_document(pdf_path_.string(), ctx);
    const std::vector<sl::doc::Unit> all = pages_.units;
    QVERIFY(all.size() > 66);
    all_pages_ = all;
    pages_.units = {all[10], all[33]};
}

void TstDesktopPrefill::storePages(const QString& dir) {
    sl::Library lib = sl::Library::open(dir.toStdString());
    sl::Library::FileInfo fi;
    fi.path = pdf_path_.string();
    lib.store_document(pages_, fi);
}

void TstDesktopPrefill::controllerPausesResumesAndRestarts() {
    QTemporaryDir tmp;
    const QString dir = tmp.filePath(QStringLiteral("library"));
    storePages(dir);
    const PrefillControllerOptions opts = small_options();

    qint64 total = 0, paused_at = 0;
    {
        PrefillController c(dir.toStdString(), opts);
        Recorder r;
        record_into(&c, &r);
        c.setModel(std::make_shared<SharedModel>(model_path_));
        c.libraryChanged();
        QTRY_VERIFY_WITH_TIMEOUT(c.progress().state == PrefillState::Prefilling && c.progress().saved >= 256, kLong);
        c.pause();
        QTRY_COMPARE_WITH_TIMEOUT(c.progress().state, PrefillState::Paused, kLong);
        total = c.progress().total;
        paused_at = c.progress().saved;
        QVERIFY2(total > 1000, qPrintable(QString::number(total)));
        QVERIFY2(paused_at >= 256 && paused_at < total, qPrintable(QStringLiteral("%1 of %2").arg(paused_at).arg(total)));
        QCOMPARE(paused_at % 128, 0LL);
        {
            const auto recs = records(dir);
            QCOMPARE(recs.size(), size_t{1});
            QVERIFY(recs[0].state == sl::KvCacheState::Partial);
            QCOMPARE(recs[0].n_tokens, paused_at);
            QCOMPARE(recs[0].total_tokens, total);
            QCOMPARE(QString::fromStdString(recs[0].path), c.progress().file);
        }
        QTest::qWait(400);  // stays paused while held
        QCOMPARE(c.progress().state, PrefillState::Paused);

        // Progress before the pause: prefilling with done increasing.
        qint64 last = -1;
        int prefilling = 0;
        for (const auto& p : r.seen) {
            if (p.state != PrefillState::Prefilling) continue;
            QVERIFY2(p.done >= last, qPrintable(QStringLiteral("%1 after %2").arg(p.done).arg(last)));
            QCOMPARE(p.total, total);
            last = p.done;
            ++prefilling;
        }
        QVERIFY(prefilling >= 1);
        QVERIFY(!prefill_status_text(c.progress()).isEmpty());

        r.seen.clear();
        c.resume();
        QTRY_COMPARE_WITH_TIMEOUT(c.progress().state, PrefillState::Complete, kLong);
        const auto resumed = std::find_if(r.seen.begin(), r.seen.end(),
                                          [](const PrefillProgress& p) { return p.state == PrefillState::Prefilling; });
        QVERIFY(resumed != r.seen.end());
        QCOMPARE(resumed->resumed_from, paused_at);  // continued from the saved prefix
        QCOMPARE(c.progress().done, total);
        QCOMPARE(c.progress().saved, total);
        const auto recs = records(dir);
        QCOMPARE(recs.size(), size_t{1});
        QVERIFY(recs[0].state == sl::KvCacheState::Complete);
        QCOMPARE(recs[0].n_tokens, total);
    }

    const QString file = QString::fromStdString(records(dir)[0].path);
    const QDateTime written = QFileInfo(file).lastModified();
    {
        // A restart: complete at once, nothing prefilled, the file untouched.
        PrefillController c(dir.toStdString(), opts);
        Recorder r;
        record_into(&c, &r);
        c.setModel(std::make_shared<SharedModel>(model_path_));
        c.libraryChanged();
        QTRY_COMPARE_WITH_TIMEOUT(c.progress().state, PrefillState::Complete, kLong);
        QCOMPARE(c.progress().resumed_from, total);
        QCOMPARE(c.progress().total, total);
        QVERIFY(!r.any(PrefillState::Prefilling));
        QCOMPARE(QFileInfo(file).lastModified(), written);

        // A document added: the new context is prefilled; removed: back to the complete one.
        sl::DocId hello = 0;
        {
            sl::Library lib = sl::Library::open(dir.toStdString());
            sl::ingest::IngestOptions io;
            io.ocr = false;
            io.thumbnail_px = 0;
            sl::ingest::IngestContext ctx(io);
            sl::Library::FileInfo fi;
            fi.path = hello_path_.string();
            hello = lib.store_document(sl::ingest::read_document(hello_path_.string(), ctx), fi);
        }
        c.libraryChanged();
        // It starts from the old context's prefix (everything before the added document), so it may
        // be complete before the poll sees it prefilling.
        QTRY_VERIFY_WITH_TIMEOUT(c.progress().documents == 2 &&
                                     (c.progress().state == PrefillState::Complete ||
                                      (c.progress().state == PrefillState::Prefilling && c.progress().saved >= 128)),
                                 kLong);
        QVERIFY(c.progress().total > total);
        QVERIFY2(c.progress().resumed_from > total / 2, qPrintable(QString::number(c.progress().resumed_from)));
        const QString grown = c.progress().file;
        QVERIFY(grown != file);
        QTRY_COMPARE_WITH_TIMEOUT(records(dir).size(), size_t{2}, 10000);  // its Partial record

        sl::Library::open(dir.toStdString()).remove_document(hello);  // as the library pane's Remove does
        c.libraryChanged();
        QTRY_VERIFY_WITH_TIMEOUT(c.progress().state == PrefillState::Complete && c.progress().documents == 1, kLong);
        QCOMPARE(c.progress().total, total);
        const auto recs = records(dir);
        QCOMPARE(recs.size(), size_t{1});
        QCOMPARE(QString::fromStdString(recs[0].path), file);
        QTRY_VERIFY_WITH_TIMEOUT(!QFileInfo::exists(grown), 10000);
    }
}

void TstDesktopPrefill::windowShowsProgressAndPausesWhileAnswering() {
    QTemporaryDir tmp;
    const QString dir = tmp.filePath(QStringLiteral("library"));
    storePages(dir);
    const QString ini = tmp.filePath(QStringLiteral("sightline.conf"));
    {
        AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(false);
        s.setModelPath(QString::fromStdString(model_path_.string()));
        s.sync();
    }
    ChatAnswer scripted;
    scripted.answer.text = "R is a system for statistical computation and graphics.";
    scripted.read_summary = "test summary of what was read";
    scripted.method = "scripted";
    MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir;
    o.service = std::make_shared<sl::test::ScriptedAnswerService>(scripted);
    o.prefill = small_options();
    auto w = std::make_unique<MainWindow>(o);
    QVERIFY(w->prefill());
    Recorder r;
    QStringList texts;
    QObject::connect(w->prefill(), &PrefillController::progressChanged, w.get(),
                     [&](const PrefillProgress& p) {
                         r.seen << p;
                         texts << w->statusPrefillText();
                     });

    // At startup the stored library is prefilled.
    QTRY_VERIFY_WITH_TIMEOUT(w->statusPrefillText().startsWith(QStringLiteral("Context: prefilled ")), kLong);
    QVERIFY2(w->statusPrefillText().contains(QStringLiteral(" tokens (")), qPrintable(w->statusPrefillText()));
    if (const QString shots = qEnvironmentVariable("SIGHTLINE_SCREENSHOT_DIR"); !shots.isEmpty()) {
        w->resize(1400, 860);
        QDir().mkpath(shots);
        w->grab().save(QDir(shots).filePath(QStringLiteral("prefill-status.png")));
    }

    // Answering pauses it; it resumes afterwards and completes.
    QSignalSpy finished(w->chat(), &ChatPane::answerFinished);
    w->chat()->ask(QStringLiteral("What is R?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kLong);
    QTRY_VERIFY_WITH_TIMEOUT(w->statusPrefillText().startsWith(QStringLiteral("Context: ready")), kLong);
    QVERIFY2(r.any(PrefillState::Paused), qPrintable(texts.join(QLatin1Char('\n'))));
    QVERIFY2(texts.filter(QStringLiteral("Context: paused while answering")).size() >= 1, qPrintable(texts.join(QLatin1Char('\n'))));
    const auto paused = std::find_if(r.seen.begin(), r.seen.end(),
                                     [](const PrefillProgress& p) { return p.state == PrefillState::Paused; });
    const auto after = std::find_if(paused, r.seen.end(),
                                    [](const PrefillProgress& p) { return p.state == PrefillState::Prefilling; });
    if (after != r.seen.end()) QCOMPARE(after->resumed_from, paused->saved);  // resumed from its saved prefix
    QVERIFY(w->chat()->transcript()->toPlainText().contains(QStringLiteral("Read: test summary of what was read")));
    if (const QString shots = qEnvironmentVariable("SIGHTLINE_SCREENSHOT_DIR"); !shots.isEmpty())
        w->grab().save(QDir(shots).filePath(QStringLiteral("prefill-ready-answer.png")));
    const qint64 total = w->prefill()->progress().total;
    QVERIFY(total > 1000);

    // A file added through the app's ingest path: the context grows and is prefilled again.
    const QString hello = QString::fromStdString(hello_path_.string());
    w->addPaths({hello});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), hello), ItemState::Ready, kLong);
    // (From the old context's prefix: it may be complete before the poll sees it prefilling.)
    QTRY_VERIFY_WITH_TIMEOUT((w->prefill()->progress().state == PrefillState::Prefilling ||
                              w->prefill()->progress().state == PrefillState::Complete) &&
                                 w->prefill()->progress().documents == 2,
                             kLong);
    QVERIFY(w->prefill()->progress().total > total);
    QVERIFY(w->statusPrefillText().startsWith(QStringLiteral("Context: prefilled ")) ||
            w->statusPrefillText().startsWith(QStringLiteral("Context: ready")));
}

void TstDesktopPrefill::answersFromPartialPrefill() {
    QTemporaryDir tmp;
    const QString dir = tmp.filePath(QStringLiteral("library"));
    storePages(dir);
    const QString ini = tmp.filePath(QStringLiteral("sightline.conf"));
    {
        AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(false);
        s.setModelPath(QString::fromStdString(model_path_.string()));
        s.setEffort(QStringLiteral("low"));
        s.sync();
    }
    MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir;
    o.prefill = small_options();
    auto w = std::make_unique<MainWindow>(o);
    QTRY_VERIFY_WITH_TIMEOUT(w->prefill()->progress().state == PrefillState::Prefilling &&
                                 w->prefill()->progress().saved >= 256,
                             kLong);
    QSignalSpy finished(w->chat(), &ChatPane::answerFinished);
    w->chat()->ask(QStringLiteral("What is R?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kLong);
    const ChatAnswer& a = w->chat()->answers().back();
    qInfo("answer: %s", a.answer.with_markers().c_str());
    qInfo("read: %s", a.read_summary.c_str());
    qInfo("method: %s", a.method.c_str());
    QVERIFY2(a.error.empty(), a.error.c_str());
    QVERIFY(!a.answer.text.empty());
    QVERIFY(!a.read_summary.empty());
    QVERIFY2(a.method.find("the library's prefill") != std::string::npos, a.method.c_str());
    QVERIFY(w->chat()->transcript()->toPlainText().contains(QStringLiteral("Read: ")));
    QTRY_VERIFY_WITH_TIMEOUT(w->statusPrefillText().startsWith(QStringLiteral("Context: ready")), kLong);

    // Complete: the next question restores the whole context, the one after it takes the session
    // the service kept in memory; a change of the library's documents releases it.
    auto ask = [&](const QString& q) {
        const auto n = finished.count();
        w->chat()->ask(q);
        [&] { QTRY_COMPARE_WITH_TIMEOUT(finished.count(), n + 1, kLong); }();
        qInfo("method: %s", w->chat()->answers().back().method.c_str());
        return w->chat()->answers().back().method;
    };
    const std::string m1 = ask(QStringLiteral("What is R?"));
    QVERIFY2(m1.find("the library's prefilled context") != std::string::npos, m1.c_str());
    QVERIFY2(m1.find("kept in memory") == std::string::npos, m1.c_str());
    const std::string m2 = ask(QStringLiteral("How is R started?"));
    QVERIFY2(m2.find("the library's prefilled context (kept in memory") != std::string::npos, m2.c_str());
    const auto answers = w->libraryAnswers();
    QVERIFY(answers);
    QVERIFY(answers->holdsWarm());
    w->addPaths({QString::fromStdString(hello_path_.string())});
    QTRY_VERIFY_WITH_TIMEOUT(!answers->holdsWarm(), kLong);
}

void TstDesktopPrefill::quitMidPrefillStopsWithinTheChunk() {
    // Quitting (what Ctrl+Q does: cancelWork, then the window's destructor) while the background
    // prefill is inside a long chunk: the chunk is cancelled, not run to its end (the issue: the
    // process ran 20 s more while a prefill stopped). The whole context (8,192 tokens of R-intro)
    // is one chunk; quit half a second after it starts: it stops at its next 256-token step (it
    // ran to its end before: 44 s here), the part prefilled saved and recorded as Partial; the
    // time the window took to go is printed.
    QTemporaryDir tmp;
    const QString dir = tmp.filePath(QStringLiteral("library"));
    {
        sl::Library lib = sl::Library::open(dir.toStdString());
        sl::doc::Document d = pages_;
        d.units = all_pages_;
        sl::Library::FileInfo fi;
        fi.path = pdf_path_.string();
        lib.store_document(d, fi);
    }
    const QString ini = tmp.filePath(QStringLiteral("sightline.conf"));
    {
        AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setModelPath(QString::fromStdString(model_path_.string()));
        s.sync();
    }
    MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir;
    o.prefill = small_options();
    o.prefill.prefill.save_every = 8192;
    o.prefill.prefill.max_tokens = 8192;
    auto w = std::make_unique<MainWindow>(o);
    QVERIFY(w->prefill());
    // "Preparing" with the context's size known: its first (and only) chunk is running; progress
    // comes at chunk ends.
    QTRY_VERIFY_WITH_TIMEOUT(w->prefill()->progress().state == PrefillState::Preparing &&
                                 w->prefill()->progress().total > 0,
                             120000);
    QCOMPARE(w->prefill()->progress().done, qint64{0});
    QTest::qWait(500);  // half a second into a chunk of ~8,000 tokens (~30 s of work here)
    QCOMPARE(w->prefill()->progress().done, qint64{0});
    QElapsedTimer quit;
    quit.start();
    w->cancelWork();
    w.reset();
    const double quit_s = quit.nsecsElapsed() / 1e9;
    qInfo("quit half a second into an 8,192-token chunk: window gone in %.2f s", quit_s);
    // The chunk stopped at a 256-token step, what it had prefilled saved and recorded (a valid
    // prefix), far from its end.
    const std::vector<sl::KvCacheRecord> recs = records(dir);
    QCOMPARE(recs.size(), size_t{1});
    QCOMPARE(recs[0].state, sl::KvCacheState::Partial);
    QVERIFY2(recs[0].n_tokens > 0 && recs[0].n_tokens % 256 == 0 && recs[0].n_tokens < recs[0].total_tokens,
             qPrintable(QStringLiteral("%1 of %2").arg(recs[0].n_tokens).arg(recs[0].total_tokens)));
}

QTEST_MAIN(TstDesktopPrefill)
#include "tst_desktop_prefill.moc"
