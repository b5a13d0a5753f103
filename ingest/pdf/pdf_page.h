// One PDF page into one Unit: label, size, rotation, text blocks (born-digital, or OCR when the
// page has no text layer), its links, and its render visual when asked. Internal to ingest/pdf.
//
// Threading: a PdfPageReader belongs to one thread, with that thread's Poppler document and OCR
// engine (loaded on the first page that needs it).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/ocr/ocr_engine.h"
#include <poppler-qt6.h>

namespace sl::ingest {

struct PdfPageResult {
    doc::Unit unit;
    std::vector<doc::Link> links;
    bool damaged = false;   // Poppler could not load the page; the unit keeps its place
    bool ocr_text = false;  // OCR found text on it
};

class PdfPageReader {
public:
    // `pdf` and `options` must outlive this object.
    PdfPageReader(const Poppler::Document& pdf, const IngestOptions& options);

    // Page `index` (0-based). `cancelled` is polled during OCR. May throw std::bad_alloc.
    PdfPageResult read(int index, const std::function<bool()>& cancelled);

    // Why OCR is unavailable, when it was needed and the language did not load.
    const std::string& ocr_error() const { return ocr_error_; }

private:
    const Poppler::Document& pdf_;
    const IngestOptions& options_;
    int page_count_;
    std::optional<OcrEngine> ocr_;
    std::string ocr_error_;
};

}  // namespace sl::ingest
