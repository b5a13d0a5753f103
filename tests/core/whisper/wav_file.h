// Reads the LibriVox clips of pocketsphinx-testdata (16 kHz mono PCM16 WAV) for the Whisper tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace sl::test {

// The samples of a 16 kHz mono PCM16 WAV as floats in [-1, 1); empty when it is not one.
inline std::vector<float> read_wav_16k_mono(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto u32 = [&](size_t at) {
        uint32_t v = 0;
        std::memcpy(&v, b.data() + at, 4);
        return v;
    };
    auto u16 = [&](size_t at) {
        uint16_t v = 0;
        std::memcpy(&v, b.data() + at, 2);
        return v;
    };
    if (b.size() < 12 || std::memcmp(b.data(), "RIFF", 4) != 0 ||
        std::memcmp(b.data() + 8, "WAVE", 4) != 0)
        return {};
    bool pcm16_mono_16k = false;
    for (size_t at = 12; at + 8 <= b.size();) {
        const uint32_t len = u32(at + 4);
        if (std::memcmp(b.data() + at, "fmt ", 4) == 0 && at + 24 <= b.size())
            pcm16_mono_16k = u16(at + 8) == 1 && u16(at + 10) == 1 && u32(at + 12) == 16000 &&
                             u16(at + 22) == 16;
        if (std::memcmp(b.data() + at, "data", 4) == 0 && pcm16_mono_16k) {
            const size_t n = std::min<size_t>(len, b.size() - at - 8) / 2;
            std::vector<float> out(n);
            for (size_t i = 0; i < n; ++i)
                out[i] = static_cast<int16_t>(u16(at + 8 + 2 * i)) / 32768.0f;
            return out;
        }
        at += 8 + len + (len & 1);
    }
    return {};
}

}  // namespace sl::test
