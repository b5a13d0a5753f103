#include "ingest/ingest_context.h"

#include "ingest/ingest_error.h"

namespace sl::ingest {

const char* to_string(IngestErrorKind kind) {
    switch (kind) {
        case IngestErrorKind::Unsupported: return "unsupported";
        case IngestErrorKind::Corrupt: return "corrupt";
        case IngestErrorKind::Encrypted: return "encrypted";
        case IngestErrorKind::TooLarge: return "too large";
        case IngestErrorKind::Cancelled: return "cancelled";
        case IngestErrorKind::Io: return "io";
    }
    return "unknown";
}

IngestContext::IngestContext(IngestOptions options, ProgressFn progress, const std::atomic<bool>* cancel)
    : options_(std::move(options)), progress_(std::move(progress)), cancel_(cancel) {}

void IngestContext::progress(double fraction, const std::string& what) {
    if (!progress_) return;
    const auto now = std::chrono::steady_clock::now();
    const bool edge = !reported_ || fraction >= 1.0;
    if (!edge && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    reported_ = true;
    progress_(fraction, what);
}

void IngestContext::check_cancelled(const std::string& path) const {
    if (cancelled()) throw IngestError(IngestErrorKind::Cancelled, path, "cancelled");
}

}  // namespace sl::ingest
