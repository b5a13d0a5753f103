// What a reader gets besides the file: options, a progress sink and a cancellation flag.
//
// Threading: a reader runs on one worker thread and calls progress()/check_cancelled() from it.
// The progress callback runs on that worker thread (the app forwards it to the GUI thread via
// QPromise/signals); it is throttled to at most ~10 calls a second, plus the first and the last.
// cancel may be set from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace sl::ingest {

struct IngestOptions {
    bool ocr = true;                     // OCR pages without a text layer, images, big pictures
    std::string ocr_language = "eng";
    int render_dpi = 0;                  // > 0: keep a page render of every page at this DPI
    int thumbnail_px = 256;              // longest side of thumbnails kept in visuals (0: none)
    double max_frames_per_minute = 6.0;  // video frame sampling cap (the effort knob)
    bool transcribe = true;              // speech to text for audio tracks
    int page_threads = 0;                // threads a reader may use within one file (0: one per core)
    // Safety caps against hostile files.
    int64_t max_pages = 100000;
    int64_t max_uncompressed_bytes = int64_t{2} << 30;  // zip containers
    double max_compression_ratio = 200.0;               // per zip entry
    int max_video_dimension = 16384;
    double max_duration_s = 48 * 3600.0;
};

using ProgressFn = std::function<void(double fraction, const std::string& what)>;

class IngestContext {
public:
    explicit IngestContext(IngestOptions options = {}, ProgressFn progress = {},
                           const std::atomic<bool>* cancel = nullptr);

    const IngestOptions& options() const { return options_; }

    // fraction in [0, 1]; throttled as described above.
    void progress(double fraction, const std::string& what);

    bool cancelled() const { return cancel_ && cancel_->load(std::memory_order_relaxed); }
    // Throws IngestError(Cancelled, path, "cancelled") when cancelled.
    void check_cancelled(const std::string& path) const;

private:
    IngestOptions options_;
    ProgressFn progress_;
    const std::atomic<bool>* cancel_;
    std::chrono::steady_clock::time_point last_{};
    bool reported_ = false;
};

}  // namespace sl::ingest
