#include "core/ask/visual_cache.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "kernels/cpu/convert.h"

namespace sl {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'V', 'E', 'M', 'B', '1', '\n'};

std::string prefix(const std::string& s, size_t n) {
    std::string out;
    for (char c : s.substr(0, n)) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return out.empty() ? "none" : out;
}

}  // namespace

std::filesystem::path VisualCache::path(const VisualKey& k) const {
    return dir_ / (prefix(k.tower, 16) + "-" + prefix(k.document, 24) + "-" + std::to_string(k.unit) + "-" +
                   std::to_string(k.visual) + "-" + std::to_string(k.width) + "x" + std::to_string(k.height) + "-" +
                   std::to_string(k.edge) + ".vemb");
}

void VisualCache::round_to_f16(std::vector<float>& data) {
    for (float& x : data) x = kernels::f16_to_f32(kernels::f32_to_f16(x));
}

std::optional<std::vector<float>> VisualCache::load(const VisualKey& key, int64_t rows, int width) const {
    if (rows <= 0 || width <= 0) return std::nullopt;
    std::ifstream in(path(key), std::ios::binary);
    if (!in) return std::nullopt;
    char magic[8] = {};
    uint32_t r = 0, w = 0;
    in.read(magic, 8);
    in.read(reinterpret_cast<char*>(&r), 4);
    in.read(reinterpret_cast<char*>(&w), 4);
    if (!in || std::memcmp(magic, kMagic, 8) != 0 || r != static_cast<uint64_t>(rows) || w != static_cast<uint32_t>(width))
        return std::nullopt;
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(width);
    std::vector<uint16_t> half(n);
    in.read(reinterpret_cast<char*>(half.data()), static_cast<std::streamsize>(n * 2));
    if (in.gcount() != static_cast<std::streamsize>(n * 2)) return std::nullopt;
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = kernels::f16_to_f32(half[i]);
    return out;
}

void VisualCache::store(const VisualKey& key, const std::vector<float>& data, int width) const {
    if (width <= 0 || data.empty() || data.size() % static_cast<size_t>(width) != 0) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const auto dst = path(key);
    const auto tmp = dst.string() + ".tmp";
    {
        std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
        if (!o) return;
        const uint32_t r = static_cast<uint32_t>(data.size() / static_cast<size_t>(width)), w = static_cast<uint32_t>(width);
        o.write(kMagic, 8);
        o.write(reinterpret_cast<const char*>(&r), 4);
        o.write(reinterpret_cast<const char*>(&w), 4);
        std::vector<uint16_t> half(data.size());
        for (size_t i = 0; i < data.size(); ++i) half[i] = kernels::f32_to_f16(data[i]);
        o.write(reinterpret_cast<const char*>(half.data()), static_cast<std::streamsize>(half.size() * 2));
        if (!o) {
            o.close();
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, dst, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace sl
