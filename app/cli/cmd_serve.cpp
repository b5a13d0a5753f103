// `sightline-cli serve [--host ADDR] [--port N] [--library DIR] [--queue N] [--effort low|medium|high]
//  [--ctx N] [--no-semantic] [--no-keep-context] [--token-env VAR]`: Sightline as an OpenAI-compatible server over the library
// with the local engine (app/common/api_server.h, serve_backend.h). Prints "listening on
// http://ADDR:PORT/v1" when ready (--port 0: a free port, named there), one line per request on
// stderr, and runs until SIGINT / SIGTERM.
//
// Bound to 127.0.0.1 unless --host says otherwise. The bearer token comes from the environment
// variable --token-env names (default SIGHTLINE_SERVE_TOKEN): required for every request when set,
// and it must be set to bind to an address other than loopback.
//
// The library's prefilled context stays in memory between questions (the next question does not
// restore it from its file: core/ask/warm_context.h); --no-keep-context restores it for every
// question and frees its memory in between.
#include <QCoreApplication>
#include <QHostAddress>
#include <QStringList>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>

#include "app/cli/cli_command.h"
#include "app/common/api_server.h"
#include "app/common/byte_args.h"
#include "app/common/serve_backend.h"
#include "core/answer/minilm_embedder.h"
#include "core/embed/sentence_embedder.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace {

const char* kUsage =
    "usage: sightline-cli serve [--host ADDR] [--port N] [--library DIR] [--queue N] [--effort low|medium|high]\n"
    "       [--ctx N] [--no-semantic] [--no-keep-context] [--token-env VAR]\n"
    "  OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions (model \"sightline\": answers from the\n"
    "  library with citations; model <file name>: plain chat), POST /tokenize. Default 127.0.0.1:8080;\n"
    "  the bearer token is read from $SIGHTLINE_SERVE_TOKEN (or --token-env VAR) and needed off loopback.\n"
    "  The library's prefilled context stays in memory between questions; --no-keep-context restores it\n"
    "  from its file for each question instead (less memory held between questions, slower answers).\n";

int usage() {
    sl::cli::err(kUsage);
    return 2;
}

std::atomic<bool> g_stop{false};
void serve_on_signal(int) { g_stop = true; }

}  // namespace

namespace {

int run(const QStringList& args) {
    std::filesystem::path dir = sl::Library::default_dir();
    sl::app::ApiServerOptions so;
    sl::Effort effort = sl::Effort::Medium;
    bool semantic = true;
    bool keep_context = true;
    int n_ctx = 0;
    QByteArray token_env = "SIGHTLINE_SERVE_TOKEN";
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        auto value = [&]() -> QString { return i + 1 < args.size() ? args[++i] : QString(); };
        bool ok = true;
        if (a == QLatin1String("--library")) dir = sl::arg_bytes(value());
        else if (a == QLatin1String("--host")) {
            const QString h = value();
            so.host = h == QLatin1String("localhost") ? QHostAddress(QHostAddress::LocalHost) : QHostAddress(h);
            if (so.host.isNull()) {
                sl::cli::err("sightline-cli serve: --host: '" + h.toStdString() + "' is not an IP address\n");
                return usage();
            }
        } else if (a == QLatin1String("--port")) {
            const int p = value().toInt(&ok);
            if (!ok || p < 0 || p > 65535) return usage();
            so.port = static_cast<quint16>(p);
        } else if (a == QLatin1String("--queue")) {
            so.queue = value().toInt(&ok);
            if (!ok || so.queue < 0 || so.queue > 1024) return usage();
        } else if (a == QLatin1String("--effort")) effort = sl::parse_effort(value().toStdString());
        else if (a == QLatin1String("--no-semantic")) semantic = false;
        else if (a == QLatin1String("--no-keep-context")) keep_context = false;
        else if (a == QLatin1String("--ctx")) {
            n_ctx = value().toInt(&ok);
            if (!ok || n_ctx < 0) return usage();
        }
        else if (a == QLatin1String("--token-env")) token_env = value().toUtf8();
        else return usage();
    }
    so.token = qgetenv(token_env.constData());
    if (!so.host.isLoopback() && so.token.isEmpty()) {
        sl::cli::err("sightline-cli serve: binding to " + so.host.toString().toStdString() +
                     " (not loopback) needs a bearer token: set $" + token_env.toStdString() + "\n");
        return 2;
    }
    so.log = [](const std::string& line) { sl::cli::err("serve: " + line + "\n"); };

    sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
    const auto model = sl::load_model(sl::paths::default_model());
    sl::InstalledMiniLm minilm;
    if (semantic) {
        minilm = sl::InstalledMiniLm::open();
        if (!minilm.get() && std::filesystem::exists(sl::SentenceEmbedder::default_dir()))
            sl::cli::err("note: semantic ranking and verification off: " + minilm.note + "\n");
    }
    sl::app::LocalServeBackend backend(lib, *model, minilm.get(), effort, n_ctx, keep_context);
    sl::app::ApiServer server(backend, so);
    server.listen();
    std::signal(SIGINT, serve_on_signal);
    std::signal(SIGTERM, serve_on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, [] {
        if (g_stop) QCoreApplication::quit();
    });
    poll.start(100);
    const QString host = so.host.protocol() == QAbstractSocket::IPv6Protocol ? QLatin1Char('[') + so.host.toString() + QLatin1Char(']')
                                                                            : so.host.toString();
    sl::cli::out("listening on http://" + host.toStdString() + ":" + std::to_string(server.port()) + "/v1 (models: " +
                 sl::app::LocalServeBackend::kLibraryModel + ", " + backend.raw_id() + "; library " + lib.dir().string() +
                 "; queue " + std::to_string(so.queue) + (so.token.isEmpty() ? "" : "; bearer token required") + ")\n");
    const int rc = QCoreApplication::exec();
    sl::cli::out("serve: stopped\n");
    return rc;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(serve, "serve", "serve the library over an OpenAI-compatible HTTP API (loopback by default)", kUsage, run);
