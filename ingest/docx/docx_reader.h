// The Word (DOCX, Office Open XML WordprocessingML) reader: one Document of kind Text whose units
// are Sections (ingest/text/text_sections.h), because a DOCX has no pages until Word lays it out.
// - Paragraphs in body order; a paragraph whose style is a heading ("heading N", "Title", or an
//   outline level, directly or through w:basedOn) is a Title block, and headings of levels 1-3
//   start a section labelled by the heading: "report.docx §3 Results". Long runs without
//   headings continue in page-sized sections ("§4 Results (cont.)").
// - Tables: one TableCell block per cell (nested tables folded into their outer cell).
// - Footnotes and endnotes: the reference becomes "[n]" in the text and the note a Note block
//   "[n] ..." in the same section.
// - Text boxes are read once (mc:Fallback copies skipped); deleted text and field codes left out.
// - Title: docProps/core.xml dc:title, else the first heading, else the file name.
//
// Hostile input: every zip read goes through ZipArchive's caps (IngestOptions::
// max_uncompressed_bytes, max_compression_ratio); each XML part ≤ ooxml::kMaxXmlPartBytes; section
// count ≤ IngestOptions::max_pages; encrypted documents (an OLE compound file) are reported as
// Encrypted or, for Word 97-2003 .doc, Unsupported. Errors are IngestError naming the file and the
// cause (and the part and line for malformed XML).
//
// Threading: the reader is stateless; read() and read_docx_bytes() run on the calling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"

namespace sl::ingest {

std::unique_ptr<Reader> make_docx_reader();

// Reads a document held in memory (the fuzzer, tests). `name` is what errors and Document::path
// say; Document::id is the sha256 of `bytes`, which must stay valid for the call only.
doc::Document read_docx_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx);

}  // namespace sl::ingest
