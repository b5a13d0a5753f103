// sightline-cli: the headless front end. `sightline-cli help` lists the commands.
#include <QCoreApplication>
#include <QGuiApplication>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "app/common/version_report.h"
#include "core/util/error.h"
#include "sightline/build_config.h"

namespace {

int usage(int status) {
    std::string s = "usage: sightline-cli COMMAND [ARGS...]\n"
                    "       sightline-cli [--library DIR] [--model M] COMMAND [ARGS...]   (options before the command apply to it)\n"
                    "       sightline-cli COMMAND --help | help COMMAND\n"
                    "       sightline-cli --version\n\ncommands:\n";
    auto cmds = sl::cli::commands();
    std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return std::strcmp(a.name, b.name) < 0; });
    for (const auto& c : cmds) {
        std::string name = c.name;
        s += "  " + name + std::string(name.size() < 12 ? 12 - name.size() : 1, ' ') + c.summary + "\n";
    }
    (status == 0 ? sl::cli::out : sl::cli::err)(s);
    return status;
}

}  // namespace

int main(int argc, char** argv) {
    // Reports in PDF lay text out with fonts, which needs a QGuiApplication: `report` and
    // `quickstart` get one, headless (offscreen platform) unless QT_QPA_PLATFORM says otherwise.
    std::unique_ptr<QCoreApplication> app;
    if (argc > 1 && (std::strcmp(argv[1], "report") == 0 || std::strcmp(argv[1], "quickstart") == 0)) {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
        app = std::make_unique<QGuiApplication>(argc, argv);
    } else {
        app = std::make_unique<QCoreApplication>(argc, argv);
    }
    QCoreApplication::setApplicationName(QStringLiteral("sightline-cli"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SIGHTLINE_VERSION));
    // Arguments as bytes (decode_arg): a file name that is not UTF-8 still names its file.
    QStringList args = sl::decode_args(argc, argv);
    // Options before the command (`sightline-cli --library DIR add FILE`) go to the command, as
    // if written after it.
    QStringList global;
    while (!args.isEmpty() && args.front().startsWith(QLatin1String("--")) && args.front() != QLatin1String("--") &&
           args.front() != QLatin1String("--version") && args.front() != QLatin1String("--help")) {
        const QString opt = args.takeFirst();
        global << opt;
        static const QStringList kWithValue{QStringLiteral("--library"), QStringLiteral("--model"), QStringLiteral("--threads"),
                                            QStringLiteral("--ctx"), QStringLiteral("--effort"), QStringLiteral("--attention"),
                                            QStringLiteral("--kv-cap"), QStringLiteral("--mmproj")};
        if (kWithValue.contains(opt) && !args.isEmpty()) global << args.takeFirst();
    }
    if (args.isEmpty()) return usage(2);
    const QString first = args.takeFirst();
    if (first == QLatin1String("--version") || first == QLatin1String("version")) {
        sl::cli::out(sl::app::format_version_report(sl::app::version_report()));
        return 0;
    }
    const auto find = [](const QString& name) -> const sl::cli::Command* {
        for (const auto& c : sl::cli::commands())
            if (name == QLatin1String(c.name)) return &c;
        return nullptr;
    };
    if (first == QLatin1String("--help") || first == QLatin1String("-h") || first == QLatin1String("help")) {
        if (!args.isEmpty()) {  // help COMMAND
            if (const auto* c = find(args.front())) {
                sl::cli::out(c->usage);
                return 0;
            }
            sl::cli::err("sightline-cli: unknown command '" + args.front().toStdString() + "'\n");
            return usage(2);
        }
        return usage(0);
    }
    if (const auto* c = find(first)) {
        args = global + args;
        // --help / -h anywhere before a `--` prints the command's usage and succeeds.
        for (const QString& a : args) {
            if (a == QLatin1String("--")) break;
            if (a == QLatin1String("--help") || a == QLatin1String("-h")) {
                sl::cli::out(c->usage);
                return 0;
            }
        }
        try {
            return c->run(args);
        } catch (const sl::Error& e) {
            sl::cli::err(std::string("sightline-cli ") + c->name + ": " + e.what() + "\n");
            return 1;
        } catch (const std::exception& e) {
            sl::cli::err(std::string("sightline-cli ") + c->name + ": internal error: " + e.what() + "\n");
            return 1;
        }
    }
    sl::cli::err("sightline-cli: unknown command '" + first.toStdString() + "'\n");
    return usage(2);
}
