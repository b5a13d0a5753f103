// A small strict JSON parser (RFC 8259) for the untrusted JSON the embedding model brings: the
// safetensors header and config.json. Core stays free of Qt, so this replaces QJsonDocument there.
//
// Limits: nesting at most 64 deep; the caller bounds the input size. Numbers keep their text, so
// integers up to 2^64 - 1 read back exactly (as_u64) — safetensors offsets need that. Strings are
// decoded (escapes, surrogate pairs); invalid UTF-8, unpaired surrogates, control characters in
// strings, trailing commas, comments, leading zeros, NaN and trailing bytes after the value are
// errors. Duplicate object keys are kept in order; callers that care check them.
// Errors throw FormatError "<origin>: JSON at byte N: what".
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sl {

class JsonValue {
public:
    enum class Type { Null, Bool, Number, String, Array, Object };

    // Parses one JSON document; `origin` (a file name) starts every error message.
    static JsonValue parse(std::string_view text, const std::string& origin);
    // Reads and parses a file of at most max_bytes; IoError when it cannot be read, FormatError
    // (naming the file) when it is larger or malformed.
    static JsonValue parse_file(const std::filesystem::path& path, size_t max_bytes = 1u << 20);

    Type type() const { return type_; }
    bool is_object() const { return type_ == Type::Object; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_string() const { return type_ == Type::String; }
    bool is_number() const { return type_ == Type::Number; }

    bool as_bool() const { return bool_; }
    // The decoded string, or the number's text.
    const std::string& text() const { return text_; }
    // The number as a double (any JSON number), or as an exact unsigned integer: nullopt when the
    // number has a sign, fraction or exponent, or does not fit 64 bits.
    double as_double() const;
    std::optional<uint64_t> as_u64() const;

    const std::vector<JsonValue>& items() const { return items_; }
    const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
    // The first member named `key`, or nullptr (also when this is not an object).
    const JsonValue* find(std::string_view key) const;

private:
    friend class JsonParser;
    Type type_ = Type::Null;
    bool bool_ = false;
    std::string text_;
    std::vector<JsonValue> items_;
    std::vector<std::pair<std::string, JsonValue>> members_;
};

}  // namespace sl
