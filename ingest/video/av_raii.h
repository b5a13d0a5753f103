// RAII owners for the libav* objects the media readers use, so that every path (success, error,
// exception, cancellation) frees what it allocated. Each alias is a std::unique_ptr with a deleter
// that calls the matching FFmpeg free function; none of these objects is shared between threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libavutil/mem.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

namespace sl::ingest::av {

struct FormatContextDeleter {
    void operator()(AVFormatContext* p) const { avformat_close_input(&p); }
};
struct CodecContextDeleter {
    void operator()(AVCodecContext* p) const { avcodec_free_context(&p); }
};
struct FrameDeleter {
    void operator()(AVFrame* p) const { av_frame_free(&p); }
};
struct PacketDeleter {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsDeleter {
    void operator()(SwsContext* p) const { sws_freeContext(p); }
};
struct SwrDeleter {
    void operator()(SwrContext* p) const { swr_free(&p); }
};
// A custom AVIOContext owns its (possibly reallocated) buffer: free the buffer, then the context.
struct IoContextDeleter {
    void operator()(AVIOContext* p) const {
        if (!p) return;
        av_freep(&p->buffer);
        avio_context_free(&p);
    }
};

using FormatContextPtr = std::unique_ptr<AVFormatContext, FormatContextDeleter>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDeleter>;
using SwrPtr = std::unique_ptr<SwrContext, SwrDeleter>;
using IoContextPtr = std::unique_ptr<AVIOContext, IoContextDeleter>;

// Unrefs a packet when it goes out of scope (the packet itself is reused by the demux loop).
class PacketUnref {
public:
    explicit PacketUnref(AVPacket* p) : p_(p) {}
    ~PacketUnref() { av_packet_unref(p_); }
    PacketUnref(const PacketUnref&) = delete;
    PacketUnref& operator=(const PacketUnref&) = delete;

private:
    AVPacket* p_;
};

// An AVSubtitle filled by avcodec_decode_subtitle2, freed with avsubtitle_free.
class Subtitle {
public:
    Subtitle() = default;
    ~Subtitle() { avsubtitle_free(&sub_); }
    Subtitle(const Subtitle&) = delete;
    Subtitle& operator=(const Subtitle&) = delete;
    AVSubtitle* get() { return &sub_; }
    const AVSubtitle* operator->() const { return &sub_; }

private:
    AVSubtitle sub_{};
};

FramePtr make_frame();    // throws std::bad_alloc when FFmpeg is out of memory
PacketPtr make_packet();  // likewise

// FFmpeg's text for an error code, e.g. "Invalid data found when processing input".
std::string error_text(int err);

// The largest single allocation FFmpeg may make (av_max_alloc). An 8-bit plane of a frame at the
// largest allowed video size (16384 x 16384 = 256 MiB, plus FFmpeg's padding) fits; a header that
// claims a big tag is refused, not allocated and zeroed: a 2.5 KB WAV whose LIST/INFO tag claims
// 842 MB (found by fuzz_video) or 1.8 GB. Wider samples at that size (16-bit planes, packed RGB)
// are refused as too large, as they were under the earlier 1 GiB cap.
inline constexpr size_t kMaxAllocationBytes = size_t{320} << 20;

// Process-wide FFmpeg set-up, once: its own logging off (the last error line FFmpeg logged on the
// calling thread is kept, for messages) and allocations capped at kMaxAllocationBytes. Safe to call
// from any thread, any number of times.
void setup();
std::string last_log_line();  // of the calling thread; "" when none
void clear_last_log_line();   // of the calling thread

}  // namespace sl::ingest::av
