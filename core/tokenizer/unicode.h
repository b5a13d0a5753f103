// Code point classes and UTF-8 helpers for the tokenizers. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sl::unicode {

// The classes the pre-tokenizer patterns distinguish: \p{L}, \p{N}, \s, and everything else.
enum class CpClass : uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

// Class of code point `cp` (Unicode general categories L* / N*, the White_Space property).
CpClass cp_class(uint32_t cp);

// The case classes of the GPT-4o / o200k pattern (MiniMax-M2/M3): upper-case letters (Lu, Lt),
// lower-case letters (Ll), marks (Mn, Mc, Me; their cp_class is Other), and None for everything
// else, caseless letters (Lm, Lo) included.
enum class LetterCase : uint8_t { None = 0, Upper = 1, Lower = 2, Mark = 3 };
LetterCase letter_case(uint32_t cp);

// One decoded code point of a UTF-8 string.
struct Utf8Char {
    uint32_t cp;   // the code point, or kInvalid for a byte that starts no valid sequence
    uint32_t len;  // bytes consumed: 1..4 (an invalid byte is consumed alone)
};
inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;

// Decodes the sequence at s[pos] (pos < s.size()). Overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences give {kInvalid, 1}: the caller keeps the raw byte.
Utf8Char decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of `cp` (<= U+10FFFF) to `out`.
void append_utf8(std::string& out, uint32_t cp);

// Length of the longest prefix of `s` that does not end inside an incomplete but so far valid
// UTF-8 sequence. Streaming callers print s.substr(0, n) and keep the rest until more bytes come.
size_t utf8_complete_prefix(std::string_view s);

// `s` with every invalid byte replaced by U+FFFD, for display.
std::string utf8_sanitize(std::string_view s);

namespace detail {
struct CpRange {
    uint32_t first;
    uint32_t last;
    CpClass klass;
};
inline constexpr CpClass L = CpClass::Letter;
inline constexpr CpClass N = CpClass::Number;
inline constexpr CpClass S = CpClass::Space;
extern const CpRange kCpRanges[];
extern const size_t kCpRangeCount;
struct CaseRange {
    uint32_t first;
    uint32_t last;
    LetterCase lcase;
};
inline constexpr LetterCase U = LetterCase::Upper;
inline constexpr LetterCase W = LetterCase::Lower;
inline constexpr LetterCase M = LetterCase::Mark;
extern const CaseRange kCaseRanges[];  // unicode_case_tables.cpp
extern const size_t kCaseRangeCount;
}  // namespace detail

}  // namespace sl::unicode
