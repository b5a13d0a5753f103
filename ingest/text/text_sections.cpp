#include "ingest/text/text_sections.h"

#include <utility>

namespace sl::ingest::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t valid_sequence(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    if (c < 0x80) return 1;
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(k) & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

std::string repair_utf8(std::string_view s, size_t* replaced) {
    std::string out;
    out.reserve(s.size());
    size_t bad = 0;
    for (size_t i = 0; i < s.size();) {
        const size_t n = valid_sequence(s, i);
        if (n == 0) {
            out += kReplacement;
            ++bad;
            ++i;
            // One replacement per maximal run of stray continuation bytes.
            while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
            continue;
        }
        if (!(n == 1 && s[i] == '\0')) out.append(s.substr(i, n));
        i += n;
    }
    if (replaced) *replaced = bad;
    return out;
}

std::string collapse_spaces(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool space = false;
    for (const char c : s) {
        if (is_space(c)) {
            space = !out.empty();
            continue;
        }
        if (space) out += ' ';
        space = false;
        out += c;
    }
    return out;
}

std::string truncate_utf8(std::string_view s, size_t max_bytes) {
    if (s.size() <= max_bytes) return std::string(s);
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    return std::string(s.substr(0, cut)) + "\xE2\x80\xA6";
}

std::string sections_done(size_t n) {
    std::string s = std::to_string(n);
    s += n == 1 ? " section" : " sections";
    return s;
}

void SectionBuilder::open(const std::string& label) {
    doc::Unit u;
    u.kind = doc::UnitKind::Section;
    u.index = static_cast<int>(units_.size());
    u.label = label;
    units_.push_back(std::move(u));
    open_ = true;
    chars_ = 0;
}

void SectionBuilder::heading(const std::string& raw, int level) {
    const std::string text = collapse_spaces(raw);
    if (text.empty()) return;
    if (first_heading_.empty()) first_heading_ = text;
    if (level >= 1 && level <= kSectionHeadingLevel) {
        // A heading right after another one at the top of an empty section shares it.
        if (!(open_ && units_.back().blocks.empty())) open(truncate_utf8(text, kLabelBytes));
        else if (units_.back().label.empty()) units_.back().label = truncate_utf8(text, kLabelBytes);
        label_ = units_.back().label;
    }
    block(doc::BlockRole::Title, text);
}

void SectionBuilder::block(doc::BlockRole role, const std::string& text) {
    if (text.empty()) return;
    if (!open_) open(label_.empty() ? std::string() : label_ + " (cont.)");
    else if (chars_ >= kSectionChars && role != doc::BlockRole::Note)
        open(label_.empty() ? std::string() : truncate_utf8(label_, kLabelBytes) + " (cont.)");
    doc::Block b;
    b.role = role;
    b.text = text;
    chars_ += text.size();
    units_.back().blocks.push_back(std::move(b));
}

void SectionBuilder::break_section() {
    open_ = false;
    label_.clear();
}

std::vector<doc::Unit> SectionBuilder::take() {
    std::vector<doc::Unit> out;
    out.reserve(units_.size());
    for (doc::Unit& u : units_) {
        if (u.blocks.empty()) continue;
        u.index = static_cast<int>(out.size());
        out.push_back(std::move(u));
    }
    units_.clear();
    open_ = false;
    return out;
}

}  // namespace sl::ingest::text
