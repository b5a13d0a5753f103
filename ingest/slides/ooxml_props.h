// OOXML document properties: docProps/core.xml (Dublin Core: title, creator, dates) and
// docProps/app.xml (the application that wrote the file), shared by the Office readers.
//
// Threading: uses the caller's ZipArchive; same thread rules as ZipArchive.
#pragma once

#include <map>
#include <string>

#include "ingest/slides/zip_archive.h"

namespace sl::ingest::ooxml {

struct DocumentProperties {
    std::string title;                            // dc:title, trimmed; empty when absent
    std::map<std::string, std::string> metadata;  // creator, lastModifiedBy, created, modified,
                                                  // subject, keywords, description, application
};

// Reads the properties parts when present. Missing or malformed property parts are skipped (they
// are optional); zip safety errors (TooLarge, Encrypted) propagate.
DocumentProperties read_document_properties(ZipArchive& zip);

}  // namespace sl::ingest::ooxml
