// The library pane on real files: a drop ingests a PDF to "ready", a folder drop adds only the
// readable files inside and says what it skipped, a broken file and an unsupported one show the reader's reason, a
// running ingest can be cancelled and removed, and progress reaches the model while a big PDF
// is read (on a worker; the GUI thread keeps processing events).
#include <QApplication>
#include <QFile>
#include <QListView>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTest>

#include "app/desktop/ingest_queue.h"
#include "app/desktop/library_pane.h"
#include "app/desktop/viewer_pane.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopLibrary : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { sl::test::use_ffmpeg_media_backend(); }
    void dropIngestsPdfToReady();
    void dropFolderAddsReadableFiles();
    void brokenFileShowsReason();
    void unsupportedFileShowsReason();
    void cancelAndRemoveWhileIngesting();
};

void TstDesktopLibrary::dropIngestsPdfToReady() {
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w.get()));
    const QString path = QString::fromStdString(pdf.string());
    QSignalSpy states(w->library(), &LibraryModel::stateChanged);
    QVERIFY(sl::test::drop_files(w.get(), {path}));
    QCOMPARE(w->library()->rowCount(), 1);
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ready, 60000);
    // queued -> ingesting -> ready, in that order.
    QVERIFY(states.size() >= 3);
    QCOMPARE(states.at(0).at(1).value<ItemState>(), ItemState::Queued);
    QCOMPARE(states.at(1).at(1).value<ItemState>(), ItemState::Ingesting);
    QCOMPARE(states.last().at(1).value<ItemState>(), ItemState::Ready);
    const LibraryItem* it = sl::test::item_of(w->library(), path);
    QVERIFY(it && it->document);
    QCOMPARE(it->document->units.size(), size_t{1});
    QCOMPARE(it->kind, FileKind::Pdf);
    const QString status = w->library()->data(w->library()->index(0), LibraryModel::StatusTextRole).toString();
    QVERIFY2(status.startsWith(QStringLiteral("ready")) && status.contains(QStringLiteral("1 page")), qPrintable(status));
    QVERIFY(w->statusContextText().contains(QStringLiteral("Context:")));
    QVERIFY2(!w->statusContextText().startsWith(QStringLiteral("Context: 0 ")), qPrintable(w->statusContextText()));
    // Opening it from the library shows page 1.
    w->libraryPane()->view()->setCurrentIndex(w->library()->index(0));
    Q_EMIT w->libraryPane()->openRequested(it->id);
    QCOMPARE(w->viewer()->mode(), ViewerPane::Mode::Pdf);
}

void TstDesktopLibrary::dropFolderAddsReadableFiles() {
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("docs/sub")));
    const QString copy = dir.filePath(QStringLiteral("docs/sub/hello copy.pdf"));
    QVERIFY(QFile::copy(QString::fromStdString(pdf.string()), copy));
    QFile notes(dir.filePath(QStringLiteral("docs/notes.xyz")));
    QVERIFY(notes.open(QIODevice::WriteOnly));
    notes.write("not a document Sightline reads\n");
    notes.close();
    QFile readme(dir.filePath(QStringLiteral("docs/sub/README")));
    QVERIFY(readme.open(QIODevice::WriteOnly));
    readme.write("no extension\n");
    readme.close();
    auto w = sl::test::make_window(dir);
    QVERIFY(sl::test::drop_files(w.get(), {dir.filePath(QStringLiteral("docs"))}));
    QCOMPARE(w->library()->rowCount(), 1);  // the .xyz and README inside a folder are skipped
    // ... and said: each by its place in the dropped folder and why, the status bar naming them.
    QCOMPARE(w->lastSkipped(),
             QStringList({QStringLiteral("docs/notes.xyz: not a format Sightline reads (.xyz)"),
                          QStringLiteral("docs/sub/README: no extension, not a format Sightline reads")}));
    const QString msg = w->statusBar()->currentMessage();
    QVERIFY2(msg.contains(QStringLiteral("Skipped 2 files")) && msg.contains(QStringLiteral("docs/notes.xyz")) &&
                 msg.contains(QStringLiteral("docs/sub/README")),
             qPrintable(msg));
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), copy), ItemState::Ready, 60000);
    // A folder with nothing readable adds nothing and says what it skipped.
    QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("junk")));
    QVERIFY(QFile::copy(dir.filePath(QStringLiteral("docs/notes.xyz")), dir.filePath(QStringLiteral("junk/a.zip"))));
    w->addPaths({dir.filePath(QStringLiteral("junk"))});
    QCOMPARE(w->library()->rowCount(), 1);
    QCOMPARE(w->lastSkipped(), QStringList({QStringLiteral("junk/a.zip: not a format Sightline reads (.zip)")}));
}

