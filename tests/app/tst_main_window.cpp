// The main window comes up (offscreen) with its menus and an accessible drop area.
#include <QMenuBar>
#include <QTest>

#include "app/desktop/main_window.h"

class TstMainWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void showsWithMenus();
};

void TstMainWindow::showsWithMenus() {
    sl::desktop::MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.windowTitle(), QStringLiteral("Sightline"));
    QStringList menus;
    for (QAction* a : w.menuBar()->actions()) menus << a->text();
    QVERIFY(menus.contains(QStringLiteral("&File")));
    QVERIFY(menus.contains(QStringLiteral("&Help")));
    QVERIFY(w.centralWidget());
    QVERIFY(!w.centralWidget()->accessibleName().isEmpty());
}

QTEST_MAIN(TstMainWindow)
#include "tst_main_window.moc"
