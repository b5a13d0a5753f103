// Readers of plain text (.txt), Markdown (.md, .markdown) and HTML (.html, .htm, .xhtml): one
// Document of kind Text whose units are Sections (text_sections.h).
// - Plain text: paragraphs are blank-line separated; sections are page-sized runs of paragraphs
//   (no headings), located "notes.txt §2".
// - Markdown: ATX ("## Results") and setext (underlined) headings outside fenced code start
//   sections labelled by the heading ("README.md §3 Results"); the rest as for plain text, with
//   the Markdown kept verbatim (models read it as it is).
// - HTML: html_text.h; the title is <title>, else the first heading.
// Encodings: UTF-8 (a BOM is dropped); UTF-16 with a BOM is converted; invalid UTF-8 is replaced by
// U+FFFD and the count noted in the document's notes. Files over kMaxTextBytes are refused
// (TooLarge). Errors are IngestError naming the file.
//
// Threading: the readers are stateless; read() runs on the calling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"

namespace sl::ingest {

// The largest text, Markdown or HTML file read (64 MiB: far more text than any context holds).
constexpr int64_t kMaxTextBytes = int64_t{64} << 20;

std::unique_ptr<Reader> make_text_reader();  // .txt, .md, .markdown
std::unique_ptr<Reader> make_html_reader();  // .html, .htm, .xhtml (and files that start as HTML)

// Reads text held in memory as the format `name`'s extension says (html/htm/xhtml, md/markdown,
// else plain text). `name` is what errors and Document::path say; Document::id is the sha256 of
// `bytes`.
doc::Document read_text_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx);

}  // namespace sl::ingest
