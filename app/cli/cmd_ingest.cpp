// `sightline-cli ingest FILE... [--json] [--lines] [--no-ocr] [--frames-per-minute N] [--dpi N]`:
// reads each file into a Document and prints a summary per file, or the whole Document as JSON.
// A failed file prints its error and makes the exit status non-zero; the other files still run.
#include <QElapsedTimer>
#include <QStringList>

#include <cstdio>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "ingest/document_json.h"
#include "ingest/ingest_error.h"
#include "ingest/reader.h"

namespace {

const char* kUsage = "usage: sightline-cli ingest FILE... [--json] [--lines] [--no-ocr] [--no-transcribe] "
                     "[--frames-per-minute N] [--dpi N]\n";

std::string summary(const sl::doc::Document& d, double seconds) {
    size_t frames = 0;
    double transcript_s = 0;
    for (const auto& u : d.units) {
        for (const auto& v : u.visuals)
            if (v.kind == sl::doc::VisualKind::Frame) ++frames;
        for (const auto& b : u.blocks)
            if (b.role == sl::doc::BlockRole::Transcript && b.time) transcript_s += b.time->t1 - b.time->t0;
    }
    const auto it = d.metadata.find("transcript");
    const std::string engine = it != d.metadata.end() && transcript_s > 0 ? " (" + it->second + ")" : std::string();
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "%s: %s, %zu %s%s, %zu blocks, %zu characters, %zu visuals (%zu frames), "
                  "%.1f s transcript%s, %.2f s\n",
                  d.path.c_str(), sl::doc::to_string(d.kind), d.units.size(),
                  d.units.empty() ? "units" : sl::doc::to_string(d.units.front().kind),
                  d.units.size() == 1 ? "" : "s", d.block_count(), d.text_chars(), d.visual_count(), frames,
                  transcript_s, engine.c_str(), seconds);
    return buf;
}

int run(const QStringList& args) {
    sl::ingest::IngestOptions options;
    bool json = false, lines = false;
    QStringList files;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (a == QLatin1String("--")) {  // the rest are files, whatever they start with
            files << args.mid(i + 1);
            break;
        }
        if (a == QLatin1String("--json")) json = true;
        else if (a == QLatin1String("--lines")) lines = true;
        else if (a == QLatin1String("--no-ocr")) options.ocr = false;
        else if (a == QLatin1String("--no-transcribe")) options.transcribe = false;
        else if (a == QLatin1String("--frames-per-minute") && i + 1 < args.size()) options.max_frames_per_minute = args[++i].toDouble();
        else if (a == QLatin1String("--dpi") && i + 1 < args.size()) options.render_dpi = args[++i].toInt();
        else if (a.startsWith(QLatin1String("--"))) {
            sl::cli::err("sightline-cli ingest: unknown option " + a.toStdString() + "\n");
            return 2;
        } else files << a;
    }
    if (files.isEmpty()) {
        sl::cli::err(kUsage);
        return 2;
    }
    int failures = 0;
    for (const QString& f : files) {
        const std::string path = sl::arg_bytes(f);
        QElapsedTimer timer;
        timer.start();
        try {
            sl::ingest::IngestContext ctx(options);
            const sl::doc::Document d = sl::ingest::read_document(path, ctx);
            if (json) sl::cli::out(sl::ingest::to_json_bytes(d, lines).toStdString());
            else {
                sl::cli::out(summary(d, static_cast<double>(timer.nsecsElapsed()) * 1e-9));
                for (const std::string& note : d.notes()) sl::cli::out("  note: " + note + "\n");
            }
        } catch (const sl::Error& e) {
            sl::cli::err(std::string("error: ") + e.what() + "\n");
            ++failures;
        }
    }
    return failures ? 1 : 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(ingest, "ingest", "read files into documents: summary or --json", kUsage, run);
