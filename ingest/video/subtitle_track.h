// Decodes one embedded text subtitle stream (SubRip, ASS/SSA, mov_text, WebVTT, ...) with
// avcodec_decode_subtitle2 into timed Subtitle blocks, ASS markup stripped. Bitmap subtitles
// (DVD, PGS) are counted and skipped (no OCR here). One instance per stream, driven by one thread;
// the stream must outlive it.
#pragma once

#include <string>
#include <vector>

#include "core/document/document.h"
#include "ingest/video/av_raii.h"

namespace sl::ingest {

class SubtitleTrack {
public:
    // Returns false (and stays inert) when the stream has no decoder or is not text.
    SubtitleTrack(AVStream* stream, double start_offset);

    bool usable() const { return dec_ != nullptr; }
    void on_packet(const AVPacket* packet);

    std::vector<doc::Block>& blocks() { return blocks_; }
    int64_t corrupt_packets() const { return corrupt_; }
    int64_t bitmap_rects() const { return bitmaps_; }
    std::string codec_name() const;

private:
    AVStream* stream_;
    double offset_;
    av::CodecContextPtr dec_;
    std::vector<doc::Block> blocks_;
    int64_t corrupt_ = 0, bitmaps_ = 0;
};

}  // namespace sl::ingest
