// `sightline-cli add FILE|FOLDER... [--library DIR] [--no-ocr] [--no-transcribe]
//  [--frames-per-minute N] [--dpi N] [--force]`: ingests each file into the library (folders:
// every supported file below them), with a progress bar on stderr (plain lines when stderr is not a
// terminal) and one result line per file on stdout:
//   added R-intro.pdf: 113 pages (2.1 s: read 2.0 s, store 0.08 s)
//   unchanged R-intro.pdf
//   failed broken.pdf: the file is truncated
// A bad file does not stop the others; the exit status is 1 when any failed. Ctrl-C cancels the
// file being read, prints "cancelled NAME" and exits with 130; what was added before stays.
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/library/library.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"

namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: sightline-cli add FILE|FOLDER... [--library DIR] [--no-ocr] [--no-transcribe]\n"
    "                         [--frames-per-minute N] [--dpi N] [--force]\n";

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
}

// Files to add, in order: files as given, folders expanded to their supported files (by
// extension), sorted; each path once. Files of a folder that are left out go to `skipped` as
// "folder/name: why".
std::vector<std::string> expand(const QStringList& inputs, std::vector<std::string>* problems,
                                std::vector<std::string>* skipped) {
    std::set<std::string> exts;
    for (const auto& r : sl::ingest::readers())
        for (const auto& e : r->extensions()) exts.insert(e);
    std::vector<std::string> out;
    std::set<std::string> seen;
    auto push = [&](const fs::path& p) {
        const std::string s = fs::absolute(p).lexically_normal().string();
        if (seen.insert(s).second) out.push_back(s);
    };
    for (const QString& in : inputs) {
        const fs::path p(sl::arg_bytes(in));
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> found;
            for (fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
                 !ec && it != end; it.increment(ec)) {
                if (!it->is_regular_file(ec)) continue;
                std::string ext = lower(it->path().extension().string());
                if (!ext.empty() && exts.count(ext.substr(1))) {
                    found.push_back(it->path());
                    continue;
                }
                const std::string shown = (p.filename().empty() ? p.parent_path().filename() : p.filename()).string() +
                                          "/" + it->path().lexically_relative(p).string();
                skipped->push_back(shown + ": " +
                                   (ext.empty() ? std::string("no extension, not a format Sightline reads")
                                                : "not a format Sightline reads (" + ext + ")"));
            }
            if (ec) problems->push_back(p.string() + ": " + ec.message());
            std::sort(found.begin(), found.end());
            for (const auto& f : found) push(f);
        } else {
            push(p);  // missing or odd files fail in add_file with their own message
        }
    }
    return out;
}

const char* unit_noun(sl::doc::DocumentKind k, bool plural) {
    switch (k) {
        case sl::doc::DocumentKind::Pdf: return plural ? "pages" : "page";
        case sl::doc::DocumentKind::Slides: return plural ? "slides" : "slide";
        case sl::doc::DocumentKind::Image: return plural ? "images" : "image";
        case sl::doc::DocumentKind::Video:
        case sl::doc::DocumentKind::Audio: return plural ? "segments" : "segment";
        case sl::doc::DocumentKind::Text: return plural ? "sections" : "section";
    }
    return "units";
}

// A one-line progress display on stderr: a redrawn bar on a terminal, else a line per 10%.
class Progress {
public:
    explicit Progress(bool tty) : tty_(tty) {}
    void start(const std::string& name, size_t n, size_t total) {
        name_ = name;
        // (appends, not "literal" + std::string&&: GCC 12 warns falsely about that, -Wrestrict)
        prefix_.clear();
        if (total > 1) {
            prefix_ += '[';
            prefix_ += std::to_string(n);
            prefix_ += '/';
            prefix_ += std::to_string(total);
            prefix_ += "] ";
        }
        last_decile_ = -1;
        update(0, "hashing");
    }
    void update(double fraction, const std::string& what) {
        fraction = std::clamp(fraction, 0.0, 1.0);
        if (tty_) {
            constexpr int kWidth = 30;
            const int fill = static_cast<int>(fraction * kWidth + 0.5);
            std::string line = "\r" + prefix_ + name_ + " [" + std::string(static_cast<size_t>(fill), '#') +
                               std::string(static_cast<size_t>(kWidth - fill), '.') + "] ";
            char pct[16];
            std::snprintf(pct, sizeof pct, "%3d%% ", static_cast<int>(fraction * 100 + 0.5));
            line += pct + what;
            if (line.size() > 119) line.resize(119);
            line += std::string(line.size() < last_len_ ? last_len_ - line.size() : 0, ' ');
            last_len_ = line.size();
            sl::cli::err(line);
        } else {
            const int decile = static_cast<int>(fraction * 10);
            if (decile == last_decile_) return;
            last_decile_ = decile;
            sl::cli::err(prefix_ + name_ + ": " + std::to_string(decile * 10) + "% " + what + "\n");
        }
    }
    void clear() {
        if (tty_ && last_len_) {
            std::string blank(last_len_ + 2, ' ');
            blank.front() = '\r';
            blank.back() = '\r';
            sl::cli::err(blank);
        }
        last_len_ = 0;
    }

private:
    bool tty_;
    std::string name_, prefix_;
    int last_decile_ = -1;
    size_t last_len_ = 0;
};

// Ctrl-C cancels the file being read (the readers poll this flag per page, slide or packet) and
// stops; a second Ctrl-C kills at once. Either way the library stays consistent.
std::atomic<bool> g_cancel{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) {
    g_cancel.store(true);
    std::signal(SIGINT, SIG_DFL);
}

