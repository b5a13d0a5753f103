// Drag and drop of files whose names are not UTF-8 (a Latin-1 "café.pdf" from an old archive): the
// file URL carries the name's bytes; the window keeps them (byte escapes, as the command line
// does), reads the file, stores it under its real bytes, and a folder holding such a file adds it.
#include <QMimeData>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include <filesystem>
#include <fstream>

#include "app/common/byte_args.h"
#include "app/desktop/library_model.h"
#include "app/desktop/main_window.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

namespace {

// A drop of file URLs written as bytes (percent-encoded), as a file manager sends them.
bool drop_encoded(QWidget* target, const QList<QByteArray>& encoded_urls) {
    auto* mime = new QMimeData;
    QList<QUrl> urls;
    for (const auto& e : encoded_urls) urls << QUrl::fromEncoded(e);
    mime->setUrls(urls);
    const QPoint pos = target->rect().center();
    QDragEnterEvent enter(pos, Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(target, &enter);
    QDropEvent drop(QPointF(pos), Qt::CopyAction, mime, Qt::LeftButton, Qt::NoModifier);
    if (enter.isAccepted()) QApplication::sendEvent(target, &drop);
    delete mime;
    return enter.isAccepted() && drop.isAccepted();
}

void copy_to(const std::filesystem::path& from, const std::filesystem::path& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace

class TstDesktopByteNames : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void droppedLatin1NameIsRead() {
        REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
        QTemporaryDir dir;
        const std::string folder = dir.filePath(QStringLiteral("old")).toStdString();
        std::filesystem::create_directory(folder);
        const std::string name = folder + "/caf\xE9.pdf";  // Latin-1 é: not UTF-8
        copy_to(pdf, name);
        auto w = sl::test::make_window(dir);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        const QByteArray url = "file://" + QByteArray(name.data(), static_cast<qsizetype>(name.size())).toPercentEncoding("/");
        QVERIFY(drop_encoded(w.get(), {url}));
        QCOMPARE(w->library()->rowCount(), 1);
        const LibraryItem& it = w->library()->items().front();
        QCOMPARE(sl::arg_bytes(it.path), name);  // the real bytes, not U+FFFD
        QTRY_COMPARE_WITH_TIMEOUT(w->library()->items().front().state, ItemState::Ready, 60000);
        QVERIFY(w->library()->items().front().document);
        QCOMPARE(w->library()->items().front().document->path, name);
    }

    void droppedFolderWithLatin1NameAddsIt() {
        REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
        QTemporaryDir dir;
        const std::string folder = dir.filePath(QStringLiteral("docs")).toStdString();
        std::filesystem::create_directory(folder);
        copy_to(pdf, folder + "/r\xE9sum\xE9.pdf");
        copy_to(pdf, folder + "/plain.pdf");
        auto w = sl::test::make_window(dir);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        QVERIFY(drop_encoded(w.get(), {"file://" + QByteArray::fromStdString(folder).toPercentEncoding("/")}));
        QCOMPARE(w->library()->rowCount(), 2);
        bool found = false;
        for (const auto& it : w->library()->items()) found |= sl::arg_bytes(it.path) == folder + "/r\xE9sum\xE9.pdf";
        QVERIFY(found);
        QTRY_VERIFY_WITH_TIMEOUT(std::all_of(w->library()->items().begin(), w->library()->items().end(),
                                             [](const LibraryItem& i) { return i.state == ItemState::Ready; }),
                                 60000);
    }
};

QTEST_MAIN(TstDesktopByteNames)
#include "tst_desktop_byte_names.moc"
