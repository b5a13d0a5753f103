#include "core/whisper/log_mel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>

#include "core/util/error.h"
#include "kernels/cpu/gemm_f32.h"

namespace sl::whisper {

namespace {

constexpr int kPad = kNFft / 2;       // centered frames: 200 samples of reflection each side
constexpr int kDftCols = 2 * kNBins;  // (re, im) per bin: 402 columns of the DFT product
constexpr int64_t kBlockFrames = 4 * kernels::kGemmTokenBlock;  // frames per scratch block

// The Slaney mel scale (librosa's mel_frequencies with htk=False): linear below 1 kHz, 3 mels per
// 200 Hz; logarithmic above, 27 mels per factor 6.4.
constexpr double kFSp = 200.0 / 3.0;
constexpr double kMinLogHz = 1000.0;
constexpr double kMinLogMel = kMinLogHz / kFSp;  // 15
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double f) {
    return f < kMinLogHz ? f / kFSp : kMinLogMel + std::log(f / kMinLogHz) / kLogStep;
}

double mel_to_hz(double m) {
    return m < kMinLogMel ? kFSp * m : kMinLogHz * std::exp(kLogStep * (m - kMinLogMel));
}

// The windowed real DFT as a (kDftCols, kNFft) weight, packed for gemm_f32: row 2j holds
// w[k] cos(2 pi j k / N), row 2j + 1 holds -w[k] sin(2 pi j k / N), w the periodic Hann window.
// Built once (thread-safe static initialization), read-only afterwards.
const std::vector<float>& packed_dft() {
    static const std::vector<float> packed = [] {
        std::vector<float> w(static_cast<size_t>(kDftCols) * kNFft);
        for (int k = 0; k < kNFft; ++k) {
            const double hann = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * k / kNFft);
            for (int j = 0; j < kNBins; ++j) {
                // j * k mod N keeps the angle small, so cos/sin stay accurate.
                const double a = 2.0 * std::numbers::pi * ((j * k) % kNFft) / kNFft;
                w[static_cast<size_t>(2 * j) * kNFft + k] = static_cast<float>(hann * std::cos(a));
                w[static_cast<size_t>(2 * j + 1) * kNFft + k] =
                    static_cast<float>(-hann * std::sin(a));
            }
        }
        std::vector<float> p(kernels::packed_size(kDftCols, kNFft));
        kernels::pack_panels(w.data(), kDftCols, kNFft, p.data());
        return p;
    }();
    return packed;
}

// numpy's "reflect" padding: index i of the padded signal, mirrored about the ends without
// repeating them; folds again for signals shorter than the padding. n >= 1.
int64_t mirror(int64_t i, int64_t n) {
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

}  // namespace

std::vector<float> mel_filters(int n_mels) {
    if (n_mels < 1 || n_mels > 512)
        throw Error("mel_filters: n_mels " + std::to_string(n_mels) + " is outside 1..512");
    const double mel_max = hz_to_mel(kSampleRate / 2.0);
    std::vector<double> hz(static_cast<size_t>(n_mels) + 2);
    for (size_t i = 0; i < hz.size(); ++i)
        hz[i] = mel_to_hz(mel_max * static_cast<double>(i) / static_cast<double>(n_mels + 1));
    std::vector<float> out(static_cast<size_t>(n_mels) * kNBins);
    for (int m = 0; m < n_mels; ++m) {
        const double lo = hz[m], mid = hz[m + 1], hi = hz[m + 2];
        const double norm = 2.0 / (hi - lo);  // Slaney: equal area per filter
        for (int j = 0; j < kNBins; ++j) {
            const double f = static_cast<double>(kSampleRate) * j / kNFft;
            const double rise = (f - lo) / (mid - lo), fall = (hi - f) / (hi - mid);
            out[static_cast<size_t>(m) * kNBins + j] =
                static_cast<float>(std::max(0.0, std::min(rise, fall)) * norm);
        }
    }
    return out;
}

void SpanAudioSource::read(int64_t begin, int64_t n, float* out) {
    if (begin < 0 || n < 0 || begin + n > size())
        throw Error("audio read of samples [" + std::to_string(begin) + ", " +
                    std::to_string(begin + n) + ") outside [0, " + std::to_string(size()) + ")");
    std::copy_n(samples_.data() + begin, n, out);
}