std::string options_json(const sl::ingest::IngestOptions& o) {
    QJsonObject j;
    j[QStringLiteral("ocr")] = o.ocr;
    j[QStringLiteral("transcribe")] = o.transcribe;
    j[QStringLiteral("frames_per_minute")] = o.max_frames_per_minute;
    j[QStringLiteral("render_dpi")] = o.render_dpi;
    j[QStringLiteral("thumbnail_px")] = o.thumbnail_px;
    return QJsonDocument(j).toJson(QJsonDocument::Compact).toStdString();
}

// "broken.pdf: cause" from an error that names the absolute path.
std::string short_message(const std::string& message, const std::string& path) {
    const std::string name = fs::path(path).filename().string();
    if (message.rfind(path, 0) == 0) return name + message.substr(path.size());
    return name + ": " + message;
}

int run(const QStringList& args) {
    sl::ingest::IngestOptions options;
    sl::AddOptions add;
    fs::path dir = sl::Library::default_dir();
    QStringList inputs;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        const bool has_value = i + 1 < args.size();
        if (a == QLatin1String("--")) {  // the rest are files, whatever they start with
            inputs << args.mid(i + 1);
            break;
        }
        if (a == QLatin1String("--library") && has_value) dir = sl::arg_bytes(args[++i]);
        else if (a == QLatin1String("--no-ocr")) options.ocr = false;
        else if (a == QLatin1String("--no-transcribe")) options.transcribe = false;
        else if (a == QLatin1String("--frames-per-minute") && has_value) options.max_frames_per_minute = args[++i].toDouble();
        else if (a == QLatin1String("--dpi") && has_value) options.render_dpi = args[++i].toInt();
        else if (a == QLatin1String("--force")) add.force = true;
        else if (a == QLatin1String("--batch") && has_value) add.batch_units = args[++i].toInt();  // testing
        else if (a.startsWith(QLatin1String("--"))) {
            sl::cli::err("sightline-cli add: unknown option " + a.toStdString() + "\n" + kUsage);
            return 2;
        } else inputs << a;
    }
    if (inputs.isEmpty()) {
        sl::cli::err(kUsage);
        return 2;
    }
    add.ingest_options = options_json(options);

    std::vector<std::string> problems, skipped;
    const std::vector<std::string> files = expand(inputs, &problems, &skipped);
    // What a folder held that is not read, on stderr (stdout stays one line per file added).
    constexpr size_t kShownSkips = 20;
    for (size_t i = 0; i < skipped.size() && i < kShownSkips; ++i) sl::cli::err("skipped " + skipped[i] + "\n");
    if (skipped.size() > kShownSkips)
        sl::cli::err("skipped " + std::to_string(skipped.size() - kShownSkips) + " more files of formats Sightline does not read\n");
    int failures = 0;
    for (const auto& p : problems) {
        sl::cli::out("failed " + p + "\n");
        ++failures;
    }
    sl::Library lib = sl::Library::open(dir);
    std::signal(SIGINT, on_interrupt);
    Progress progress(::isatty(STDERR_FILENO) == 1);
    for (size_t n = 0; n < files.size(); ++n) {
        const std::string& path = files[n];
        const std::string name = fs::path(path).filename().string();
        const auto t0 = std::chrono::steady_clock::now();
        progress.start(name, n + 1, files.size());
        auto read_done = t0;
        auto read = [&](const std::string& p) {
            sl::ingest::IngestContext ctx(
                options, [&](double f, const std::string& what) { progress.update(f, what); }, &g_cancel);
            sl::doc::Document d = sl::ingest::read_document(p, ctx);
            read_done = std::chrono::steady_clock::now();
            progress.update(1.0, "storing");
            return d;
        };
        const sl::AddResult r = sl::add_file(lib, path, read, add);
        progress.clear();
        const bool cancelled = g_cancel.load();
        if (cancelled && r.status == sl::AddStatus::Failed) {
            // Ctrl-C: the interrupted file is not a failure; drop its record and stop.
            if (r.id != 0) lib.remove_document(r.id);
            sl::cli::out("cancelled " + name + "\n");
            return 130;
        }
        const auto t1 = std::chrono::steady_clock::now();
        const double seconds = std::chrono::duration<double>(t1 - t0).count();
        const double store_s = std::chrono::duration<double>(t1 - read_done).count();
        std::string line = std::string(sl::to_string(r.status)) + " ";
        switch (r.status) {
            case sl::AddStatus::Added:
            case sl::AddStatus::Replaced: {
                char tail[96];
                std::snprintf(tail, sizeof tail, " (%.1f s: read %.1f s, store %.2f s)", seconds, seconds - store_s, store_s);
                line += name + ": " + std::to_string(r.info.unit_count) + " " +
                        unit_noun(r.info.kind, r.info.unit_count != 1) + tail;
                break;
            }
            case sl::AddStatus::Unchanged:
            case sl::AddStatus::Duplicate:
                line += name + (r.message.empty() ? "" : " (" + r.message + ")");
                break;
            case sl::AddStatus::Failed:
                line += short_message(r.message, path);
                ++failures;
                break;
        }
        sl::cli::out(line + "\n");
        for (const std::string& note : r.notes) sl::cli::out("  note: " + note + "\n");
        if (cancelled) return 130;  // Ctrl-C came after this file was stored: stop here
    }
    return failures ? 1 : 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(add, "add", "add files or folders to the library (ingest once, reuse after)", kUsage, run);
