// `sightline-cli report --format md|html|pdf -o FILE [--library DIR] [--last N | --all]`: writes
// the last chat (or the last N, or all) with its citations as Markdown, self-contained HTML (cited
// pages and frames embedded as thumbnails) or PDF, and records the report in the library.
// PDF needs a QGuiApplication (fonts); see report_pdf.h.
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <filesystem>
#include <map>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/answer/answer_json.h"
#include "app/common/citation_thumbnails.h"
#include "app/common/report.h"
#include "app/common/report_pdf.h"
#include "core/library/library.h"
#include "core/util/error.h"

namespace {

const char* kUsage = "usage: sightline-cli report --format md|html|pdf -o FILE [--library DIR] [--last N | --all]\n";

int usage() {
    sl::cli::err(kUsage);
    return 2;
}

int run(const QStringList& args) {
    std::string format, out;
    std::filesystem::path dir = sl::Library::default_dir();
    int last = 1;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        auto value = [&]() -> QString { return i + 1 < args.size() ? args[++i] : QString(); };
        if (a == QLatin1String("--format")) format = value().toStdString();
        else if (a == QLatin1String("-o") || a == QLatin1String("--output")) out = sl::arg_bytes(value());
        else if (a == QLatin1String("--library")) dir = sl::arg_bytes(value());
        else if (a == QLatin1String("--last")) last = value().toInt();
        else if (a == QLatin1String("--all")) last = 0;
        else return usage();
    }
    if (out.empty() || (format != "md" && format != "html" && format != "pdf") || last < 0) return usage();

    sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
    const auto chats = lib.list_chats();
    if (chats.empty()) throw sl::Error(lib.dir().string() + ": no chats to report (ask a question first)");
    const size_t first = last == 0 || static_cast<size_t>(last) >= chats.size() ? 0 : chats.size() - static_cast<size_t>(last);

    sl::app::Report report;
    report.library = lib.dir().string();
    std::vector<int64_t> ids;
    for (size_t i = first; i < chats.size(); ++i) {
        const auto& c = chats[i];
        sl::app::ReportChat rc;
        rc.question = c.question;
        rc.answer = sl::answer_from_json(c.citations, "chat " + std::to_string(c.id));
        // The stored settings (JSON) in words: "msa top-k 16, effort medium, 450 context tokens".
        const QJsonObject so = QJsonDocument::fromJson(QByteArray::fromStdString(c.settings)).object();
        rc.model = so.value(QStringLiteral("model")).toString().toStdString();
        rc.when = so.value(QStringLiteral("when")).toString().toStdString();
        std::string st = so.value(QStringLiteral("attention")).toString().toStdString();
        if (so.contains(QStringLiteral("top_k"))) st += " top-k " + std::to_string(so.value(QStringLiteral("top_k")).toInt());
        if (so.contains(QStringLiteral("effort"))) st += ", effort " + so.value(QStringLiteral("effort")).toString().toStdString();
        if (so.contains(QStringLiteral("context_tokens")))
            st += ", " + std::to_string(so.value(QStringLiteral("context_tokens")).toInteger()) + " context tokens";
        if (so.contains(QStringLiteral("read")))  // answered before the library prefill finished
            st += "; read " + so.value(QStringLiteral("read")).toString().toStdString();
        rc.settings = st;
        report.chats.push_back(std::move(rc));
        ids.push_back(c.id);
    }

    // Thumbnails: PDF pages are rendered from the files; frames and pictures come from the library.
    std::map<std::string, sl::doc::Document> docs;
    if (format != "md") {
        for (const auto& info : lib.list_documents()) {
            if (info.state != sl::DocumentState::Ready || info.kind == sl::doc::DocumentKind::Pdf) continue;
            for (const auto& rc : report.chats)
                for (const auto& cit : rc.answer.citations)
                    if (cit.ref.document == info.sha256 && !docs.count(info.sha256)) {
                        sl::LoadOptions lo;
                        lo.lines = false;
                        docs[info.sha256] = lib.load_document(info.id, lo);
                    }
        }
    }
    sl::app::CitationThumbnails thumbs;
    for (const auto& [id, d] : docs) thumbs.add_document(d);

    if (format == "md") sl::app::write_text_file(out, sl::app::report_markdown(report));
    else if (format == "html") sl::app::write_text_file(out, sl::app::report_html(report, thumbs.fn()));
    else sl::app::write_report_pdf(report, out, thumbs.fn());
    sl::ReportRecord rec;
    rec.path = std::filesystem::absolute(out).string();
    rec.format = format;
    rec.chats = ids;
    lib.add_report(rec);
    sl::cli::out("Report of " + std::to_string(report.chats.size()) + " chat(s) written to " + out + "\n");
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(report, "report", "write the last chat(s) with citations as Markdown, HTML or PDF", kUsage, run);
