// Where the transcriber reads its audio from: 16 kHz mono float samples, read in windows, so a
// long recording need not be held in memory (a source decoding a file with FFmpeg keeps only what
// the next reads need).
//
// Access pattern of core/whisper (log_mel_max, log_mel_window, transcribe): whole passes from the
// start in order, each read's `begin` no smaller than the previous read's begin minus 30.5 s
// worth of samples (a window is re-read from its last timestamp), and `n` at most 31 s worth.
// A source may rely on that to keep a bounded buffer; reads outside it may throw sl::Error.
//
// Threading: a source is used by one thread at a time (the transcriber's caller).
#pragma once

#include <cstdint>
#include <span>

namespace sl::whisper {

class AudioSource {
public:
    virtual ~AudioSource() = default;
    // Total samples; known up front (a decoder reports the stream's duration).
    virtual int64_t size() const = 0;
    // out (n) <- samples [begin, begin + n); 0 <= begin, begin + n <= size().
    virtual void read(int64_t begin, int64_t n, float* out) = 0;
};

// Samples the caller holds in memory; they must outlive the source.
class SpanAudioSource final : public AudioSource {
public:
    explicit SpanAudioSource(std::span<const float> samples) : samples_(samples) {}
    int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
    void read(int64_t begin, int64_t n, float* out) override;

private:
    std::span<const float> samples_;
};

}  // namespace sl::whisper
