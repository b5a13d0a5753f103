// Opening a media container with libavformat, from a file or from bytes in memory, with the safety
// checks a hostile file needs before any decoder is opened: nested opens refused (playlists,
// references to other files), dimensions and duration against the caps, at least one stream.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ingest/ingest_context.h"
#include "ingest/video/av_raii.h"

namespace sl::ingest {

// An open container. Not copyable; used by one thread. `ctx` passed to open_*() must outlive it
// (its cancellation flag interrupts blocking reads).
class MediaInput {
public:
    // Opens a file. Throws IngestError naming `path`: Io (cannot open), Unsupported (not media,
    // no streams), Corrupt (unreadable header), TooLarge (dimension or duration over the caps).
    static std::unique_ptr<MediaInput> open_file(const std::string& path, const IngestContext& ctx);
    // Opens bytes in memory through a custom AVIOContext; `bytes` must outlive the MediaInput.
    // `name` is used for messages and as a format hint (its extension).
    static std::unique_ptr<MediaInput> open_memory(std::span<const uint8_t> bytes,
                                                   const std::string& name,
                                                   const IngestContext& ctx);
    ~MediaInput();
    MediaInput(const MediaInput&) = delete;
    MediaInput& operator=(const MediaInput&) = delete;

    AVFormatContext* format() const { return fmt_.get(); }
    const std::string& name() const { return name_; }
    // Offset subtracted from every timestamp so that media time starts at 0 (seconds, >= 0).
    double start_offset() const { return start_offset_; }
    // Container duration in seconds, 0 when unknown.
    double duration() const { return duration_; }

    // Rejects a video stream whose size is over `max_dimension` (the check behind TooLarge);
    // exposed for tests. Throws IngestError(TooLarge) naming `name`.
    static void check_dimensions(const std::string& name, int stream_index, int width, int height,
                                 int max_dimension);

private:
    struct MemorySource;
    MediaInput() = default;
    static int refuse_io_open(AVFormatContext* s, AVIOContext** pb, const char* url, int flags,
                              AVDictionary** options);
    void open(const std::string& url, const IngestContext& ctx);

    std::string name_;
    std::unique_ptr<MemorySource> memory_;  // the bytes behind a custom AVIOContext
    av::IoContextPtr custom_io_;            // avio_alloc_context (memory input)
    AVIOContext* file_io_ = nullptr;        // avio_open2 (file input), closed in the destructor
    av::FormatContextPtr fmt_;              // declared last: closed before the I/O it reads
    double start_offset_ = 0;
    double duration_ = 0;
    std::string refused_url_;  // the first nested open refused (a playlist's segment), for messages
};

}  // namespace sl::ingest
