#include "core/util/json_writer.h"

#include <cmath>
#include <cstdio>

namespace sl {

std::string json_quote(std::string_view s) {
    std::string o;
    o.reserve(s.size() + 2);
    o.push_back('"');
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
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
