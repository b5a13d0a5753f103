// Unicode data of BERT's uncased text normalizer (core/embed/wordpiece_tokenizer.h): code point
// classes, per-code-point lowercase, NFD with the nonspacing marks dropped ("strip accents"), and
// the CJK ranges that are split into single-character words. Pure functions; thread-safe.
//
// The tables come from Python's unicodedata (tests/reference/embed/gen_bert_unicode_tables.py,
// Unicode 14). Hugging Face tokenizers takes categories and case from older or newer Unicode
// versions (its crates differ); the normalizers agree on every code point except 454 rare ones
// (marks, format characters and case pairs of recent scripts): tst_wordpiece_hf sweeps them all.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::bert_unicode {

enum class Class : uint8_t {
    Other = 0,
    Remove,  // dropped by clean-text: controls other than \t \n \r, Cf, Co, Cs, U+0000, U+FFFD
    Space,   // \t \n \r and the White_Space property: becomes ' ', splits words
    Punct,   // ASCII punctuation or Unicode P*: a word of its own
    Mark,    // Mn: dropped after NFD when accents are stripped
};

Class classify(uint32_t cp);

// BERT's "Chinese character" ranges (CJK ideographs), each made a word of its own. The ranges are
// Hugging Face tokenizers' (its third supplementary range starts at U+2B920, not U+2B820).
bool is_cjk(uint32_t cp);

// Appends the lowercase of `cp` (one code point, or two for U+0130) to out; returns the count.
int to_lower(uint32_t cp, uint32_t out[2]);

// NFD(cp) without its Mn marks: writes up to 3 code points to out and returns how many (0 when
// the code point is only a mark; 1 with out[0] == cp when nothing changes). Hangul syllables
// decompose algorithmically into 2 or 3 jamo.
int strip_accents(uint32_t cp, uint32_t out[3]);

// Canonical combining class for code points that survive strip_accents (0 for nearly all).
uint8_t combining_class(uint32_t cp);

namespace detail {
inline constexpr Class R = Class::Remove;
inline constexpr Class S = Class::Space;
inline constexpr Class P = Class::Punct;
inline constexpr Class M = Class::Mark;
struct ClassRange {
    uint32_t first, last;
    Class klass;
};
struct LowerRun {
    uint32_t first, last;
    int32_t stride, delta;
};
struct StripEntry {
    uint32_t cp, a, b, c;
};
struct CccEntry {
    uint32_t cp;
    uint8_t ccc;
};
extern const ClassRange kClassRanges[];
extern const size_t kClassRangeCount;
extern const LowerRun kLower[];
extern const size_t kLowerCount;
extern const StripEntry kStrip[];
extern const size_t kStripCount;
extern const CccEntry kCcc[];
extern const size_t kCccCount;
}  // namespace detail

}  // namespace sl::bert_unicode
