// `sightline-cli quickstart [--question TEXT] [--library DIR] [--report FILE.md] [--ctx N]
// [--effort low|medium|high] [--device auto|cpu|cuda] [--verify]`: the README's main job. It shows what this build links,
// checks the default model and the sample inputs, adds the samples (a PDF manual, a PowerPoint deck,
// a video) to a library, asks the default model a question over them in one long context with MSA
// attention, prints the answer with citations to pages, slides and times (from the engine's own
// block selections, verified), and writes the report as Markdown, HTML and PDF.
//
// It is the composition of `add`, `ask` and `report` (each runs as its own command would), so the
// main job exercises exactly what users run. A second run reuses the library and the saved context.
#include <QStringList>

#include <cstring>
#include <filesystem>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "app/common/version_report.h"
#include "core/model/model_loader.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/sha256.h"

namespace {

const char* kUsage = "usage: sightline-cli quickstart [--question TEXT] [--library DIR] [--report FILE.md] "
                     "[--ctx N] [--effort low|medium|high] [--device auto|cpu|cuda] [--verify]\n";

namespace fs = std::filesystem;

const char* kDefaultQuestion = "How do I fit a linear regression model and look at its coefficients?";

// The sample files the main job reads (relative to the cache).
const char* kSamples[] = {"samples/pdf/R-intro.pdf", "samples/pptx/pandoc-reference.pptx", "samples/video/vtest.avi"};

std::string mib(uintmax_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

bool check_asset(const sl::assets::Asset& a, bool hash) {
    const fs::path p = sl::assets::path_of(a.relative_path);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) {
        sl::cli::err("  MISSING  " + p.string() + " (run " + sl::paths::setup_command() + ")\n");
        return false;
    }
    if (hash && sl::sha256_file_hex(p) != a.sha256) {
        sl::cli::err("  BAD HASH " + p.string() + " (expected " + a.sha256 + "; run " + sl::paths::setup_command() + ")\n");
        return false;
    }
    sl::cli::out("  ok       " + a.relative_path + "  " + mib(size) + (hash ? "  sha256 ok" : "") + "\n");
    return true;
}

// Runs another registered command with `args`, as `sightline-cli NAME args...` would.
int run_command(const char* name, const QStringList& args) {
    for (const auto& c : sl::cli::commands())
        if (std::strcmp(c.name, name) == 0) return c.run(args);
    throw sl::Error(std::string("no command '") + name + "' in this build");
}

int run(const QStringList& args) {
    bool verify_all = false;
    std::string question = kDefaultQuestion;
    fs::path report = fs::current_path() / "sightline-report.md";
    fs::path library = fs::current_path() / "sightline-quickstart-library";
    QString ctx = QStringLiteral("4096"), effort = QStringLiteral("low"), device = QStringLiteral("auto");
    for (int i = 0; i < args.size(); ++i) {
        const bool has_value = i + 1 < args.size();
        if (args[i] == QLatin1String("--verify")) verify_all = true;
        else if (args[i] == QLatin1String("--question") && has_value) question = args[++i].toStdString();
        else if (args[i] == QLatin1String("--report") && has_value) report = sl::arg_bytes(args[++i]);
        else if (args[i] == QLatin1String("--library") && has_value) library = sl::arg_bytes(args[++i]);
        else if (args[i] == QLatin1String("--ctx") && has_value) ctx = args[++i];
        else if (args[i] == QLatin1String("--effort") && has_value) effort = args[++i];
        else if (args[i] == QLatin1String("--device") && has_value && sl::cli::valid_device(args[i + 1].toStdString()))
            device = args[++i];
        else {
            sl::cli::err(kUsage);
            return 2;
        }
    }
    sl::cli::out(sl::app::format_version_report(sl::app::version_report()));

    sl::cli::out("\nDefault model and sample inputs" + std::string(verify_all ? " (sha256 checked)" : "") + "\n");
    bool ok = true;
    for (const auto& a : sl::assets::all()) ok = check_asset(a, verify_all || a.relative_path == sl::assets::kDefaultModel) && ok;
    if (!ok) return 1;
    {
        const auto model = sl::load_model(sl::paths::default_model());
        const auto& c = model->model->config();
        sl::cli::out("  model: " + c.arch + ", " + std::to_string(c.n_layer) + " layers, d_model " +
                     std::to_string(c.d_model) + ", " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) +
                     " heads, vocab " + std::to_string(c.n_vocab) + ", trained context " +
                     std::to_string(c.n_ctx_train) + "\n");
    }

    const QString lib = QString::fromStdString(library.string());
    sl::cli::out("\n== sightline-cli add --library " + library.string() + " (the samples)\n");
    QStringList add_args{QStringLiteral("--library"), lib, QStringLiteral("--frames-per-minute"), QStringLiteral("6")};
    for (const char* rel : kSamples) add_args << QString::fromStdString(sl::assets::path_of(rel).string());
    const int added = run_command("add", add_args);

    sl::cli::out("\n== sightline-cli ask (one long context, MSA attention, citations from its selections)\n");
    const int asked = run_command("ask", {QString::fromStdString(question), QStringLiteral("--library"), lib,
                                          QStringLiteral("--ctx"), ctx, QStringLiteral("--effort"), effort,
                                          QStringLiteral("--device"), device});
    if (asked != 0) return asked;

    sl::cli::out("\n== sightline-cli report (Markdown, HTML, PDF)\n");
    fs::create_directories(report.parent_path().empty() ? fs::path(".") : report.parent_path());
    int reported = 0;
    for (const char* format : {"md", "html", "pdf"}) {
        fs::path out = report;
        if (std::strcmp(format, "md") != 0) out.replace_extension(format);
        reported |= run_command("report", {QStringLiteral("--format"), QLatin1String(format), QStringLiteral("-o"),
                                           QString::fromStdString(out.string()), QStringLiteral("--library"), lib});
    }
    return added != 0 || reported != 0 ? 1 : 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(quickstart, "quickstart", "the main job on the bundled samples (README quick start)", kUsage, run);