namespace {

// The mel filter bank for n_mels, packed for gemm_f32; built once per n_mels (under a lock),
// read-only afterwards (the vectors never move: std::map keeps its nodes).
const std::vector<float>& packed_filters(int n_mels) {
    static std::mutex mutex;
    static std::map<int, std::vector<float>> cache;
    const std::lock_guard lock(mutex);
    auto it = cache.find(n_mels);
    if (it == cache.end()) {
        const std::vector<float> filters = mel_filters(n_mels);
        std::vector<float> p(kernels::packed_size(n_mels, kNBins));
        kernels::pack_panels(filters.data(), n_mels, kNBins, p.data());
        it = cache.emplace(n_mels, std::move(p)).first;
    }
    return it->second;
}

// Scratch of one feature computation: `block` frames at a time (at most kBlockFrames, fewer
// when the computation has fewer frames, so a short window does not clear 1.6 MB of scratch).
struct MelWork {
    MelWork(int n_mels_, int64_t frames)
        : n_mels(n_mels_),
          block(std::clamp<int64_t>(frames, 1, kBlockFrames)),
          filters(packed_filters(n_mels_)) {
        this->frames.resize(static_cast<size_t>(block) * kNFft);
        spectrum.resize(static_cast<size_t>(block) * kDftCols);
        power.resize(static_cast<size_t>(block) * kNBins);
        mel.resize(static_cast<size_t>(block) * n_mels);
    }
    int n_mels;
    int64_t block;
    const std::vector<float>& filters;
    std::vector<float> frames, spectrum, power, mel;  // (block, kNFft), (block, kDftCols),
                                                      // (block, kNBins), (block, n_mels)
};

// log10(max(mel, 1e-10)) of frames [f0, f0 + nf) of a signal of n samples, from `chunk`, its
// samples [c0, c0 + chunk.size()), which must hold every sample those frames touch, mirrored
// ends included. out: column f - col0 of an (n_mels, ld) matrix. Returns their maximum.
float raw_frames(MelWork& w, std::span<const float> chunk, int64_t c0, int64_t n, int64_t f0,
                 int64_t nf, float* out, int64_t ld, int64_t col0) {
    const std::vector<float>& dft = packed_dft();
    const int n_mels = w.n_mels;
    const auto c_end = c0 + static_cast<int64_t>(chunk.size());
    float max_log = -std::numeric_limits<float>::infinity();
    for (int64_t t0 = f0; t0 < f0 + nf; t0 += w.block) {
        const int64_t nb = std::min(w.block, f0 + nf - t0);
        for (int64_t b = 0; b < nb; ++b) {
            float* row = w.frames.data() + b * kNFft;
            const int64_t start = (t0 + b) * kHopLength - kPad;
            if (start >= 0 && start + kNFft <= n) {
                if (start < c0 || start + kNFft > c_end)
                    throw Error("log-mel: chunk misses samples");
                std::copy_n(chunk.data() + (start - c0), kNFft, row);
            } else {
                for (int k = 0; k < kNFft; ++k) {
                    const int64_t i = mirror(start + k, n);
                    if (i < c0 || i >= c_end) throw Error("log-mel: chunk misses samples");
                    row[k] = chunk[static_cast<size_t>(i - c0)];
                }
            }
        }
        kernels::gemm_f32(w.frames.data(), kNFft, nb, kNFft, dft.data(), kDftCols, nullptr,
                          w.spectrum.data(), kDftCols, 0, kDftCols);
        for (int64_t b = 0; b < nb; ++b) {
            const float* sp = w.spectrum.data() + b * kDftCols;
            float* p = w.power.data() + b * kNBins;
            for (int j = 0; j < kNBins; ++j)
                p[j] = sp[2 * j] * sp[2 * j] + sp[2 * j + 1] * sp[2 * j + 1];
        }
        kernels::gemm_f32(w.power.data(), kNBins, nb, kNBins, w.filters.data(), n_mels,
                          nullptr, w.mel.data(), n_mels, 0, n_mels);
        for (int64_t b = 0; b < nb; ++b) {
            for (int m = 0; m < n_mels; ++m) {
                const float v =
                    std::log10(std::max(w.mel[static_cast<size_t>(b * n_mels + m)], 1e-10f));
                out[m * ld + (t0 + b - col0)] = v;
                max_log = std::max(max_log, v);
            }
        }
    }
    return max_log;
}

// The samples frames [f0, f0 + nf) of an n-sample signal touch: [c0, c1).
void frame_span(int64_t f0, int64_t nf, int64_t n, int64_t& c0, int64_t& c1) {
    c0 = std::max<int64_t>(0, f0 * kHopLength - kPad);
    c1 = std::min<int64_t>(n, (f0 + nf - 1) * kHopLength - kPad + kNFft);
    if (f0 * kHopLength - kPad < 0 || (f0 + nf - 1) * kHopLength - kPad + kNFft > n) {
        // Mirrored ends: the first frames reflect samples [1, 200], the last ones samples down
        // to n - 201; very short signals fold several times. Take what the mirror can reach.
        if (f0 * kHopLength - kPad < 0) c1 = std::max(c1, std::min<int64_t>(n, kPad + 1));
        if ((f0 + nf - 1) * kHopLength - kPad + kNFft > n)
            c0 = std::min(c0, std::max<int64_t>(0, n - kNFft));
        if (n < 2 * kNFft) c0 = 0, c1 = n;
    }
}

}  // namespace

