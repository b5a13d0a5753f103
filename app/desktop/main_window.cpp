#include "app/desktop/main_window.h"

#include <QApplication>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>

#include "app/common/version_report.h"

namespace sl::desktop {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle(QStringLiteral("Sightline"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/sightline.svg")));
    auto* placeholder = new QLabel(tr("Drop PDFs, slide decks, images and videos here."), this);
    placeholder->setAlignment(Qt::AlignCenter);
    placeholder->setAccessibleName(tr("Library drop area"));
    setCentralWidget(placeholder);
    createMenus();
    statusBar()->showMessage(tr("Ready"));
    resize(1200, 800);
}

void MainWindow::createMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* quit = file->addAction(tr("&Quit"));
    quit->setShortcut(QKeySequence::Quit);
    connect(quit, &QAction::triggered, qApp, &QApplication::quit);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* about = help->addAction(tr("&About Sightline"));
    connect(about, &QAction::triggered, this, &MainWindow::showAbout);
}

void MainWindow::showAbout() {
    const std::string text = app::format_version_report(app::version_report());
    QMessageBox box(this);
    box.setWindowTitle(tr("About Sightline"));
    box.setText(tr("Sightline reads your documents and videos locally and answers with citations."));
    box.setDetailedText(QString::fromStdString(text));
    box.exec();
}

}  // namespace sl::desktop
