// Decodes one audio stream as its packets arrive and resamples it (libswresample) to 16 kHz mono
// s16, the input speech recognition wants, handing each converted chunk with its media time to a
// sink. One instance per stream, driven by one thread; the stream must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ingest/video/av_raii.h"

namespace sl::ingest {

class AudioTrack {
public:
    // samples, count, media time of the first sample (seconds)
    using Sink = std::function<void(const int16_t*, size_t, double)>;

    // Throws IngestError (Unsupported/Corrupt) naming `name` when the decoder cannot open.
    AudioTrack(const std::string& name, AVStream* stream, double start_offset,
               double max_duration_s, Sink sink);
    ~AudioTrack();
    AudioTrack(const AudioTrack&) = delete;
    AudioTrack& operator=(const AudioTrack&) = delete;

    void on_packet(const AVPacket* packet);
    void finish();  // flushes the decoder (null packet) and the resampler

    int64_t corrupt_packets() const { return corrupt_; }
    int64_t decoded_frames() const { return decoded_; }
    double last_time() const { return next_t_; }  // media time just after the last sample

private:
    void send(const AVPacket* packet);
    void on_frame(const AVFrame* frame);
    bool prepare_resampler(const AVFrame* frame);
    void drain();  // what the resampler still holds

    std::string name_;
    AVStream* stream_;
    double offset_, max_duration_;
    Sink sink_;
    av::CodecContextPtr dec_;
    av::FramePtr frame_;
    av::SwrPtr swr_;
    int in_rate_ = 0, in_format_ = -1;
    AVChannelLayout in_layout_{};
    std::vector<int16_t> out_;
    double next_t_ = -1;
    int64_t corrupt_ = 0, decoded_ = 0;
};

}  // namespace sl::ingest