LogMel log_mel_spectrogram(std::span<const float> audio, int n_mels) {
    MelWork w(n_mels, static_cast<int64_t>(audio.size()) / kHopLength);
    LogMel out;
    out.n_mels = n_mels;
    const auto n = static_cast<int64_t>(audio.size());
    out.n_frames = n / kHopLength;
    out.data.resize(static_cast<size_t>(n_mels) * static_cast<size_t>(out.n_frames));
    if (out.n_frames == 0) return out;
    const float max_log =
        raw_frames(w, audio, 0, n, 0, out.n_frames, out.data.data(), out.n_frames, 0);
    const float floor = max_log - 8.0f;
    for (float& v : out.data) v = (std::max(v, floor) + 4.0f) / 4.0f;
    return out;
}

float log_mel_max(AudioSource& source, int n_mels) {
    const int64_t n = source.size();
    const int64_t frames = n / kHopLength;
    constexpr int64_t kStep = kChunkFrames;  // 30 s of frames per read
    const int64_t step = std::min(kStep, std::max<int64_t>(frames, 1));
    MelWork w(n_mels, step);
    std::vector<float> chunk, out(static_cast<size_t>(n_mels) * step);
    float max_log = -std::numeric_limits<float>::infinity();
    for (int64_t f0 = 0; f0 < frames; f0 += kStep) {
        const int64_t nf = std::min(kStep, frames - f0);
        int64_t c0 = 0, c1 = 0;
        frame_span(f0, nf, n, c0, c1);
        chunk.resize(static_cast<size_t>(c1 - c0));
        source.read(c0, c1 - c0, chunk.data());
        max_log = std::max(max_log, raw_frames(w, chunk, c0, n, f0, nf, out.data(), step, f0));
    }
    return max_log;
}

LogMel log_mel_window(AudioSource& source, int64_t frame_begin, int64_t n_frames, float max_log,
                      int n_mels) {
    const int64_t n = source.size();
    if (frame_begin < 0 || n_frames < 0 || frame_begin + n_frames > n / kHopLength) {
        throw Error("log-mel window of frames [" + std::to_string(frame_begin) + ", " +
                    std::to_string(frame_begin + n_frames) + ") outside the " +
                    std::to_string(n / kHopLength) + " frames of the audio");
    }
    MelWork w(n_mels, n_frames);
    LogMel out;
    out.n_mels = n_mels;
    out.n_frames = n_frames;
    out.data.resize(static_cast<size_t>(n_mels) * static_cast<size_t>(n_frames));
    if (n_frames == 0) return out;
    int64_t c0 = 0, c1 = 0;
    frame_span(frame_begin, n_frames, n, c0, c1);
    std::vector<float> chunk(static_cast<size_t>(c1 - c0));
    source.read(c0, c1 - c0, chunk.data());
    raw_frames(w, chunk, c0, n, frame_begin, n_frames, out.data.data(), n_frames, frame_begin);
    const float floor = max_log - 8.0f;
    for (float& v : out.data) v = (std::max(v, floor) + 4.0f) / 4.0f;
    return out;
}

}  // namespace sl::whisper
