// Decodes one video stream as its packets arrive from the demuxer and keeps the frames the
// FrameSampler picks, each as a doc::Visual (exact timestamp, size, JPEG thumbnail, locator).
//
// Speed: per GOP it decides whether only the keyframe is needed (keyframes at least as dense as
// the sampler's slots: non-key packets are never sent to the decoder) or the whole GOP (then
// non-reference frames are skipped, AVDISCARD_NONREF). Decoding uses `threads` threads (frame +
// slice). Memory: one pending frame (a reference into the decoder's pool) plus the kept visuals.
// One instance per stream, driven by one thread; the AVFormatContext must outlive it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "ingest/video/av_raii.h"
#include "ingest/video/frame_sampler.h"
#include "ingest/video/thumbnail_encoder.h"

namespace sl::ingest {

struct VideoTrackConfig {
    double max_frames_per_minute = 6.0;
    double duration = 0;          // container duration in seconds, 0 when unknown
    double start_offset = 0;      // seconds subtracted from every timestamp
    double max_duration_s = 1e9;  // a frame later than this throws TooLarge
    int max_dimension = 16384;
    int thumbnail_px = 256;  // 0: no thumbnails
    int threads = 2;
};

class VideoTrack {
public:
    // Opens the decoder. Throws IngestError (Unsupported) naming `name` when there is none.
    VideoTrack(const std::string& name, AVStream* stream, const VideoTrackConfig& config);

    // Feeds one demuxed packet of this stream (the caller still owns and unrefs it).
    void on_packet(const AVPacket* packet);
    // Flushes the decoder (null packet) and emits the last pending frame.
    void finish();

    std::vector<doc::Visual>& frames() { return frames_; }
    int64_t corrupt_packets() const { return corrupt_; }
    int64_t decoded_frames() const { return decoded_; }
    double last_time() const { return last_t_; }  // of the last decoded frame, -1 before any
    double frame_duration() const { return frame_dur_; }
    int width() const { return stream_->codecpar->width; }
    int height() const { return stream_->codecpar->height; }

private:
    void send(const AVPacket* packet);
    void on_frame(AVFrame* frame);
    void emit_pending();
    bool small_gray(const AVFrame* frame);
    double estimate_gop_from_index() const;

    std::string name_;
    AVStream* stream_;
    VideoTrackConfig config_;
    av::CodecContextPtr dec_;
    av::FramePtr frame_, pending_;
    av::SwsPtr small_sws_;
    std::vector<uint8_t> small_;
    FrameSampler sampler_;
    ThumbnailEncoder thumbs_;
    std::vector<doc::Visual> frames_;
    double tb_ = 0;
    double frame_dur_ = 0.04;
    double last_t_ = -1, pending_t_ = 0;
    double index_gop_ = 0;  // keyframe spacing from the container index, 0 when unknown
    double last_key_t_ = -1, observed_gop_ = 0, last_sent_key_t_ = -1e18;
    bool key_only_ = false;
    int64_t corrupt_ = 0, decoded_ = 0;
};

}  // namespace sl::ingest
