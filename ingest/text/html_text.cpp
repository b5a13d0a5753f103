#include "ingest/text/html_text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace sl::ingest::text {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == ':' ||
           c == '_';
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
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

// Case-insensitive find of `needle` (lowercase) in `s` from `from`.
size_t ifind(std::string_view s, std::string_view needle, size_t from) {
    if (needle.empty() || s.size() < needle.size()) return std::string_view::npos;
    for (size_t i = from; i + needle.size() <= s.size(); ++i) {
        size_t k = 0;
        while (k < needle.size() && lower(s[i + k]) == needle[k]) ++k;
        if (k == needle.size()) return i;
    }
    return std::string_view::npos;
}

// Elements whose content is not text for a reader.
bool dropped(std::string_view n) {
    static constexpr std::array<std::string_view, 8> k = {"script", "style", "template", "noscript",
                                                          "svg",    "math",  "head",     "object"};
    return std::find(k.begin(), k.end(), n) != k.end();
}

// Elements that end a paragraph where they start or end.
bool block_element(std::string_view n) {
    static constexpr std::array<std::string_view, 32> k = {
        "p",       "div",    "br",      "li",     "ul",     "ol",       "tr",     "table",
        "section", "article", "blockquote", "pre", "header", "footer",  "nav",    "aside",
        "dd",      "dt",     "dl",      "figure", "figcaption", "hr",   "body",   "main",
        "address", "caption", "tbody",  "thead",  "tfoot",  "details",  "summary", "html"};
    return std::find(k.begin(), k.end(), n) != k.end();
}

struct Entity {
    std::string_view name;
    uint32_t cp;
};
constexpr std::array<Entity, 24> kEntities = {{
    {"amp", '&'},      {"lt", '<'},       {"gt", '>'},       {"quot", '"'},     {"apos", '\''},
    {"nbsp", 0xA0},    {"ndash", 0x2013}, {"mdash", 0x2014}, {"hellip", 0x2026}, {"lsquo", 0x2018},
    {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D}, {"copy", 0xA9},    {"reg", 0xAE},
    {"trade", 0x2122}, {"euro", 0x20AC},  {"pound", 0xA3},   {"sect", 0xA7},    {"deg", 0xB0},
    {"times", 0xD7},   {"middot", 0xB7},  {"laquo", 0xAB},   {"raquo", 0xBB},
}};

}  // namespace

size_t decode_entity(std::string_view s, size_t i, std::string& out) {
    // Bounded look-ahead: a text full of '&' without ';' stays linear.
    const size_t semi = s.substr(0, std::min(s.size(), i + 32)).find(';', i + 1);
    if (semi == std::string_view::npos || semi == i + 1) return i;
    const std::string_view body = s.substr(i + 1, semi - i - 1);
    if (body[0] == '#') {
        uint32_t cp = 0;
        const bool hex = body.size() > 1 && (body[1] == 'x' || body[1] == 'X');
        const std::string_view digits = body.substr(hex ? 2 : 1);
        if (digits.empty()) return i;
        for (const char c : digits) {
            uint32_t d = 0;
            if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
            else if (hex && lower(c) >= 'a' && lower(c) <= 'f') d = static_cast<uint32_t>(lower(c) - 'a' + 10);
            else return i;
            cp = cp * (hex ? 16 : 10) + d;
            if (cp > 0x10FFFF) cp = 0x110000;  // stays invalid, never overflows
        }
        append_utf8(out, cp);
        return semi + 1;
    }
    for (const Entity& e : kEntities) {
        if (e.name == body) {
            append_utf8(out, e.cp);
            return semi + 1;
        }
    }
    return i;
}

