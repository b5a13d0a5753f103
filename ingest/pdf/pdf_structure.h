// The document-level parts of a PDF: metadata and title, outline (bookmarks), and the links of a
// page. Internal to ingest/pdf; runs on the reader's thread with that thread's Poppler document.
#pragma once

#include <string>
#include <vector>

#include "core/document/document.h"
#include <poppler-qt6.h>

namespace sl::ingest {

// Caps against hostile outlines (deep or huge trees).
inline constexpr int kMaxOutlineDepth = 32;
inline constexpr size_t kMaxOutlineEntries = 200000;

// Fills d.metadata (lowercase keys: title, author, subject, keywords, creator, producer,
// created, modified (ISO 8601), pdf_version, pages, and any other Info keys lowercased) and
// d.title (the Info title, else the file name).
void read_pdf_metadata(const Poppler::Document& pdf, const std::string& path, doc::Document& d);

// The outline, depth first: title, level (0 = top), target unit (0-based page, -1 when the
// destination does not resolve to a page of this document).
std::vector<doc::OutlineEntry> read_pdf_outline(const Poppler::Document& pdf);

// Appends the links of `page` (unit `unit` of `page_count`): internal jumps (target_unit) and web
// links (uri), with their areas normalized to the page as displayed.
void append_page_links(const Poppler::Page& page, int unit, int page_count,
                       std::vector<doc::Link>& out);

}  // namespace sl::ingest
