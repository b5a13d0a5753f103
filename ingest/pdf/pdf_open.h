// Opening a PDF with Poppler, with the checks every PDF entry point shares (readable, looks like a
// PDF, opens, not locked), each failure an IngestError naming the file. Internal to ingest/pdf: it
// exposes Poppler types, which only the ingest library sees.
//
// Threading: a Poppler::Document is not thread-safe; each caller opens its own and uses it on one
// thread at a time. open_pdf itself may run on several threads at once.
#pragma once

#include <memory>
#include <string>

#include <poppler-qt6.h>

namespace sl::ingest {

// Routes Poppler's error and debug messages away from stderr (once per process; idempotent and
// thread-safe). Malformed files make Poppler chatty, and none of it is for the user.
void quiet_poppler();

// Opens `path` with Poppler. Throws IngestError: Io (cannot read), Unsupported (no "%PDF-" header
// in the first KiB), Corrupt (Poppler cannot open it), Encrypted (needs a password).
std::unique_ptr<Poppler::Document> open_pdf(const std::string& path);

}  // namespace sl::ingest
