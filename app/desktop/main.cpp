// sightline: the desktop app. `sightline [FILE|FOLDER]...` opens the window and adds them;
// `sightline --help` / `--version` answer on stdout without starting the GUI (no display needed).
#include <QApplication>
#include <QStringList>

#include <cstdio>
#include <cstring>
#include <string>

#include "app/common/version_report.h"
#include "app/desktop/main_window.h"
#include "core/library/library.h"
#include "sightline/build_config.h"

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0) break;
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs("usage: sightline [FILE|FOLDER]...   open the window and add them to the library\n"
                       "       sightline --version          versions of the app and the libraries it links\n"
                       "The command line: sightline-cli --help\n", stdout);
            return 0;
        }
        if (std::strcmp(argv[i], "--version") == 0) {
            const std::string v = sl::app::format_version_report(sl::app::version_report());
            std::fputs(v.c_str(), stdout);
            return 0;
        }
    }
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
    QStringList args = QApplication::arguments().mid(1);
    args.removeOne(QStringLiteral("--"));
    if (!args.isEmpty()) window.addPaths(args);
    return QApplication::exec();
}
