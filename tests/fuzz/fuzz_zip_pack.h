// For the zip-based fuzz targets: "MAGC\n@@ name\nbytes\n@@ name\nbytes..." (any 4-byte magic)
// packed into a zip of stored entries with correct CRCs, so that mutations of the parts reach the
// XML parsers instead of failing libzip's CRC check.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sl::fuzz {

inline uint32_t crc32(std::string_view s) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t crc = ~0u;
    for (const char ch : s) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

inline void put16(std::string& b, uint32_t v) {
    b += static_cast<char>(v & 0xFF);
    b += static_cast<char>((v >> 8) & 0xFF);
}
inline void put32(std::string& b, uint32_t v) {
    put16(b, v & 0xFFFF);
    put16(b, v >> 16);
}

inline std::string pack_parts(std::string_view in) {
    struct Part {
        std::string_view name, data;
    };
    std::vector<Part> parts;
    constexpr std::string_view sep = "\n@@ ";
    size_t pos = in.find(sep);
    while (pos != std::string_view::npos && parts.size() < 4096) {
        const size_t name_start = pos + sep.size();
        const size_t name_end = in.find('\n', name_start);
        if (name_end == std::string_view::npos) break;
        const size_t next = in.find(sep, name_end);
        const size_t data_end = next == std::string_view::npos ? in.size() : next;
        parts.push_back({in.substr(name_start, name_end - name_start), in.substr(name_end + 1, data_end - name_end - 1)});
        pos = next;
    }
    std::string out, central;
    for (const Part& p : parts) {
        const auto offset = static_cast<uint32_t>(out.size());
        const uint32_t crc = crc32(p.data);
        for (int local = 1; local >= 0; --local) {
            std::string& b = local ? out : central;
            put32(b, local ? 0x04034b50u : 0x02014b50u);
            if (!local) put16(b, 20);
            put16(b, 20);
            put16(b, 0);
            put16(b, 0);  // stored
            put16(b, 0);
            put16(b, 0x21);
            put32(b, crc);
            put32(b, static_cast<uint32_t>(p.data.size()));
            put32(b, static_cast<uint32_t>(p.data.size()));
            put16(b, static_cast<uint32_t>(p.name.size()));
            put16(b, 0);
            if (!local) {
                put16(b, 0);
                put16(b, 0);
                put16(b, 0);
                put32(b, 0);
                put32(b, offset);
            }
            b += p.name;
            if (local) b += p.data;
        }
    }
    const auto cd_offset = static_cast<uint32_t>(out.size());
    out += central;
    put32(out, 0x06054b50u);
    put16(out, 0);
    put16(out, 0);
    put16(out, static_cast<uint32_t>(parts.size()));
    put16(out, static_cast<uint32_t>(parts.size()));
    put32(out, static_cast<uint32_t>(central.size()));
    put32(out, cd_offset);
    put16(out, 0);
    return out;
}

}  // namespace sl::fuzz
