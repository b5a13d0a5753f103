// File → Export: the chat's answers with their citations as Markdown, self-contained HTML (the
// cited PDF pages and video frames embedded as small images with the region marked) or PDF
// (the same HTML laid out by QTextDocument into QPdfWriter). Every citation keeps its locator.
//
// Threading: write_report() is reentrant and touches no widgets; the app runs it on a worker.
#pragma once

#include <QString>

#include <memory>
#include <vector>

#include "app/desktop/chat_answer.h"
#include "core/document/document.h"

namespace sl::desktop {

enum class ReportFormat { Markdown, Html, Pdf };

// By the file's extension: .md/.markdown, .html/.htm, .pdf; Markdown otherwise.
ReportFormat report_format_for(const QString& path);

struct ReportInput {
    QString title = QStringLiteral("Sightline report");
    std::vector<ChatAnswer> answers;
    std::vector<std::shared_ptr<const doc::Document>> documents;  // to draw cited pages and frames
    bool thumbnails = true;                                       // HTML/PDF: embed cited places
};

// Writes the report; throws sl::IoError naming the file when it cannot be written.
void write_report(const QString& path, ReportFormat format, const ReportInput& input);

// How the HTML is meant to be shown: in a browser (figures, 420 px pictures) or laid out by
// QTextDocument for the PDF (centred paragraphs with the caption below, pictures `picture_width`
// document pixels wide, drawn from pictures of `picture_pixels`).
struct ReportLayout {
    bool print = false;
    int picture_width = 420;
    int picture_pixels = 420;
};

QString report_markdown(const ReportInput& input);
QString report_html(const ReportInput& input);
QString report_html(const ReportInput& input, const ReportLayout& layout);

}  // namespace sl::desktop
