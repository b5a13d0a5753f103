// Errors of the readers. what() always names the file and the cause, e.g.
// "refman.pdf: the PDF is encrypted and needs a password".
#pragma once

#include <string>

#include "core/util/error.h"

namespace sl::ingest {

enum class IngestErrorKind {
    Unsupported,  // not a format we read, or a feature of it we do not support
    Corrupt,      // malformed or truncated
    Encrypted,    // needs a password
    TooLarge,     // over a safety cap (zip bomb, absurd page count or size, absurd dimensions)
    Cancelled,    // the caller cancelled
    Io,           // cannot open or read
};

const char* to_string(IngestErrorKind kind);

class IngestError : public FormatError {
public:
    IngestError(IngestErrorKind kind, const std::string& path, const std::string& cause)
        : FormatError(path + ": " + cause), kind_(kind) {}
    IngestErrorKind kind() const { return kind_; }

private:
    IngestErrorKind kind_;
};

}  // namespace sl::ingest