void TstDesktopLibrary::brokenFileShowsReason() {
    QTemporaryDir dir;
    const QString broken = dir.filePath(QStringLiteral("broken.pdf"));
    QFile f(broken);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer garbage\n");
    f.close();
    auto w = sl::test::make_window(dir);
    QVERIFY(sl::test::drop_files(w.get(), {broken}));
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), broken), ItemState::Failed, 30000);
    const LibraryItem* it = sl::test::item_of(w->library(), broken);
    QVERIFY(it);
    qInfo("reason shown: %s", qPrintable(it->error));
    QVERIFY2(it->error.contains(QStringLiteral("broken.pdf")), qPrintable(it->error));  // names the file
    const QString status = w->library()->data(w->library()->index(0), LibraryModel::StatusTextRole).toString();
    QVERIFY(status.startsWith(QStringLiteral("failed: ")));
    QVERIFY(w->library()->data(w->library()->index(0), Qt::ToolTipRole).toString().contains(it->error));
    QVERIFY(w->library()->readyDocuments().empty());
}

void TstDesktopLibrary::unsupportedFileShowsReason() {
    QTemporaryDir dir;
    const QString txt = dir.filePath(QStringLiteral("notes.xyz"));
    QFile f(txt);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("plain text is not a format Sightline reads\n");
    f.close();
    auto w = sl::test::make_window(dir);
    QVERIFY(sl::test::drop_files(w.get(), {txt}));  // dropped directly: tried, and refused with a reason
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), txt), ItemState::Failed, 30000);
    const LibraryItem* it = sl::test::item_of(w->library(), txt);
    QVERIFY(it);
    qInfo("reason shown: %s", qPrintable(it->error));
    QVERIFY2(it->error.contains(QStringLiteral("notes.xyz")), qPrintable(it->error));
}

void TstDesktopLibrary::cancelAndRemoveWhileIngesting() {
    REQUIRE_ASSET(pdf, "samples/pdf/refman.pdf");
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    const QString path = QString::fromStdString(pdf.string());
    w->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ingesting, 30000);
    // Progress arrives on the GUI thread while the worker reads (throttled to ~10 Hz).
    QTRY_VERIFY_WITH_TIMEOUT(sl::test::progress_of(w->library(), path) > 0.0, 120000);
    const QString status = w->library()->data(w->library()->index(0), LibraryModel::StatusTextRole).toString();
    qInfo("while ingesting: %s", qPrintable(status));
    QVERIFY(status.startsWith(QStringLiteral("ingesting ")));
    w->libraryPane()->view()->setCurrentIndex(w->library()->index(0));
    w->libraryPane()->cancelSelected();
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Cancelled, 60000);
    QVERIFY(!w->ingestQueue()->busy());
    w->libraryPane()->view()->setCurrentIndex(w->library()->index(0));
    w->libraryPane()->removeSelected();
    QCOMPARE(w->library()->rowCount(), 0);
}

QTEST_MAIN(TstDesktopLibrary)
#include "tst_desktop_library.moc"
