// The app on the library store (sl::Library) and the library's answer pipeline (ask): a
// dropped file is stored and comes back, ready, in a new window on the same store; a re-added
// unchanged file is loaded back, not read again; removing it removes it from the store; and the
// chat answers through LibraryAnswerService (one context, MSA selections as citations, verified),
// the core's sl::Answer kept whole in the chat, its citations opening the viewer.
#include <QFile>
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>

#include "app/desktop/chat_pane.h"
#include "app/desktop/ingest_queue.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/library_pane.h"
#include "app/desktop/viewer_pane.h"
#include "core/library/library.h"
#include "core/util/assets.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

#include <QListView>

using namespace sl::desktop;

class TstDesktopStore : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { sl::test::use_ffmpeg_media_backend(); }
    void storedDocumentsComeBack();
    void answersFromLibraryContext();
    void orderSurvivesRestart();

private:
    std::unique_ptr<MainWindow> window(const QTemporaryDir& dir, std::shared_ptr<AskService> service = {});
};

std::unique_ptr<MainWindow> TstDesktopStore::window(const QTemporaryDir& dir, std::shared_ptr<AskService> service) {
    const QString ini = dir.filePath(QStringLiteral("sightline.conf"));
    {
        AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(false);
    }
    MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir.filePath(QStringLiteral("library"));
    o.service = std::move(service);
    o.background_prefill = false;  // its own tests: tst_desktop_prefill
    return std::make_unique<MainWindow>(o);
}

void TstDesktopStore::storedDocumentsComeBack() {
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    const QString path = QString::fromStdString(pdf.string());
    QTemporaryDir dir;
    {
        auto w = window(dir);
        QVERIFY(sl::test::drop_files(w.get(), {path}));
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ready, 60000);
    }
    sl::Library lib = sl::Library::open(dir.filePath(QStringLiteral("library")).toStdString());
    const auto docs = lib.list_documents();
    QCOMPARE(docs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(docs[0].path), path);

    auto w = window(dir);
    QSignalSpy loaded(w->ingestQueue(), &IngestQueue::loaded);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.size(), 1, 30000);
    QCOMPARE(w->library()->rowCount(), 1);
    QCOMPARE(sl::test::state_of(w->library(), path), ItemState::Ready);
    const auto d = sl::test::document_of(w->library(), path);
    QVERIFY(d);
    QCOMPARE(d->units.size(), size_t{1});
    // Removing it from the pane removes it from the store.
    w->libraryPane()->view()->setCurrentIndex(w->library()->index(0));
    w->libraryPane()->removeSelected();
    QCOMPARE(w->library()->rowCount(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(lib.list_documents().size(), size_t{0}, 30000);
}

void TstDesktopStore::answersFromLibraryContext() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    QTemporaryDir dir;
    // A 2,048-token context keeps the CPU prefill short; the planner preselects pages to fit.
    LibraryAnswerOptions lo;
    lo.n_ctx = 2048;
    auto service = std::make_shared<LibraryAnswerService>(dir.filePath(QStringLiteral("library")).toStdString(),
                                                          model.string(), lo);
    auto w = window(dir, service);
    const QString path = QString::fromStdString(pdf.string());
    w->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ready, 300000);
    QSignalSpy finished(w->chat(), &ChatPane::answerFinished);
    w->chat()->ask(QStringLiteral("How do I fit a linear regression model?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 900000);
    const ChatAnswer& chat = w->chat()->answers().back();
    const sl::Answer& a = chat.answer;
    qInfo("answer: %s", a.with_markers().c_str());
    qInfo("%s; %lld context tokens; stop: %s", chat.method.c_str(), static_cast<long long>(chat.context_tokens),
          a.stop_reason.c_str());
    QVERIFY2(chat.error.empty(), chat.error.c_str());
    QVERIFY(!a.text.empty());
    QVERIFY(chat.context_tokens > 500);
    QVERIFY(!a.sentences.empty());  // the core's sentences came through, not just its text
    QVERIFY(!a.stop_reason.empty());
    qInfo("%s", a.sources_text().c_str());
    QVERIFY2(!a.citations.empty(), "MSA selections gave no citation");
    for (size_t i = 0; i < a.citations.size(); ++i)
        QCOMPARE(a.citations[i].number, static_cast<int>(i) + 1);
    const sl::Citation& c = a.citations.front();
    QVERIFY(c.locator.rfind("R-intro.pdf p. ", 0) == 0);
    w->chat()->activateCitation(0, c.number);
    QCOMPARE(w->viewer()->mode(), ViewerPane::Mode::Pdf);
}

// The library reads in the order files were added, after a restart too (ready and stored failures
// alike; not sorted by name, failed ones not moved to the end).
void TstDesktopStore::orderSurvivesRestart() {
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    QTemporaryDir dir;
    const QString z = dir.filePath(QStringLiteral("zebra.pdf")), a = dir.filePath(QStringLiteral("aardvark-broken.pdf")),
                  m = dir.filePath(QStringLiteral("mongoose.pdf"));
    QVERIFY(QFile::copy(QString::fromStdString(pdf.string()), z));
    QVERIFY(QFile::copy(QString::fromStdString(pdf.string()), m));
    {
        QFile f(m);  // other bytes than zebra.pdf (the same bytes would be one document)
        QVERIFY(f.open(QIODevice::Append));
        f.write("\n% mongoose\n");
    }
    {
        QFile f(a);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("%PDF-1.4 truncated");
    }
    QStringList before;
    {
        auto w = window(dir);
        QVERIFY(sl::test::drop_files(w.get(), {z, a, m}));
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), m), ItemState::Ready, 60000);
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), a), ItemState::Failed, 60000);
        for (const auto& it : w->library()->items()) before << it.path;
    }
    QCOMPARE(before, (QStringList{z, a, m}));
    auto w = window(dir);
    QSignalSpy loaded(w->ingestQueue(), &IngestQueue::loaded);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.size(), 1, 30000);
    QStringList after;
    for (const auto& it : w->library()->items()) after << it.path;
    // Stored in the order added (by name "mongoose" would come before "zebra"); a file that failed
    // before anything was stored is not kept.
    QStringList stored = before;
    if (sl::test::state_of(w->library(), a) != ItemState::Failed) stored.removeAll(a);
    QCOMPARE(after, stored);
    QVERIFY(after.contains(z) && after.contains(m));
}

QTEST_MAIN(TstDesktopStore)
#include "tst_desktop_store.moc"
