// sightline: the desktop app. `sightline [FILE|FOLDER]...` opens the window and adds them.
#include <QApplication>
#include <QStringList>

#include "app/desktop/main_window.h"
#include "core/library/library.h"
#include "sightline/build_config.h"

int main(int argc, char** argv) {
    // Qt 6.4's GStreamer backend needs plugins Debian leaves optional; the FFmpeg backend reads
    // every format the ingest readers do. An explicit choice in the environment wins.
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND")) qputenv("QT_MEDIA_BACKEND", "ffmpeg");
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("Sightline"));
    QApplication::setOrganizationName(QStringLiteral("Sightline"));
    QApplication::setApplicationVersion(QStringLiteral(SIGHTLINE_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("sightline"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/sightline.svg")));
    sl::desktop::MainWindowOptions options;
    try {
        options.library_dir = QString::fromStdString(sl::Library::default_dir().string());
    } catch (const std::exception&) {
        // No home folder: run without a store (nothing persists between runs).
    }
    sl::desktop::MainWindow window(options);
    window.show();
    const QStringList args = QApplication::arguments().mid(1);
    if (!args.isEmpty()) window.addPaths(args);
    return QApplication::exec();
}
