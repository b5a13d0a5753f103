// `sightline-cli quickstart`: the README's main job. Today it shows what this build can do and
// checks the embedded default model and the sample inputs; later stages (ingest, ask, report)
// extend it as they land.
#include <QStringList>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/cli/cli_command.h"
#include "app/common/version_report.h"
#include "core/util/assets.h"
#include "core/util/paths.h"
#include "core/util/sha256.h"

namespace {

namespace fs = std::filesystem;

std::string mib(uintmax_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return buf;
}

// Checks one pinned asset; prints a line; returns whether it is present and intact.
bool check_asset(const sl::assets::Asset& a, bool hash) {
    const fs::path p = sl::assets::path_of(a.relative_path);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) {
        sl::cli::err("  MISSING  " + p.string() + " (run " + sl::paths::setup_command() + ")\n");
        return false;
    }
    if (hash && sl::sha256_file_hex(p) != a.sha256) {
        sl::cli::err("  BAD HASH " + p.string() + " (expected " + a.sha256 + "; run " +
                     sl::paths::setup_command() + ")\n");
        return false;
    }
    sl::cli::out("  ok       " + a.relative_path + "  " + mib(size) + (hash ? "  sha256 ok" : "") + "\n");
    return true;
}

int run(const QStringList& args) {
    const bool verify_all = args.contains(QLatin1String("--verify"));
    sl::cli::out(sl::app::format_version_report(sl::app::version_report()));

    sl::cli::out("\nDefault model\n");
    const fs::path model = sl::paths::default_model();
    bool ok = true;
    for (const auto& a : sl::assets::all()) {
        if (a.relative_path != sl::assets::kDefaultModel) continue;
        ok = check_asset(a, true) && ok;
    }
    if (ok) {
        char magic[4] = {};
        std::ifstream(model, std::ios::binary).read(magic, 4);
        if (std::memcmp(magic, "GGUF", 4) != 0) {
            sl::cli::err("  " + model.string() + ": not a GGUF file (bad magic)\n");
            ok = false;
        } else {
            sl::cli::out("  " + model.string() + ": GGUF\n");
        }
    }

    sl::cli::out("\nSample inputs" + std::string(verify_all ? " (sha256 checked)" : "") + "\n");
    int present = 0, total = 0;
    for (const auto& a : sl::assets::all()) {
        if (a.relative_path.rfind("samples/", 0) != 0) continue;
        ++total;
        if (check_asset(a, verify_all)) ++present;
    }
    sl::cli::out("  " + std::to_string(present) + " of " + std::to_string(total) + " present in " +
                 sl::paths::samples_dir().string() + "\n");
    return ok && present == total ? 0 : 1;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(quickstart, "quickstart", "the main job on the bundled samples (README quick start)", run);
