// The main window comes up (offscreen) with its menus, the three panes, a status bar showing the
// model, device, context and effort; every button has an accessible name; the main actions have
// shortcuts; settings persist across windows; a chat that cannot answer says why (no model, no
// library store, no ready document).
#include <QAbstractButton>
#include <QComboBox>
#include <QFile>
#include <QLineEdit>
#include <QMenuBar>
#include <QStatusBar>
#include <QTest>
#include <QTextBrowser>

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
    void unansweredQuestionSaysWhy();
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
    QCOMPARE(s.kvCacheCap(), qint64{2} << 30);  // the saved contexts' cap: 2 GiB unless set
    s.setKvCacheCap(qint64{512} << 20);
    QCOMPARE(s.kvCacheCap(), qint64{512} << 20);
    s.setKvCacheCap(-1);
    QCOMPARE(s.kvCacheCap(), qint64{2} << 30);  // nonsense reads as the default
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

void TstMainWindow::unansweredQuestionSaysWhy() {
    const auto asked = [](sl::desktop::MainWindow& w) {
        w.chat()->ask(QStringLiteral("anything?"));
        const auto& answers = w.chat()->answers();
        if (answers.size() != 1 || !answers[0].finished || w.chat()->busy()) return std::string("(not answered at once)");
        if (!w.chat()->transcript()->toPlainText().contains(QStringLiteral("Could not answer: "))) return std::string("(not shown)");
        return answers[0].error;
    };
    {  // The settings' model file is missing.
        QTemporaryDir dir;
        auto w = sl::test::make_library_window(dir, {}, dir.filePath(QStringLiteral("missing.gguf")));
        const std::string why = asked(*w);
        QVERIFY2(why.find("no model is loaded") != std::string::npos, why.c_str());
    }
    // A model file exists (it is not loaded until a question is asked of a ready document).
    QTemporaryDir dir;
    const QString model = dir.filePath(QStringLiteral("model.gguf"));
    {
        QFile f(model);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a model");
    }
    {  // No library store: the app answers only from one.
        const QString ini = dir.filePath(QStringLiteral("nostore.conf"));
        {
            sl::desktop::AppSettings s(ini);
            s.setModelPath(model);
            s.sync();
        }
        sl::desktop::MainWindowOptions o;
        o.settings_file = ini;
        sl::desktop::MainWindow w(o);
        const std::string why = asked(w);
        QVERIFY2(why.find("answers need the library store") != std::string::npos, why.c_str());
    }
    {  // The library's service, and nothing ready in the library.
        auto w = sl::test::make_library_window(dir, {}, model);
        const std::string why = asked(*w);
        QVERIFY2(why.find("no document is ready") != std::string::npos, why.c_str());
    }
}

QTEST_MAIN(TstMainWindow)
#include "tst_main_window.moc"
