#include "core/whisper/log_mel.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

LogMel log_mel_spectrogram(std::span<const float> audio, int n_mels) {
    const std::vector<float> filters = mel_filters(n_mels);
    std::vector<float> packed_filters(kernels::packed_size(n_mels, kNBins));
    kernels::pack_panels(filters.data(), n_mels, kNBins, packed_filters.data());
    const std::vector<float>& dft = packed_dft();

    LogMel out;
    out.n_mels = n_mels;
    const auto n = static_cast<int64_t>(audio.size());
    out.n_frames = n / kHopLength;
    out.data.resize(static_cast<size_t>(n_mels) * static_cast<size_t>(out.n_frames));
    if (out.n_frames == 0) return out;

    // Scratch for one block of frames.
    std::vector<float> frames(static_cast<size_t>(kBlockFrames) * kNFft);       // (B, kNFft)
    std::vector<float> spectrum(static_cast<size_t>(kBlockFrames) * kDftCols);  // (B, kDftCols)
    std::vector<float> power(static_cast<size_t>(kBlockFrames) * kNBins);       // (B, kNBins)
    std::vector<float> mel(static_cast<size_t>(kBlockFrames) * n_mels);         // (B, n_mels)

    float max_log = -std::numeric_limits<float>::infinity();
    for (int64_t t0 = 0; t0 < out.n_frames; t0 += kBlockFrames) {
        const int64_t nb = std::min(kBlockFrames, out.n_frames - t0);
        for (int64_t b = 0; b < nb; ++b) {
            float* row = frames.data() + b * kNFft;
            const int64_t start = (t0 + b) * kHopLength - kPad;
            if (start >= 0 && start + kNFft <= n) {
                std::copy_n(audio.data() + start, kNFft, row);
            } else {
                for (int k = 0; k < kNFft; ++k)
                    row[k] = audio[static_cast<size_t>(mirror(start + k, n))];
            }
        }
        kernels::gemm_f32(frames.data(), kNFft, nb, kNFft, dft.data(), kDftCols, nullptr,
                          spectrum.data(), kDftCols, 0, kDftCols);
        for (int64_t b = 0; b < nb; ++b) {
            const float* s = spectrum.data() + b * kDftCols;
            float* p = power.data() + b * kNBins;
            for (int j = 0; j < kNBins; ++j)
                p[j] = s[2 * j] * s[2 * j] + s[2 * j + 1] * s[2 * j + 1];
        }
        kernels::gemm_f32(power.data(), kNBins, nb, kNBins, packed_filters.data(), n_mels, nullptr,
                          mel.data(), n_mels, 0, n_mels);
        for (int64_t b = 0; b < nb; ++b) {
            for (int m = 0; m < n_mels; ++m) {
                const float v =
                    std::log10(std::max(mel[static_cast<size_t>(b * n_mels + m)], 1e-10f));
                out.data[static_cast<size_t>(m * out.n_frames + t0 + b)] = v;
                max_log = std::max(max_log, v);
            }
        }
    }
    const float floor = max_log - 8.0f;
    for (float& v : out.data) v = (std::max(v, floor) + 4.0f) / 4.0f;
    return out;
}

}  // namespace sl::whisper