HtmlText html_to_sections(std::string_view s, SectionBuilder& out) {
    HtmlText result;
    std::string para;
    int heading = 0;    // 1..6 inside <hN>
    int cell = 0;       // open td/th
    bool in_title = false;
    std::string title;
    auto flush = [&] {
        const std::string t = collapse_spaces(para);
        para.clear();
        if (t.empty()) return;
        if (heading > 0) out.heading(t, heading);
        else out.block(cell > 0 ? doc::BlockRole::TableCell : doc::BlockRole::Body, t);
    };

    size_t i = 0;
    while (i < s.size()) {
        const char c = s[i];
        if (c == '&') {
            std::string& sink = in_title ? title : para;
            const size_t next = decode_entity(s, i, sink);
            if (next == i) sink += '&', ++i;
            else i = next;
            continue;
        }
        if (c != '<') {
            (in_title ? title : para) += c;
            ++i;
            continue;
        }
        // Markup.
        if (s.compare(i, 4, "<!--") == 0) {
            const size_t end = s.find("-->", i + 4);
            i = end == std::string_view::npos ? s.size() : end + 3;
            continue;
        }
        if (s.compare(i, 9, "<![CDATA[") == 0) {
            const size_t end = s.find("]]>", i + 9);
            const size_t stop = end == std::string_view::npos ? s.size() : end;
            para.append(s.substr(i + 9, stop - i - 9));
            i = end == std::string_view::npos ? s.size() : end + 3;
            continue;
        }
        if (i + 1 < s.size() && (s[i + 1] == '!' || s[i + 1] == '?')) {
            const size_t end = s.find('>', i + 2);
            i = end == std::string_view::npos ? s.size() : end + 1;
            continue;
        }
        size_t j = i + 1;
        const bool closing = j < s.size() && s[j] == '/';
        if (closing) ++j;
        const size_t name_start = j;
        // A tag name starts with a letter; "<3" or "< b" is text.
        const bool letter = j < s.size() && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z'));
        while (letter && j < s.size() && name_char(s[j])) ++j;
        if (j == name_start) {  // a '<' that starts no tag: literal text
            (in_title ? title : para) += '<';
            ++i;
            continue;
        }
        std::string name(s.substr(name_start, j - name_start));
        for (char& ch : name) ch = lower(ch);
        if (const size_t colon = name.rfind(':'); colon != std::string::npos) name.erase(0, colon + 1);
        // The end of the tag, skipping quoted attribute values.
        char quote = 0;
        while (j < s.size() && (quote || s[j] != '>')) {
            if (quote && s[j] == quote) quote = 0;
            else if (!quote && (s[j] == '"' || s[j] == '\'')) quote = s[j];
            ++j;
        }
        const bool self_closing = j > 0 && j < s.size() && s[j - 1] == '/';
        i = j < s.size() ? j + 1 : s.size();

        if (name == "title" && !closing) {
            in_title = !self_closing;
            continue;
        }
        if (name == "title" && closing) {
            in_title = false;
            if (result.title.empty()) result.title = collapse_spaces(title);
            continue;
        }
        if (!closing && !self_closing && dropped(name)) {
            // Skip to the matching end tag (not nested: script and style cannot nest); <head> is
            // skipped too, except its <title>, read above when it comes first.
            if (name == "head") {
                // Searches stay within this head, so many heads keep the scan linear.
                const size_t end = ifind(s, "</head", i);
                const std::string_view head = s.substr(0, end == std::string_view::npos ? s.size() : end);
                const size_t t = ifind(head, "<title", i);
                if (t != std::string_view::npos) {
                    const size_t gt = head.find('>', t);
                    const size_t te = ifind(head, "</title", t);
                    if (gt != std::string_view::npos && te != std::string_view::npos && gt < te) {
                        std::string raw;
                        for (size_t k = gt + 1; k < te;) {
                            if (s[k] == '&') {
                                const size_t next = decode_entity(s, k, raw);
                                if (next != k) {
                                    k = next;
                                    continue;
                                }
                            }
                            raw += s[k++];
                        }
                        if (result.title.empty()) result.title = collapse_spaces(raw);
                    }
                }
            }
            const std::string end_tag = "</" + name;
            const size_t end = ifind(s, end_tag, i);
            if (end == std::string_view::npos) {
                i = s.size();
            } else {
                const size_t gt = s.find('>', end);
                i = gt == std::string_view::npos ? s.size() : gt + 1;
            }
            continue;
        }
        if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') {
            flush();
            heading = closing ? 0 : name[1] - '0';
            continue;
        }
        if (name == "td" || name == "th") {
            flush();
            cell = closing ? std::max(0, cell - 1) : (self_closing ? cell : std::min(cell + 1, 1 << 20));
            continue;
        }
        if (block_element(name)) {
            flush();
            if (name == "table" || name == "tr") cell = 0;
            continue;
        }
        // Inline elements (a, b, em, span...) separate nothing; an image says what it shows
        // only through alt text, which we leave out.
    }
    if (in_title && result.title.empty()) result.title = collapse_spaces(title);
    flush();
    return result;
}

}  // namespace sl::ingest::text
