// sightline: the desktop app.
#include <QApplication>

#include "app/desktop/main_window.h"
#include "sightline/build_config.h"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Sightline"));
    QApplication::setOrganizationName(QStringLiteral("Sightline"));
    QApplication::setApplicationVersion(QStringLiteral(SIGHTLINE_VERSION));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/sightline.svg")));
    sl::desktop::MainWindow window;
    window.show();
    return QApplication::exec();
}
