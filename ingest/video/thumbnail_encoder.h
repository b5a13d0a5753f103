// Small JPEG thumbnails of decoded frames (libswscale + FFmpeg's MJPEG encoder). One instance per
// video stream, used by one thread; it keeps its scaler and encoder between frames and rebuilds
// them when the thumbnail size changes.
#pragma once

#include <cstdint>
#include <vector>

#include "ingest/video/av_raii.h"

namespace sl::ingest {

class ThumbnailEncoder {
public:
    // `max_px`: longest side of the thumbnail (> 0); frames are never scaled up.
    explicit ThumbnailEncoder(int max_px) : max_px_(max_px) {}

    // A JPEG of `frame` with its display aspect (sample aspect ratio applied); empty when the
    // frame cannot be converted or encoded (the caller keeps the frame without pixels).
    std::vector<uint8_t> encode(const AVFrame* frame);

private:
    bool prepare(int w, int h);

    int max_px_;
    int w_ = 0, h_ = 0;
    av::SwsPtr sws_;
    av::CodecContextPtr enc_;
    av::FramePtr scaled_;
    av::PacketPtr packet_;
};

}  // namespace sl::ingest
