#include "core/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace sl::unicode {

namespace {

// Classes of the first 256 code points, looked up without a search (most text is here).
const std::array<CpClass, 256> kLatin1 = [] {
    std::array<CpClass, 256> t{};
    for (size_t i = 0; i < detail::kCpRangeCount && detail::kCpRanges[i].first < 256; ++i) {
        const auto& r = detail::kCpRanges[i];
        for (uint32_t c = r.first; c <= r.last && c < 256; ++c) t[c] = r.klass;
    }
    return t;
}();

}  // namespace

CpClass cp_class(uint32_t cp) {
    if (cp < 256) return kLatin1[cp];
    if (cp > 0x10FFFF) return CpClass::Other;
    const auto* end = detail::kCpRanges + detail::kCpRangeCount;
    // First range whose last >= cp.
    const auto* it =
        std::lower_bound(detail::kCpRanges, end, cp,
                         [](const detail::CpRange& r, uint32_t c) { return r.last < c; });
    return (it != end && it->first <= cp) ? it->klass : CpClass::Other;
}

LetterCase letter_case(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? LetterCase::Upper : cp >= 'a' && cp <= 'z' ? LetterCase::Lower : LetterCase::None;
    if (cp > 0x10FFFF) return LetterCase::None;
    const auto* end = detail::kCaseRanges + detail::kCaseRangeCount;
    const auto* it = std::lower_bound(detail::kCaseRanges, end, cp,
                                      [](const detail::CaseRange& r, uint32_t c) { return r.last < c; });
    return (it != end && it->first <= cp) ? it->lcase : LetterCase::None;
}

Utf8Char decode_utf8(std::string_view s, size_t pos) {
    const auto b0 = static_cast<uint8_t>(s[pos]);
    if (b0 < 0x80) return {b0, 1};
    uint32_t len;
    uint32_t cp;
    uint32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2, cp = b0 & 0x1Fu, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, cp = b0 & 0x0Fu, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4, cp = b0 & 0x07u, min = 0x10000;
    } else {
        return {kInvalid, 1};
    }
    if (pos + len > s.size()) return {kInvalid, 1};
    for (uint32_t i = 1; i < len; ++i) {
        const auto b = static_cast<uint8_t>(s[pos + i]);
        if ((b & 0xC0) != 0x80) return {kInvalid, 1};
        cp = (cp << 6) | (b & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalid, 1};
    return {cp, len};
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

size_t utf8_complete_prefix(std::string_view s) {
    // Look back at most 3 bytes for the lead byte of a sequence that runs past the end.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto b = static_cast<uint8_t>(s[n - back]);
        if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        uint32_t need = 0;
        if ((b & 0xE0) == 0xC0)
            need = 2;
        else if ((b & 0xF0) == 0xE0)
            need = 3;
        else if ((b & 0xF8) == 0xF0)
            need = 4;
        return (need > back) ? n - back : n;
    }
    return n;
}

std::string utf8_sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        const Utf8Char c = decode_utf8(s, pos);
        if (c.cp == kInvalid)
            append_utf8(out, 0xFFFD);
        else
            out.append(s.substr(pos, c.len));
        pos += c.len;
    }
    return out;
}

}  // namespace sl::unicode
