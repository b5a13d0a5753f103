#include "core/embed/json.h"

#include <charconv>
#include <fstream>

#include "core/tokenizer/unicode.h"
#include "core/util/error.h"

namespace sl {

namespace {
constexpr int kMaxDepth = 64;
}

class JsonParser {
public:
    JsonParser(std::string_view s, const std::string& origin) : s_(s), origin_(origin) {}

    JsonValue document() {
        JsonValue v = value(0);
        skip_ws();
        if (pos_ != s_.size()) fail("unexpected bytes after the value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw FormatError(origin_ + ": JSON at byte " + std::to_string(pos_) + ": " + what);
    }

    void skip_ws() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }

    char peek() {
        if (pos_ >= s_.size()) fail("unexpected end");
        return s_[pos_];
    }

    void expect(std::string_view word) {
        if (s_.substr(pos_, word.size()) != word) fail("expected '" + std::string(word) + "'");
        pos_ += word.size();
    }

    JsonValue value(int depth) {
        if (depth > kMaxDepth) fail("nested more than " + std::to_string(kMaxDepth) + " deep");
        skip_ws();
        JsonValue v;
        const char c = peek();
        if (c == '{') {
            v.type_ = JsonValue::Type::Object;
            ++pos_;
            skip_ws();
            if (peek() == '}') {
                ++pos_;
                return v;
            }
            for (;;) {
                skip_ws();
                if (peek() != '"') fail("expected a string key");
                std::string key = string();
                skip_ws();
                if (peek() != ':') fail("expected ':'");
                ++pos_;
                JsonValue member = value(depth + 1);
                v.members_.emplace_back(std::move(key), std::move(member));
                skip_ws();
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                if (peek() == '}') {
                    ++pos_;
                    return v;
                }
                fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.type_ = JsonValue::Type::Array;
            ++pos_;
            skip_ws();
            if (peek() == ']') {
                ++pos_;
                return v;
            }
            for (;;) {
                v.items_.push_back(value(depth + 1));
                skip_ws();
                if (peek() == ',') {
                    ++pos_;
                    continue;
                }
                if (peek() == ']') {
                    ++pos_;
                    return v;
                }
                fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.type_ = JsonValue::Type::String;
            v.text_ = string();
            return v;
        }
        if (c == 't') {
            expect("true");
            v.type_ = JsonValue::Type::Bool;
            v.bool_ = true;
            return v;
        }
        if (c == 'f') {
            expect("false");
            v.type_ = JsonValue::Type::Bool;
            return v;
        }
        if (c == 'n') {
            expect("null");
            return v;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            v.type_ = JsonValue::Type::Number;
            v.text_ = number();
            return v;
        }
        fail(std::string("unexpected character '") + c + "'");
    }

    bool digit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }

    std::string number() {
        const size_t start = pos_;
        if (s_[pos_] == '-') ++pos_;
        if (!digit()) fail("a number needs digits");
        if (s_[pos_] == '0') {
            ++pos_;
            if (digit()) fail("leading zero in a number");
        } else {
            while (digit()) ++pos_;
        }
        if (pos_ < s_.size() && s_[pos_] == '.') {
            ++pos_;
            if (!digit()) fail("a fraction needs digits");
            while (digit()) ++pos_;
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            ++pos_;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
            if (!digit()) fail("an exponent needs digits");
            while (digit()) ++pos_;
        }
        return std::string(s_.substr(start, pos_ - start));
    }

    uint32_t hex4() {
        if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = s_[pos_++];
            v <<= 4;
            if (h >= '0' && h <= '9')
                v |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
                v |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
                v |= static_cast<uint32_t>(h - 'A' + 10);
            else
                fail("bad hex digit in a \\u escape");
        }
        return v;
    }

    std::string string() {
        ++pos_;  // the opening quote
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const auto b = static_cast<uint8_t>(s_[pos_]);
            if (b == '"') {
                ++pos_;
                return out;
            }
            if (b < 0x20) fail("control character in a string");
            if (b == '\\') {
                ++pos_;
                const char e = peek();
                ++pos_;
                switch (e) {
                    case '"':
                        out += '"';
                        break;
                    case '\\':
                        out += '\\';
                        break;
                    case '/':
                        out += '/';
                        break;
                    case 'b':
                        out += '\b';
                        break;
                    case 'f':
                        out += '\f';
                        break;
                    case 'n':
                        out += '\n';
                        break;
                    case 'r':
                        out += '\r';
                        break;
                    case 't':
                        out += '\t';
                        break;
                    case 'u': {
                        uint32_t cp = hex4();
                        if (cp >= 0xD800 && cp <= 0xDBFF) {
                            if (s_.substr(pos_, 2) != "\\u") fail("unpaired surrogate");
                            pos_ += 2;
                            const uint32_t lo = hex4();
                            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate");
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                            fail("unpaired surrogate");
                        }
                        unicode::append_utf8(out, cp);
                        break;
                    }
                    default:
                        fail("bad escape");
                }
                continue;
            }
            const auto ch = unicode::decode_utf8(s_, pos_);
            if (ch.cp == unicode::kInvalid) fail("invalid UTF-8 in a string");
            out.append(s_.substr(pos_, ch.len));
            pos_ += ch.len;
        }
    }

    std::string_view s_;
    const std::string& origin_;
    size_t pos_ = 0;
};

JsonValue JsonValue::parse(std::string_view text, const std::string& origin) {
    return JsonParser(text, origin).document();
}

JsonValue JsonValue::parse_file(const std::filesystem::path& path, size_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(path.string() + ": cannot open");
    std::string s;
    char buf[4096];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        s.append(buf, static_cast<size_t>(in.gcount()));
        if (s.size() > max_bytes)
            throw FormatError(path.string() + ": larger than " + std::to_string(max_bytes) +
                              " bytes");
    }
    if (in.bad()) throw IoError(path.string() + ": read error");
    return parse(s, path.string());
}

double JsonValue::as_double() const {
    // from_chars: independent of the C locale (Qt applications set LC_NUMERIC from the user's).
    double v = 0.0;
    if (type_ == Type::Number) std::from_chars(text_.data(), text_.data() + text_.size(), v);
    return v;
}

std::optional<uint64_t> JsonValue::as_u64() const {
    if (type_ != Type::Number || text_.empty()) return std::nullopt;
    uint64_t v = 0;
    for (const char c : text_) {
        if (c < '0' || c > '9') return std::nullopt;
        const auto d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

const JsonValue* JsonValue::find(std::string_view key) const {
    for (const auto& [k, v] : members_)
        if (k == key) return &v;
    return nullptr;
}

}  // namespace sl
