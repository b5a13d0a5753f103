// The PowerPoint (PPTX, Office Open XML PresentationML) reader: one Unit per slide in the order of
// ppt/presentation.xml's p:sldIdLst, sized from p:sldSz in points; per slide the text of every
// shape (titles, bodies, table cells, groups flattened) with its box normalized to the slide
// (placeholders without their own position inherit it from the slide layout, then the master),
// speaker notes (role Note, no box) and embedded pictures (Visual, locator "zip:ppt/media/...").
// Document title: docProps/core.xml dc:title, else the first slide's title, else the file name.
//
// Hostile input: every zip read goes through ZipArchive's caps (IngestOptions::
// max_uncompressed_bytes, max_compression_ratio); slide count ≤ IngestOptions::max_pages; group
// nesting bounded; encrypted decks (an OLE compound file holding EncryptionInfo) are reported as
// Encrypted. Errors are IngestError naming the file and the cause (and the part and line for
// malformed XML).
//
// Threading: the reader is stateless; read() and read_pptx_bytes() run on the calling thread and
// may run on several threads at once for different files.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"

namespace sl::ingest {

std::unique_ptr<Reader> make_pptx_reader();

// Reads a deck held in memory (the fuzzer, tests, decks inside other containers). `name` is what
// errors and Document::path say; Document::id is the sha256 of `bytes`. `bytes` must stay valid for
// the duration of the call only.
doc::Document read_pptx_bytes(std::span<const uint8_t> bytes, const std::string& name,
                              IngestContext& ctx);

}  // namespace sl::ingest
