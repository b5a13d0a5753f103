// One metadata value of a GGUF file, as core/gguf/gguf_reader.h parses it.
//
// Values are views: strings and array payloads point into the file's bytes, so they are valid
// exactly as long as the GgufFile that produced them (for GgufFile::parse: as long as the caller's
// span). Nothing here copies a string; a 49152-entry token array is 49152 string_views.
// Immutable after parsing; safe to read from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace sl {

// GGUF metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
    Uint8 = 0,
    Int8 = 1,
    Uint16 = 2,
    Int16 = 3,
    Uint32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,  // uint64 length + bytes (not NUL-terminated)
    Array = 9,   // uint32 element type + uint64 count + elements (arrays may nest)
    Uint64 = 10,
    Int64 = 11,
    Float64 = 12,
};

// "uint32", "string", ...; "unknown" for numbers outside the enum.
const char* gguf_type_name(GgufType type);

// Bytes of one scalar of `type` in the file; 0 for String, Array and unknown numbers.
size_t gguf_scalar_size(GgufType type);

class GgufValue {
public:
    GgufType type() const { return type_; }
    bool is_array() const { return type_ == GgufType::Array; }

    // --- Scalars. Each returns nullopt when the value is of another kind or out of the range. ---
    // Any integer type (Uint8..Int64) whose value fits; Bool is not an integer here.
    std::optional<uint64_t> to_u64() const;
    std::optional<int64_t> to_i64() const;
    // Float32 or Float64, or any integer type (converted).
    std::optional<double> to_f64() const;
    std::optional<bool> to_bool() const;
    // A view into the file's bytes; not NUL-terminated, not checked for UTF-8.
    std::optional<std::string_view> to_string() const;

    // --- Arrays (is_array()); all empty for other values. ---
    GgufType elem_type() const { return elem_type_; }
    uint64_t size() const { return is_array() ? count_ : 0; }
    // String arrays (elem_type() == String): one view per element.
    std::span<const std::string_view> strings() const { return strings_; }
    // Nested arrays (elem_type() == Array): one value per element.
    std::span<const GgufValue> arrays() const { return arrays_; }
    // Scalar arrays: the packed little-endian payload, size() * gguf_scalar_size(elem_type())
    // bytes, at no particular alignment (read it with memcpy, or through at()).
    std::span<const uint8_t> raw() const { return raw_; }
    // Element i (< size()) of any array as a value of its own.
    GgufValue at(size_t i) const;

    // --- Construction (the reader). `bits` holds a scalar's file bytes, zero-extended. ---
    static GgufValue scalar(GgufType type, uint64_t bits);
    static GgufValue string(std::string_view s);
    static GgufValue scalar_array(GgufType elem, uint64_t count, std::span<const uint8_t> raw);
    static GgufValue string_array(std::vector<std::string_view> items);
    static GgufValue nested_array(std::vector<GgufValue> items);

private:
    GgufType type_ = GgufType::Uint8;
    GgufType elem_type_ = GgufType::Uint8;   // arrays only
    uint64_t bits_ = 0;                      // scalars: the raw bits
    uint64_t count_ = 0;                     // arrays: element count
    std::string_view str_;                   // String
    std::span<const uint8_t> raw_;           // scalar arrays
    std::vector<std::string_view> strings_;  // string arrays
    std::vector<GgufValue> arrays_;          // arrays of arrays
};

}  // namespace sl
