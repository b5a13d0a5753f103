// One reader per format behind one interface; the rest of Sightline never asks which format a
// file was. Readers are stateless and thread-safe: read() may run on several threads at once for
// different files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "ingest/ingest_context.h"

namespace sl::ingest {

class Reader {
public:
    virtual ~Reader() = default;
    virtual const char* name() const = 0;                   // "pdf", "pptx", "video", "image"
    virtual std::vector<std::string> extensions() const = 0; // lowercase, without dot
    // Whether the first bytes of a file look like this format (magic numbers).
    virtual bool sniff(const std::string& head) const = 0;
    // Reads the whole file into a Document (id, path, kind, units...). Runs on the calling thread;
    // reports progress and honours cancellation through ctx. Throws IngestError naming the file.
    virtual doc::Document read(const std::string& path, IngestContext& ctx) const = 0;
};

// The reader for a file, by content first and extension second; nullptr when none fits.
const Reader* reader_for(const std::string& path);

// Every registered reader.
const std::vector<std::unique_ptr<Reader>>& readers();

// reader_for(path)->read(path, ctx), with a clear error when no reader fits; fills Document::id
// (sha256 of the bytes) and path when the reader did not.
doc::Document read_document(const std::string& path, IngestContext& ctx);

}  // namespace sl::ingest
