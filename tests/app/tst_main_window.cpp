// The main window comes up (offscreen) with its menus, the three panes, a status bar showing the
// model, device, context and effort; every button has an accessible name; the main actions have
// shortcuts; settings persist across windows.
#include <QAbstractButton>
#include <QComboBox>
#include <QLineEdit>
#include <QMenuBar>
#include <QStatusBar>
#include <QTest>

#include "app/desktop/chat_pane.h"
#include "app/desktop/library_pane.h"
#include "app/desktop/main_window.h"
#include "app/desktop/viewer_pane.h"
#include "tests/app/tst_desktop_support.h"

class TstMainWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void showsWithMenus();
    void threePanesAndStatusBar();
    void accessibleNamesAndShortcuts();
    void settingsPersist();
    void iconsLoad();
};

void TstMainWindow::showsWithMenus() {
    sl::desktop::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.windowTitle(), QStringLiteral("Sightline"));
    QStringList menus;
    for (QAction* a : w.menuBar()->actions()) menus << a->text();
    QVERIFY(menus.contains(QStringLiteral("&File")));
    QVERIFY(menus.contains(QStringLiteral("&Model")));
    QVERIFY(menus.contains(QStringLiteral("&Help")));
    QVERIFY(w.centralWidget());
    QVERIFY(!w.centralWidget()->accessibleName().isEmpty());
    QVERIFY(w.acceptDrops());
}

void TstMainWindow::threePanesAndStatusBar() {
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w.get()));
    QVERIFY(w->libraryPane()->isVisible());
    QVERIFY(w->viewer()->isVisible());
    QVERIFY(w->chat()->isVisible());
    QCOMPARE(w->viewer()->mode(), sl::desktop::ViewerPane::Mode::Empty);
    QVERIFY(w->statusModelText().startsWith(QStringLiteral("Model: ")));
    QVERIFY(w->statusModelText().contains(QStringLiteral("Device: CPU")));
    QVERIFY(w->statusContextText().startsWith(QStringLiteral("Context: 0 / ")));
    auto* effort = w->statusBar()->findChild<QComboBox*>();
    QVERIFY(effort);
    QCOMPARE(effort->currentData().toString(), QStringLiteral("medium"));
}

void TstMainWindow::accessibleNamesAndShortcuts() {
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    QStringList unnamed;
    for (QAbstractButton* b : w->findChildren<QAbstractButton*>())
        // Qt's own sub-buttons (menu bar extension, line edit clear button) are skipped.
        if (b->accessibleName().isEmpty() && b->text().isEmpty() && !b->objectName().startsWith(QLatin1String("qt_")) &&
            !qobject_cast<QLineEdit*>(b->parent()))
            unnamed << QString::fromLatin1(b->metaObject()->className()) + QLatin1Char(' ') + b->objectName() + QLatin1Char('/') +
                           QString::fromLatin1(b->parent()->metaObject()->className());
    QVERIFY2(unnamed.isEmpty(), qPrintable(unnamed.join(QStringLiteral(", "))));
    QStringList shortcuts;
    for (QAction* menu : w->menuBar()->actions())
        for (QAction* a : menu->menu()->actions())
            if (!a->shortcut().isEmpty()) shortcuts << a->shortcut().toString();
    for (const QString& want : {QStringLiteral("Ctrl+O"), QStringLiteral("Ctrl+E"), QStringLiteral("Ctrl+M"),
                                QStringLiteral("Ctrl+L"), QStringLiteral("Ctrl+Q")})
        QVERIFY2(shortcuts.contains(want), qPrintable(want + QStringLiteral(" missing from ") + shortcuts.join(QLatin1Char(' '))));
}

void TstMainWindow::settingsPersist() {
    QTemporaryDir dir;
    {
        auto w = sl::test::make_window(dir);
        auto* effort = w->statusBar()->findChild<QComboBox*>();
        effort->setCurrentIndex(effort->findData(QStringLiteral("high")));
        w->settings()->setModelPath(QStringLiteral("/models/other.gguf"));
        w->close();
    }
    sl::desktop::AppSettings s(dir.filePath(QStringLiteral("sightline.conf")));
    QCOMPARE(s.effort(), QStringLiteral("high"));
    QCOMPARE(s.modelPath(), QStringLiteral("/models/other.gguf"));
    QVERIFY(!s.windowGeometry().isEmpty());
    auto w2 = sl::test::make_window(dir);
    QCOMPARE(w2->statusBar()->findChild<QComboBox*>()->currentData().toString(), QStringLiteral("high"));
    QVERIFY(w2->statusModelText().contains(QStringLiteral("none")));  // that model file does not exist
}

void TstMainWindow::iconsLoad() {
    // SVG icons from resources/ render at any scale (high DPI).
    for (const char* name : {"sightline", "kind-pdf", "kind-slides", "kind-video", "kind-image", "state-ready",
                             "state-failed", "state-weak", "action-add", "action-export"}) {
        const QIcon icon(QStringLiteral(":/icons/%1.svg").arg(QLatin1String(name)));
        const QPixmap big = icon.pixmap(QSize(128, 128));
        QVERIFY2(!big.isNull() && big.width() == 128, name);
    }
}

QTEST_MAIN(TstMainWindow)
#include "tst_main_window.moc"
