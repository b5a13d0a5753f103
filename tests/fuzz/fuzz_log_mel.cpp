// libFuzzer target for Whisper's log-mel front end (core/whisper/log_mel.h) on hostile audio:
// the input bytes are float samples (any length, NaN and infinities included; the first byte
// picks a window). The one-pass features and the two-pass streaming features (log_mel_max +
// log_mel_window over a window of the input) must agree wherever the input is finite; any crash
// or sanitizer report, or an exception other than sl::Error for an empty window, is a bug.
// Seeds: tests/fuzz/corpus/fuzz_log_mel (tiny hand-made signals: silence, a ramp, a click, odd
// lengths around the 400-sample FFT and the 160-sample hop).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/util/error.h"
#include "core/whisper/log_mel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1 || size > 64 * 1024) return 0;
    const uint8_t pick = data[0];
    std::vector<float> audio((size - 1) / sizeof(float));
    if (!audio.empty()) std::memcpy(audio.data(), data + 1, audio.size() * sizeof(float));
    bool finite = true;
    for (const float v : audio) finite = finite && std::isfinite(v) && std::abs(v) < 1e6f;

    const auto whole = sl::whisper::log_mel_spectrogram(audio);
    if (whole.n_frames != static_cast<int64_t>(audio.size() / 160)) __builtin_trap();
    if (whole.data.size() != static_cast<size_t>(80 * whole.n_frames)) __builtin_trap();

    sl::whisper::SpanAudioSource source(audio);
    const float max_log = sl::whisper::log_mel_max(source);
    if (whole.n_frames == 0) return 0;
    const int64_t f0 = pick % whole.n_frames;
    const int64_t nf = 1 + (pick / 7) % (whole.n_frames - f0);
    const auto w = sl::whisper::log_mel_window(source, f0, nf, max_log);
    if (w.data.size() != static_cast<size_t>(80 * nf)) __builtin_trap();
    if (finite) {
        for (int m = 0; m < 80; ++m)
            for (int64_t t = 0; t < nf; ++t)
                if (std::abs(w.data[static_cast<size_t>(m * nf + t)] -
                             whole.data[static_cast<size_t>(m * whole.n_frames + f0 + t)]) > 1e-5f)
                    __builtin_trap();
    }
    try {
        (void)sl::whisper::log_mel_window(source, whole.n_frames, 1, max_log);
        __builtin_trap();  // past the end must be refused
    } catch (const sl::Error&) {
    }
    return 0;
}
