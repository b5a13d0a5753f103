// `sightline-cli library list|remove|check|path [--library DIR]`:
//   list              one line per document: id, state (ready, failed, ingesting while an add runs),
//                     kind, units, size, path (and the error of failed ones); an interrupted add's
//                     leftovers are removed first
//   remove ID|PATH... removes documents and everything derived from them
//   check             integrity, foreign keys, schema (tables and columns); each problem on a
//                     line, exit 1 when any; writes nothing and opens a library others refuse
// Every subcommand but `path` needs a library there (a mistyped --library is an error, not a new
// empty library); a read-only one is listed and checked, not changed.
//   path              prints the library folder
#include <QStringList>

#include <cstdio>
#include <filesystem>
#include <string>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/library/library.h"

namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: sightline-cli library list [--all] [--library DIR]\n"
    "       sightline-cli library remove ID|PATH... [--library DIR]\n"
    "       sightline-cli library check [--library DIR]\n"
    "       sightline-cli library path [--library DIR]\n";

std::string human_size(int64_t bytes) {
    char buf[32];
    if (bytes >= (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
    else if (bytes >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    else if (bytes >= (1 << 10)) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / (1 << 10));
    else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
    return buf;
}

// Every document, those being added by a running `add` (state ingesting) included; the leftovers
// of an add that was killed or hit a full disk are removed first (when the library is writable).
int list(sl::Library& lib, bool /*all: accepted for compatibility, every document is listed*/) {
    if (!lib.read_only()) {
        if (const int gone = lib.remove_abandoned(); gone > 0)
            sl::cli::err("removed " + std::to_string(gone) + " unfinished document" + (gone == 1 ? "" : "s") +
                         " (an add that was interrupted); add " + (gone == 1 ? "it" : "them") + " again\n");
    }
    const auto docs = lib.list_documents(true);
    for (const auto& d : docs) {
        char head[96];
        std::snprintf(head, sizeof head, "%6lld  %-9s  %-6s  %5d  %9s  ", static_cast<long long>(d.id),
                      sl::to_string(d.state), sl::doc::to_string(d.kind), d.unit_count, human_size(d.size_bytes).c_str());
        std::string line = head + d.path;
        if (d.state == sl::DocumentState::Failed) line += "  (" + d.error + ")";
        sl::cli::out(line + "\n");
    }
    sl::cli::out(std::to_string(docs.size()) + " document" + (docs.size() == 1 ? "" : "s") + " in " +
                 lib.dir().string() + "\n");
    return 0;
}

int remove(sl::Library& lib, const QStringList& targets) {
    int failures = 0;
    for (const QString& t : targets) {
        bool is_id = false;
        const qlonglong id = t.toLongLong(&is_id);
        std::optional<sl::DocumentInfo> info;
        if (is_id) info = lib.info(id);
        else info = lib.find_any_by_path(fs::absolute(fs::path(sl::arg_bytes(t))).lexically_normal().string());
        if (!info) {
            sl::cli::err("sightline-cli library remove: no document " + sl::arg_bytes(t) + " in " + lib.dir().string() + "\n");
            ++failures;
            continue;
        }
        lib.remove_document(info->id);
        sl::cli::out("removed " + info->path + "\n");
    }
    return failures ? 1 : 0;
}

int run(const QStringList& args_in) {
    QStringList args;
    fs::path dir = sl::Library::default_dir();
    bool all = false;
    for (int i = 0; i < args_in.size(); ++i) {
        if (args_in[i] == QLatin1String("--")) {  // the rest are ids or paths, whatever they start with
            args << args_in.mid(i + 1);
            break;
        }
        if (args_in[i] == QLatin1String("--library") && i + 1 < args_in.size()) dir = sl::arg_bytes(args_in[++i]);
        else if (args_in[i] == QLatin1String("--all")) all = true;
        else args << args_in[i];
    }
    if (args.isEmpty()) {
        sl::cli::err(kUsage);
        return 2;
    }
    const QString sub = args.takeFirst();
    if (sub == QLatin1String("path")) {
        sl::cli::out(dir.string() + "\n");
        return 0;
    }
    if (sub == QLatin1String("check") && args.isEmpty()) {
        // Inspect: opens what `open` would refuse, writes nothing.
        sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Inspect);
        const std::vector<std::string> problems = lib.check();
        std::string version;
        try {
            version = std::to_string(lib.schema_version());
        } catch (const sl::Error&) {
            version = "unreadable";
        }
        sl::cli::out(lib.database_path().string() + ": schema version " + version + ", " +
                     (problems.empty() ? std::string("ok") : std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s")) + "\n");
        for (const auto& p : problems) sl::cli::out("  " + p + "\n");
        return problems.empty() ? 0 : 1;
    }
    sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
    if (lib.read_only()) sl::cli::err("note: " + lib.dir().string() + " is read-only: it can be listed and asked, not changed\n");
    if (sub == QLatin1String("list") && args.isEmpty()) return list(lib, all);
    if (sub == QLatin1String("remove") && !args.isEmpty()) return remove(lib, args);
    sl::cli::err(kUsage);
    return 2;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(library, "library", "list or remove the library's documents; check the store", kUsage, run);
