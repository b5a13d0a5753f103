// The PDF reader (Poppler): one Unit per page with its text in reading order (lines grouped into
// paragraph-ish blocks, boxes normalized to the page as displayed), page size in points, rotation
// and label; the outline, links and metadata; OCR of pages without a text layer; page renders
// when asked (IngestOptions::render_dpi > 0).
//
// Threading: stateless; read() opens its own Poppler document, so it may run on several threads
// at once for different files. read() extracts the pages on the calling thread and returns when
// the whole file is read. IngestOptions::page_threads (0: one per core, up to kMaxPdfThreads;
// SIGHTLINE_PDF_THREADS=N overrides) adds helper threads, each with its own Poppler document,
// joined before read() returns. Progress is reported
// from the calling thread only; cancellation is checked before every page on every thread.
#pragma once

#include <memory>

#include "ingest/reader.h"

namespace sl::ingest {

inline constexpr unsigned kMaxPdfThreads = 4;

std::unique_ptr<Reader> make_pdf_reader();

}  // namespace sl::ingest
