// sightline: the desktop app. `sightline [FILE|FOLDER]...` opens the window and adds them;
// `sightline --help` / `--version` answer on stdout without starting the GUI (no display needed);
// an unknown option is refused (exit 2) rather than added as a file (command_line.h). Quitting
// cancels the background work and waits for it at most a few seconds (exit_watchdog.h).
#include <QApplication>
#include <QFile>
#include <QStringList>

#include <cstdio>
#include <memory>
#include <string>

#include "app/common/version_report.h"
#include "app/desktop/command_line.h"
#include "app/desktop/exit_watchdog.h"
#include "app/desktop/main_window.h"
#include "core/library/library.h"
#include "sightline/build_config.h"

int main(int argc, char** argv) {
    const sl::desktop::CommandLine cl = sl::desktop::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    switch (cl.action) {
        case sl::desktop::CommandLine::Action::Help:
            std::fputs(sl::desktop::command_line_usage().c_str(), stdout);
            return 0;
        case sl::desktop::CommandLine::Action::Version:
            std::fputs(sl::app::format_version_report(sl::app::version_report()).c_str(), stdout);
            return 0;
        case sl::desktop::CommandLine::Action::Error:
            std::fprintf(stderr, "%s\n", cl.message.c_str());
            return 2;
        case sl::desktop::CommandLine::Action::Run: break;
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
    auto window = std::make_unique<sl::desktop::MainWindow>(options);
    window->show();
    QStringList paths;
    for (const std::string& p : cl.paths) paths << QFile::decodeName(QByteArray::fromStdString(p));
    if (!paths.isEmpty()) window->addPaths(paths);
    const int rc = QApplication::exec();
    // Ctrl+Q or the last window closed: stop the prefill, the answer and the ingest now, and give
    // them a short while to finish their step before the process goes without them.
    window->cancelWork();
    const sl::desktop::ExitWatchdog watchdog(std::chrono::seconds(3), rc);
    window.reset();
    return rc;
}
