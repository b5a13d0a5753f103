// Whisper's log-mel front end: 16 kHz mono float samples -> (n_mels, n_frames) log-mel features,
// as openai-whisper's audio.log_mel_spectrogram computes them:
//   STFT: n_fft 400 (25 ms), hop 160 (10 ms), periodic Hann window, centered frames (the signal
//         reflect-padded by 200 samples on each side, numpy's "reflect": the edge sample is not
//         repeated), the last frame dropped: n_frames = n_samples / 160 (floor)
//   power |X|^2 of bins 0..200, times a Slaney-style mel filterbank (librosa.filters.mel with
//         htk=False, norm="slaney": triangles on the Slaney mel scale from 0 Hz to 8 kHz, each
//         scaled by 2 / its width in Hz)
//   log10(max(mel, 1e-10)), then max(x, max_over_everything(x) - 8), then (x + 4) / 4.
// The clamp takes the maximum over the whole call: give it the same samples whisper would (the
// transcriber pads 30 s of zeros after the audio before computing features).
//
// The DFT runs as an f32 matrix product on kernels/cpu/gemm_f32 (frames x cos/sin table), the
// filterbank too; everything else is plain loops. Memory: the output plus a bounded scratch
// (a block of frames at a time), so long audio costs 320 bytes of features per 10 ms frame.
// Pure functions: thread-safe; no state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/whisper/audio_source.h"

namespace sl::whisper {

constexpr int kSampleRate = 16000;
constexpr int kNFft = 400;
constexpr int kHopLength = 160;
constexpr int kNBins = kNFft / 2 + 1;                     // 201 frequency bins
constexpr int kChunkSamples = 30 * kSampleRate;           // one 30 s window: 480000 samples
constexpr int kChunkFrames = kChunkSamples / kHopLength;  // 3000 frames

struct LogMel {
    int n_mels = 0;
    int64_t n_frames = 0;
    std::vector<float> data;  // (n_mels, n_frames) row-major: data[m * n_frames + t]
};

// The filterbank, (n_mels, kNBins) row-major, float32 computed in double (librosa's dtype).
// n_mels is 80 for every Whisper model but large-v3 (128); any value in 1..512 works.
std::vector<float> mel_filters(int n_mels);

// Features of `audio` (16 kHz mono, any length; fewer than 160 samples give 0 frames). Samples
// are used as they are (no resampling, no normalization). n_mels as for mel_filters().
LogMel log_mel_spectrogram(std::span<const float> audio, int n_mels = 80);

// The same features from a source in two passes, in bounded memory (a few MB of scratch):
// log_mel_max() reads all of it once for the clamp's maximum (of log10(max(mel, 1e-10)) over every
// frame); log_mel_window() then computes frames [frame_begin, frame_begin + n_frames) normalized
// with it, reading only the samples they touch. The values equal the slice of
// log_mel_spectrogram(all samples) to float rounding (each frame's arithmetic is the same).
// frame_begin + n_frames must not exceed size() / 160 (sl::Error otherwise).
float log_mel_max(AudioSource& source, int n_mels = 80);
LogMel log_mel_window(AudioSource& source, int64_t frame_begin, int64_t n_frames, float max_log,
                      int n_mels = 80);

}  // namespace sl::whisper
