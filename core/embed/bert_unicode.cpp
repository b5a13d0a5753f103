#include "core/embed/bert_unicode.h"

#include <algorithm>

namespace sl::bert_unicode {

using namespace detail;

Class classify(uint32_t cp) {
    const ClassRange* end = kClassRanges + kClassRangeCount;
    const ClassRange* it = std::upper_bound(
        kClassRanges, end, cp, [](uint32_t c, const ClassRange& r) { return c < r.first; });
    if (it == kClassRanges) return Class::Other;
    --it;
    return cp <= it->last ? it->klass : Class::Other;
}

bool is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int to_lower(uint32_t cp, uint32_t out[2]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> i + COMBINING DOT ABOVE
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    const LowerRun* end = kLower + kLowerCount;
    const LowerRun* it = std::upper_bound(
        kLower, end, cp, [](uint32_t c, const LowerRun& r) { return c < r.first; });
    out[0] = cp;
    if (it != kLower) {
        --it;
        if (cp <= it->last && (cp - it->first) % static_cast<uint32_t>(it->stride) == 0)
            out[0] = static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
    }
    return 1;
}

int strip_accents(uint32_t cp, uint32_t out[3]) {
    // Hangul syllables (Unicode 3.12): L V [T], all Lo, nothing to drop.
    constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
    constexpr uint32_t kTCount = 28, kNCount = 21 * 28, kSCount = 19 * kNCount;
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const uint32_t s = cp - kSBase;
        out[0] = kLBase + s / kNCount;
        out[1] = kVBase + (s % kNCount) / kTCount;
        if (s % kTCount == 0) return 2;
        out[2] = kTBase + s % kTCount;
        return 3;
    }
    if (cp >= 0xC0) {
        const StripEntry* end = kStrip + kStripCount;
        const StripEntry* it = std::lower_bound(
            kStrip, end, cp, [](const StripEntry& e, uint32_t c) { return e.cp < c; });
        if (it != end && it->cp == cp) {
            int n = 0;
            for (uint32_t v : {it->a, it->b, it->c})
                if (v) out[n++] = v;
            return n;
        }
    }
    if (classify(cp) == Class::Mark) return 0;
    out[0] = cp;
    return 1;
}

uint8_t combining_class(uint32_t cp) {
    for (size_t i = 0; i < kCccCount; ++i)
        if (kCcc[i].cp == cp) return kCcc[i].ccc;
    return 0;
}

}  // namespace sl::bert_unicode
