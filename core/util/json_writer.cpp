#include "core/util/json_writer.h"

#include <cmath>
#include <cstdio>

namespace sl {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is not one (a stray
// continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut off at the end).
size_t utf8_sequence(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3;
    else if (c >= 0xF0 && c <= 0xF4) n = 4;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k)
        if ((b(i + k) & 0xC0) != 0x80) return 0;
    const unsigned char d = b(i + 1);
    if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) return 0;
    return n;
}

}  // namespace

std::string json_quote(std::string_view s) {
    std::string o;
    o.reserve(s.size() + 2);
    o.push_back('"');
    for (size_t i = 0; i < s.size(); ++i) {
        const char ch = s[i];
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x80) {
            // JSON text is UTF-8: a byte that does not start a valid sequence (model text cut
            // inside a character) becomes U+FFFD.
            const size_t n = utf8_sequence(s, i);
            if (n == 0) {
                o += "\xEF\xBF\xBD";
            } else {
                o.append(s.substr(i, n));
                i += n - 1;
            }
            continue;
        }
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\r': o += "\\r"; break;
            case '\t': o += "\\t"; break;
            case '\b': o += "\\b"; break;
            case '\f': o += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    o += buf;
                } else {
                    o.push_back(ch);
                }
        }
    }
    o.push_back('"');
    return o;
}

void JsonWriter::sep() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!first_.empty()) {
        if (!first_.back()) out_.push_back(',');
        first_.back() = false;
    }
}

void JsonWriter::begin_object() {
    sep();
    out_.push_back('{');
    first_.push_back(true);
}

void JsonWriter::end_object() {
    out_.push_back('}');
    first_.pop_back();
}

void JsonWriter::begin_array() {
    sep();
    out_.push_back('[');
    first_.push_back(true);
}

void JsonWriter::end_array() {
    out_.push_back(']');
    first_.pop_back();
}

void JsonWriter::key(std::string_view k) {
    sep();
    out_ += json_quote(k);
    out_.push_back(':');
    after_key_ = true;
}

void JsonWriter::value(std::string_view s) {
    sep();
    out_ += json_quote(s);
}

void JsonWriter::value(double d) {
    sep();
    if (!std::isfinite(d)) d = 0;
    if (d == std::floor(d) && std::fabs(d) < 1e15) {
        out_ += std::to_string(static_cast<int64_t>(d));
        return;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    out_ += buf;
}

void JsonWriter::value(int64_t i) {
    sep();
    out_ += std::to_string(i);
}

void JsonWriter::value(bool b) {
    sep();
    out_ += b ? "true" : "false";
}

void JsonWriter::null() {
    sep();
    out_ += "null";
}

}  // namespace sl
