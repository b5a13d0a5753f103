// The library pane's actions beyond add and remove: a failed file retried (after the user fixed
// it) becomes ready; the context menu offers what fits the item; and the drop zone shows while
// files are dragged over the window and goes when they leave or are dropped.
#include <QFile>
#include <QLabel>
#include <QListView>
#include <QMenu>
#include <QMimeData>
#include <QTemporaryDir>
#include <QTest>
#include <QToolButton>

#include <filesystem>

#include "app/desktop/library_model.h"
#include "app/desktop/library_pane.h"
#include "app/desktop/main_window.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopLibraryActions : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void retryAfterFix() {
        REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("report.pdf"));
        {
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("%PDF-1.4 truncated");
        }
        auto w = sl::test::make_window(dir);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        QVERIFY(sl::test::drop_files(w.get(), {path}));
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Failed, 60000);
        LibraryPane* pane = w->libraryPane();
        pane->view()->setCurrentIndex(w->library()->index(0));
        QToolButton* retry_button = nullptr;
        for (auto* b : pane->findChildren<QToolButton*>())
            if (b->text() == QStringLiteral("Retry")) retry_button = b;
        QVERIFY(retry_button);
        QTRY_VERIFY(retry_button->isEnabled());

        // The context menu of a failed item: Retry and Why It Failed enabled, Open not.
        const QRect r = pane->view()->visualRect(w->library()->index(0));
        Q_EMIT pane->view()->customContextMenuRequested(r.center());
        QMenu* menu = nullptr;
        QTRY_VERIFY((menu = pane->findChild<QMenu*>()) != nullptr);
        QStringList enabled;
        for (QAction* a : menu->actions())
            if (a->isEnabled() && !a->isSeparator()) enabled << a->text().remove(QLatin1Char('&'));
        QVERIFY2(enabled.contains(QStringLiteral("Retry")) && enabled.contains(QStringLiteral("Why It Failed…")) &&
                     !enabled.contains(QStringLiteral("Open")),
                 qPrintable(enabled.join(QStringLiteral(", "))));
        menu->close();

        // The user fixes the file; Retry reads it again.
        QVERIFY(QFile::remove(path));
        QVERIFY(QFile::copy(QString::fromStdString(pdf.string()), path));
        pane->retrySelected();
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ready, 60000);
        QCOMPARE(w->library()->rowCount(), 1);
        QVERIFY(!retry_button->isEnabled());
    }

    void dropZoneShowsWhileDragging() {
        REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
        QTemporaryDir dir;
        auto w = sl::test::make_window(dir);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(pdf.string()))});
        const QPoint pos = w->rect().center();
        QDragEnterEvent enter(pos, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w.get(), &enter);
        QVERIFY(enter.isAccepted());
        auto* zone = w->findChild<QLabel*>(QStringLiteral("dropZone"));
        QVERIFY(zone && zone->isVisible());
        QVERIFY2(zone->text().contains(QStringLiteral("1 item")), qPrintable(zone->text()));
        QDragLeaveEvent leave;
        QApplication::sendEvent(w.get(), &leave);
        QVERIFY(!zone->isVisible());
        // Text without files is not accepted and shows nothing.
        QMimeData text;
        text.setText(QStringLiteral("hello"));
        QDragEnterEvent other(pos, Qt::CopyAction, &text, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(w.get(), &other);
        QVERIFY(!other.isAccepted());
        QVERIFY(!zone->isVisible());
        // A drop hides it.
        QVERIFY(sl::test::drop_files(w.get(), {QString::fromStdString(pdf.string())}));
        QVERIFY(!zone->isVisible());
    }
};

QTEST_MAIN(TstDesktopLibraryActions)
#include "tst_desktop_library_actions.moc"
