#include "core/embed/safetensors.h"

#include <algorithm>
#include <cstring>

#include "core/embed/json.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"

namespace sl {

namespace {

struct DtypeInfo {
    const char* name;
    size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8},
};

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

}  // namespace

const char* dtype_name(SafetensorsDtype t) {
    return kDtypes[static_cast<size_t>(t)].name;
}

size_t dtype_size(SafetensorsDtype t) {
    return kDtypes[static_cast<size_t>(t)].size;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile f;
    f.origin_ = path.string();
    f.map_ = MappedFile(path);
    f.parse_bytes(f.map_.bytes());
    return f;
}

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes, const std::string& origin) {
    SafetensorsFile f;
    f.origin_ = origin;
    f.parse_bytes(bytes);
    return f;
}

void SafetensorsFile::parse_bytes(std::span<const uint8_t> bytes) {
    const std::string& o = origin_;
    if (bytes.size() < 8)
        throw FormatError(o + ": " + std::to_string(bytes.size()) +
                          " bytes is too short for a safetensors file (no 8-byte header size)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
    if (n > kMaxHeaderBytes)
        throw FormatError(o + ": header size " + std::to_string(n) + " is over the limit of " +
                          std::to_string(kMaxHeaderBytes) + " bytes (not a safetensors file?)");
    if (n > bytes.size() - 8)
        throw FormatError(o + ": header size " + std::to_string(n) +
                          " runs past the end of the file (" + std::to_string(bytes.size()) +
                          " bytes)");
    if (n < 2 || bytes[8] != '{')
        throw FormatError(o + ": the header does not start with '{' (not a safetensors file?)");
    const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8,
                                  static_cast<size_t>(n));
    const JsonValue root = JsonValue::parse(header, o + ": header");
    if (!root.is_object()) throw FormatError(o + ": the header is not a JSON object");

    const uint8_t* data = bytes.data() + 8 + n;
    const uint64_t data_size = bytes.size() - 8 - n;
    for (const auto& [name, v] : root.members()) {
        if (name == "__metadata__") {
            if (!metadata_.empty()) throw FormatError(o + ": __metadata__ appears twice");
            if (!v.is_object()) throw FormatError(o + ": __metadata__ is not an object");
            for (const auto& [k, s] : v.members()) {
                if (!s.is_string())
                    throw FormatError(o + ": __metadata__ '" + k + "' is not a string");
                metadata_.emplace_back(k, s.text());
            }
            continue;
        }
        const std::string what = o + ": tensor '" + name + "'";
        if (!v.is_object()) throw FormatError(what + " is not an object");
        SafetensorsTensor t;
        t.name = name;
        const JsonValue* dt = v.find("dtype");
        if (!dt || !dt->is_string()) throw FormatError(what + " has no dtype string");
        bool known = false;
        for (size_t i = 0; i < std::size(kDtypes); ++i)
            if (dt->text() == kDtypes[i].name)
                t.dtype = static_cast<SafetensorsDtype>(i), known = true;
        if (!known) throw FormatError(what + " has unknown dtype '" + dt->text() + "'");
        const JsonValue* shape = v.find("shape");
        if (!shape || !shape->is_array()) throw FormatError(what + " has no shape array");
        if (shape->items().size() > kMaxDims)
            throw FormatError(what + " has " + std::to_string(shape->items().size()) +
                              " dims, more than " + std::to_string(kMaxDims));
        t.n_elements = 1;
        for (const auto& d : shape->items()) {
            const auto dim = d.as_u64();
            if (!dim)
                throw FormatError(what + " has a shape entry that is not a non-negative integer");
            t.shape.push_back(*dim);
            if (*dim != 0 && t.n_elements > UINT64_MAX / *dim)
                throw FormatError(what + ": shape " + shape_text(t.shape) +
                                  "... overflows 64 bits");
            t.n_elements *= *dim;
        }
        const size_t es = dtype_size(t.dtype);
        if (t.n_elements > UINT64_MAX / es)
            throw FormatError(what + ": shape overflows 64 bits of bytes");
        t.n_bytes = t.n_elements * es;
        const JsonValue* off = v.find("data_offsets");
        if (!off || !off->is_array() || off->items().size() != 2)
            throw FormatError(what + " has no data_offsets [begin, end]");
        const auto begin = off->items()[0].as_u64(), end = off->items()[1].as_u64();
        if (!begin || !end)
            throw FormatError(what + " has data_offsets that are not non-negative integers");
        if (*begin > *end || *end > data_size)
            throw FormatError(what + ": data_offsets [" + std::to_string(*begin) + ", " +
                              std::to_string(*end) + "] are not inside the " +
                              std::to_string(data_size) + "-byte data section");
        if (*end - *begin != t.n_bytes)
            throw FormatError(what + ": " + std::to_string(*end - *begin) + " bytes for shape " +
                              shape_text(t.shape) + " of " + dt->text() + ", which needs " +
                              std::to_string(t.n_bytes));
        t.data = data + *begin;
        if (!index_.emplace(name, tensors_.size()).second)
            throw FormatError(what + " appears twice");
        tensors_.push_back(std::move(t));
    }
    // No two tensors may share bytes (empty tensors share nothing).
    std::vector<const SafetensorsTensor*> by_offset;
    for (const auto& t : tensors_)
        if (t.n_bytes) by_offset.push_back(&t);
    std::sort(
        by_offset.begin(), by_offset.end(),
        [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->data < b->data; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const auto* a = by_offset[i - 1];
        const auto* b = by_offset[i];
        if (a->data + a->n_bytes > b->data)
            throw FormatError(o + ": tensors '" + a->name + "' and '" + b->name + "' overlap");
    }
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::get(std::string_view name) const {
    const SafetensorsTensor* t = find(name);
    if (!t) throw FormatError(origin_ + ": tensor '" + std::string(name) + "' is missing");
    return *t;
}

std::vector<float> SafetensorsFile::to_f32(const SafetensorsTensor& t) const {
    std::vector<float> out(static_cast<size_t>(t.n_elements));
    const size_t n = out.size();
    switch (t.dtype) {
        case SafetensorsDtype::F32:
            if (n) std::memcpy(out.data(), t.data, n * 4);
            break;
        case SafetensorsDtype::F16:
        case SafetensorsDtype::BF16: {
            std::vector<uint16_t> half(n);  // copied: the file's bytes may be unaligned
            if (n) std::memcpy(half.data(), t.data, n * 2);
            if (t.dtype == SafetensorsDtype::F16)
                kernels::f16_to_f32(out.data(), half.data(), n);
            else
                kernels::bf16_to_f32(out.data(), half.data(), n);
            break;
        }
        default:
            throw FormatError(origin_ + ": tensor '" + t.name + "' has dtype " +
                              dtype_name(t.dtype) + "; only F32, F16 and BF16 convert to f32");
    }
    return out;
}

}  // namespace sl
