#include "core/gguf/gguf_value.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>

namespace sl {

static_assert(std::endian::native == std::endian::little, "GGUF values are read as little-endian");

namespace {

bool is_signed_int(GgufType t) {
    return t == GgufType::Int8 || t == GgufType::Int16 || t == GgufType::Int32 ||
           t == GgufType::Int64;
}

bool is_unsigned_int(GgufType t) {
    return t == GgufType::Uint8 || t == GgufType::Uint16 || t == GgufType::Uint32 ||
           t == GgufType::Uint64;
}

// The signed value of a signed integer's raw bits (sign-extended from its width).
int64_t signed_value(GgufType t, uint64_t bits) {
    switch (t) {
        case GgufType::Int8:
            return static_cast<int8_t>(static_cast<uint8_t>(bits));
        case GgufType::Int16:
            return static_cast<int16_t>(static_cast<uint16_t>(bits));
        case GgufType::Int32:
            return static_cast<int32_t>(static_cast<uint32_t>(bits));
        default:
            return static_cast<int64_t>(bits);
    }
}

}  // namespace

const char* gguf_type_name(GgufType type) {
    switch (type) {
        case GgufType::Uint8:
            return "uint8";
        case GgufType::Int8:
            return "int8";
        case GgufType::Uint16:
            return "uint16";
        case GgufType::Int16:
            return "int16";
        case GgufType::Uint32:
            return "uint32";
        case GgufType::Int32:
            return "int32";
        case GgufType::Float32:
            return "float32";
        case GgufType::Bool:
            return "bool";
        case GgufType::String:
            return "string";
        case GgufType::Array:
            return "array";
        case GgufType::Uint64:
            return "uint64";
        case GgufType::Int64:
            return "int64";
        case GgufType::Float64:
            return "float64";
    }
    return "unknown";
}

size_t gguf_scalar_size(GgufType type) {
    switch (type) {
        case GgufType::Uint8:
        case GgufType::Int8:
        case GgufType::Bool:
            return 1;
        case GgufType::Uint16:
        case GgufType::Int16:
            return 2;
        case GgufType::Uint32:
        case GgufType::Int32:
        case GgufType::Float32:
            return 4;
        case GgufType::Uint64:
        case GgufType::Int64:
        case GgufType::Float64:
            return 8;
        case GgufType::String:
        case GgufType::Array:
            return 0;
    }
    return 0;
}

std::optional<uint64_t> GgufValue::to_u64() const {
    if (is_unsigned_int(type_)) return bits_;
    if (is_signed_int(type_)) {
        const int64_t v = signed_value(type_, bits_);
        if (v >= 0) return static_cast<uint64_t>(v);
    }
    return std::nullopt;
}

std::optional<int64_t> GgufValue::to_i64() const {
    if (is_signed_int(type_)) return signed_value(type_, bits_);
    if (is_unsigned_int(type_) &&
        bits_ <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return static_cast<int64_t>(bits_);
    return std::nullopt;
}

std::optional<double> GgufValue::to_f64() const {
    if (type_ == GgufType::Float32) {
        float f;
        const auto b = static_cast<uint32_t>(bits_);
        std::memcpy(&f, &b, sizeof f);
        return f;
    }
    if (type_ == GgufType::Float64) {
        double d;
        std::memcpy(&d, &bits_, sizeof d);
        return d;
    }
    if (is_unsigned_int(type_)) return static_cast<double>(bits_);
    if (is_signed_int(type_)) return static_cast<double>(signed_value(type_, bits_));
    return std::nullopt;
}

std::optional<bool> GgufValue::to_bool() const {
    if (type_ != GgufType::Bool) return std::nullopt;
    return bits_ != 0;
}

std::optional<std::string_view> GgufValue::to_string() const {
    if (type_ != GgufType::String) return std::nullopt;
    return str_;
}

GgufValue GgufValue::at(size_t i) const {
    if (!is_array() || i >= count_) return {};
    if (elem_type_ == GgufType::String) return string(strings_[i]);
    if (elem_type_ == GgufType::Array) return arrays_[i];
    const size_t n = gguf_scalar_size(elem_type_);
    uint64_t bits = 0;
    std::memcpy(&bits, raw_.data() + i * n, n);
    return scalar(elem_type_, bits);
}

GgufValue GgufValue::scalar(GgufType type, uint64_t bits) {
    GgufValue v;
    v.type_ = type;
    v.bits_ = bits;
    return v;
}

GgufValue GgufValue::string(std::string_view s) {
    GgufValue v;
    v.type_ = GgufType::String;
    v.str_ = s;
    return v;
}

GgufValue GgufValue::scalar_array(GgufType elem, uint64_t count, std::span<const uint8_t> raw) {
    GgufValue v;
    v.type_ = GgufType::Array;
    v.elem_type_ = elem;
    v.count_ = count;
    v.raw_ = raw;
    return v;
}

GgufValue GgufValue::string_array(std::vector<std::string_view> items) {
    GgufValue v;
    v.type_ = GgufType::Array;
    v.elem_type_ = GgufType::String;
    v.count_ = items.size();
    v.strings_ = std::move(items);
    return v;
}

GgufValue GgufValue::nested_array(std::vector<GgufValue> items) {
    GgufValue v;
    v.type_ = GgufType::Array;
    v.elem_type_ = GgufType::Array;
    v.count_ = items.size();
    v.arrays_ = std::move(items);
    return v;
}

}  // namespace sl
