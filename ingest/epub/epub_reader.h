// The EPUB reader (EPUB 2 and 3: a zip of XHTML chapters): one Document of kind Text whose units
// are Sections (ingest/text/text_sections.h). META-INF/container.xml names the package (OPF); its
// spine gives the reading order; every chapter starts a new section, and headings of levels 1-3
// and page-sized runs of text split chapters further: "book.epub §12 Chapter 3". Chapter text
// comes from the markup by ingest/text/html_text.h. Title: the OPF's dc:title, else the first
// heading, else the file name; dc:creator and dc:language go to metadata.
//
// Hostile input: every zip read goes through ZipArchive's caps; each part ≤
// ooxml::kMaxXmlPartBytes; spine length and section count ≤ IngestOptions::max_pages; chapters
// outside the package, missing or not XHTML are skipped with a note; DRM-encrypted books
// (META-INF/encryption.xml naming content other than fonts) are reported as Encrypted. Errors are
// IngestError naming the file and the cause.
//
// Threading: the reader is stateless; read() and read_epub_bytes() run on the calling thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"

namespace sl::ingest {

std::unique_ptr<Reader> make_epub_reader();

// Reads a book held in memory (the fuzzer, tests); `bytes` must stay valid for the call only.
doc::Document read_epub_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx);

}  // namespace sl::ingest
