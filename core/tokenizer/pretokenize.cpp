#include "core/tokenizer/pretokenize.h"

#include <cstdint>

#include "core/tokenizer/unicode.h"

namespace sl {

namespace {

using unicode::CpClass;

// `text` decoded once: code point, class and byte offset of every character (plus an end offset),
// and with `with_case` the letter case of each (the o200k pattern).
struct Chars {
    std::vector<uint32_t> cp;
    std::vector<CpClass> cls;
    std::vector<unicode::LetterCase> lc;  // empty unless with_case
    std::vector<uint32_t> off;  // size() == cp.size() + 1

    explicit Chars(std::string_view text, bool with_case = false) {
        cp.reserve(text.size());
        cls.reserve(text.size());
        off.reserve(text.size() + 1);
        for (size_t pos = 0; pos < text.size();) {
            const unicode::Utf8Char c = unicode::decode_utf8(text, pos);
            cp.push_back(c.cp);
            cls.push_back(c.cp == unicode::kInvalid ? CpClass::Other : unicode::cp_class(c.cp));
            off.push_back(static_cast<uint32_t>(pos));
            pos += c.len;
        }
        off.push_back(static_cast<uint32_t>(text.size()));
        if (with_case) {
            lc.reserve(cp.size());
            for (uint32_t c : cp) lc.push_back(c == unicode::kInvalid ? unicode::LetterCase::None : unicode::letter_case(c));
        }
    }
};

bool is_nl(uint32_t c) {
    return c == '\r' || c == '\n';
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at i, or 0. i is an apostrophe.
size_t contraction(const Chars& ch, size_t i, size_t e, bool ignore_case) {
    auto at = [&](size_t k) -> uint32_t {
        const uint32_t c = ch.cp[k];
        return (ignore_case && c >= 'A' && c <= 'Z') ? c + 32 : c;
    };
    if (i + 1 >= e) return 0;
    const uint32_t c1 = at(i + 1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= e) return 0;
    const uint32_t c2 = at(i + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// End of the run of class `k` that starts at i.
size_t run_end(const Chars& ch, size_t i, size_t e, CpClass k) {
    while (i < e && ch.cls[i] == k) ++i;
    return i;
}

// \s+(?!\S)|\s+ at a white-space character i: the run, less its last character when more
// characters follow and the run is longer than one (that one joins the next word).
size_t space_run(const Chars& ch, size_t i, size_t e) {
    size_t j = run_end(ch, i, e, CpClass::Space);
    if (j < e && j - i > 1) --j;
    return j;
}

// The GPT-2 pattern over characters [b, e); calls emit(i, j) for each word.
template <class Emit>
void split_gpt2(const Chars& ch, size_t b, size_t e, Emit&& emit) {
    for (size_t i = b; i < e;) {
        const uint32_t c = ch.cp[i];
        const CpClass k = ch.cls[i];
        size_t j;
        if (c == '\'' && (j = contraction(ch, i, e, false)) != 0) {
            j += i;
        } else if (k == CpClass::Letter || k == CpClass::Number || k == CpClass::Other) {
            j = run_end(ch, i, e, k);
        } else if (c == ' ' && i + 1 < e && ch.cls[i + 1] != CpClass::Space) {
            j = run_end(ch, i + 1, e, ch.cls[i + 1]);  // ' ?X+' with its leading space
        } else {
            j = space_run(ch, i, e);
        }
        emit(i, j);
        i = j;
    }
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at a white-space character i: after the run's last newline when it
// has one, else as space_run.
size_t whitespace_end(const Chars& ch, size_t i, size_t e) {
    const size_t run = run_end(ch, i, e, CpClass::Space);
    for (size_t p = run; p > i; --p)
        if (is_nl(ch.cp[p - 1])) return p;
    return space_run(ch, i, e);
}

// The Llama 3 pattern (max_digits 3) or Qwen2's (max_digits 1) over characters [b, e).
template <class Emit>
void split_llama3(const Chars& ch, size_t b, size_t e, size_t max_digits, Emit&& emit) {
    for (size_t i = b; i < e;) {
        const uint32_t c = ch.cp[i];
        const CpClass k = ch.cls[i];
        size_t j;
        if (c == '\'' && (j = contraction(ch, i, e, true)) != 0) {
            j += i;
        } else if (k == CpClass::Letter) {
            j = run_end(ch, i, e, k);
        } else if (k != CpClass::Number && !is_nl(c) && i + 1 < e &&
                   ch.cls[i + 1] == CpClass::Letter) {
            j = run_end(ch, i + 1, e, CpClass::Letter);  // [^\r\n\p{L}\p{N}]?\p{L}+
        } else if (k == CpClass::Number) {
            j = i;
            while (j < e && j - i < max_digits && ch.cls[j] == CpClass::Number) ++j;
        } else if (k == CpClass::Other ||
                   (c == ' ' && i + 1 < e && ch.cls[i + 1] == CpClass::Other)) {
            j = run_end(ch, c == ' ' ? i + 1 : i, e, CpClass::Other);  //  ?[^\s\p{L}\p{N}]+
            while (j < e && is_nl(ch.cp[j])) ++j;                      // [\r\n]*
        } else {
            j = whitespace_end(ch, i, e);
        }
        emit(i, j);
        i = j;
    }
}

// The o200k pattern over characters [b, e) (Chars built with_case).
template <class Emit>
void split_o200k(const Chars& ch, size_t b, size_t e, Emit&& emit) {
    using unicode::LetterCase;
    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]: letters but lower-case ones, and marks.
    auto upperish = [&](size_t k) {
        return ch.lc[k] == LetterCase::Mark || (ch.cls[k] == CpClass::Letter && ch.lc[k] != LetterCase::Lower);
    };
    // [\p{Ll}\p{Lm}\p{Lo}\p{M}]: letters but upper- and title-case ones, and marks.
    auto lowerish = [&](size_t k) {
        return ch.lc[k] == LetterCase::Mark || (ch.cls[k] == CpClass::Letter && ch.lc[k] != LetterCase::Upper);
    };
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)? after a word ending at m.
    auto with_contraction = [&](size_t m) {
        if (m < e && ch.cp[m] == '\'') m += contraction(ch, m, e, true);
        return m;
    };
    constexpr size_t kNone = static_cast<size_t>(-1);
    // Alternative 1 at s: [upper]*[lower]+, the upper run given back one character at a time
    // (backtracking) until a lower-ish character can start the second part.
    auto cased_lower = [&](size_t s) -> size_t {
        size_t a = s;
        while (a < e && upperish(a)) ++a;
        for (size_t k = a;; --k) {
            if (k < e && lowerish(k)) {
                size_t m = k;
                while (m < e && lowerish(m)) ++m;
                return with_contraction(m);
            }
            if (k == s) return kNone;
        }
    };
    // Alternative 2 at s: [upper]+[lower]*.
    auto cased_upper = [&](size_t s) -> size_t {
        size_t a = s;
        while (a < e && upperish(a)) ++a;
        if (a == s) return kNone;
        while (a < e && lowerish(a)) ++a;
        return with_contraction(a);
    };
    for (size_t i = b; i < e;) {
        const uint32_t c = ch.cp[i];
        const CpClass k = ch.cls[i];
        // [^\r\n\p{L}\p{N}]? in front of either word alternative: tried with it, then without.
        const bool prefix = k != CpClass::Letter && k != CpClass::Number && !is_nl(c) && i + 1 < e;
        size_t j = kNone;
        if (prefix) j = cased_lower(i + 1);
        if (j == kNone) j = cased_lower(i);
        if (j == kNone && prefix) j = cased_upper(i + 1);
        if (j == kNone) j = cased_upper(i);
        if (j == kNone) {
            auto other = [&](size_t q) {
                return ch.cls[q] != CpClass::Letter && ch.cls[q] != CpClass::Number && ch.cls[q] != CpClass::Space;
            };
            if (k == CpClass::Number) {
                j = i;
                while (j < e && j - i < 3 && ch.cls[j] == CpClass::Number) ++j;  // \p{N}{1,3}
            } else if (other(i) || (c == ' ' && i + 1 < e && other(i + 1))) {
                j = c == ' ' ? i + 1 : i;  //  ?[^\s\p{L}\p{N}]+[\r\n/]*
                while (j < e && other(j)) ++j;
                while (j < e && (is_nl(ch.cp[j]) || ch.cp[j] == '/')) ++j;
            } else {
                j = whitespace_end(ch, i, e);
            }
        }
        emit(i, j);
        i = j;
    }
}

}  // namespace

void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words) {
    if (text.empty()) return;
    const Chars ch(text, kind == PreTokenizer::O200k);
    const size_t n = ch.cp.size();
    auto emit = [&](size_t i, size_t j) {
        words.push_back(text.substr(ch.off[i], ch.off[j] - ch.off[i]));
    };
    switch (kind) {
        case PreTokenizer::Gpt2:
            split_gpt2(ch, 0, n, emit);
            break;
        case PreTokenizer::DigitsGpt2:
            for (size_t i = 0; i < n;) {
                if (ch.cls[i] == CpClass::Number) {
                    emit(i, i + 1);
                    ++i;
                    continue;
                }
                size_t j = i;
                while (j < n && ch.cls[j] != CpClass::Number) ++j;
                split_gpt2(ch, i, j, emit);
                i = j;
            }
            break;
        case PreTokenizer::Llama3:
            split_llama3(ch, 0, n, 3, emit);
            break;
        case PreTokenizer::Qwen2:
            split_llama3(ch, 0, n, 1, emit);
            break;
        case PreTokenizer::O200k:
            split_o200k(ch, 0, n, emit);
            break;
    }
}

}  // namespace sl
