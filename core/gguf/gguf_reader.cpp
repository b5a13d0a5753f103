#include "core/gguf/gguf_reader.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "core/util/error.h"
#include "kernels/cpu/tensor_types.h"

namespace sl {

static_assert(std::endian::native == std::endian::little, "GGUF files are read as little-endian");

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;         // arrays of arrays nest at most this deep
constexpr uint64_t kMaxKeyBytes = 65535;  // the spec's limit on key length

// The fewest bytes one entry can take, used to bound counts before reserving memory:
// a key-value is a key length (8) + a value type (4) + at least a one-byte value; a tensor info
// is a name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

std::string num(uint64_t v) {
    return std::to_string(v);
}

std::string quoted(std::string_view s) {
    std::string out = "'";
    for (const char c : s.substr(0, 200)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f) {
            out += c;
        } else {
            static const char hex[] = "0123456789abcdef";
            out += "\\x";
            out += hex[u >> 4];
            out += hex[u & 15];
        }
    }
    if (s.size() > 200) out += "...";
    return out + "'";
}

bool known_value_type(uint32_t t) {
    return t <= static_cast<uint32_t>(GgufType::Float64);
}

// Reads the header sequentially. Each read checks the remaining bytes first; `what` describes the
// item for the error message ("key 'general.name'", "tensor 'output.weight'").
class Cursor {
public:
    Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

    size_t pos() const { return pos_; }
    uint64_t left() const { return bytes_.size() - pos_; }

    [[noreturn]] void fail(const std::string& message) const {
        throw FormatError(name_ + ": " + message);
    }

    // Throws unless `n` more bytes remain. `index` >= 0 names an array element.
    void need(uint64_t n, std::string_view what, const char* item, int64_t index = -1) const {
        if (n <= left()) return;
        std::string where(what);
        if (index >= 0) where += " element " + num(static_cast<uint64_t>(index));
        fail("truncated file: " + where + ": " + item + " needs " + num(n) + " bytes at offset " +
             num(pos_) + ", but only " + num(left()) + " remain");
    }

    template <typename T>
    T read(std::string_view what, const char* item, int64_t index = -1) {
        need(sizeof(T), what, item, index);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::span<const uint8_t> take(uint64_t n, std::string_view what, const char* item,
                                  int64_t index = -1) {
        need(n, what, item, index);
        const auto out = bytes_.subspan(pos_, static_cast<size_t>(n));
        pos_ += static_cast<size_t>(n);
        return out;
    }

    std::string_view read_string(std::string_view what, const char* item, int64_t index = -1) {
        const uint64_t len = read<uint64_t>(what, item, index);
        if (len > left()) {
            std::string where(what);
            if (index >= 0) where += " element " + num(static_cast<uint64_t>(index));
            fail(where + ": " + item + " claims " + num(len) + " bytes at offset " + num(pos_) +
                 ", but only " + num(left()) + " remain");
        }
        const auto s = take(len, what, item, index);
        return {reinterpret_cast<const char*>(s.data()), s.size()};
    }

private:
    std::span<const uint8_t> bytes_;
    const std::string& name_;
    size_t pos_ = 0;
};

// One value of `type`; `what` names the key for messages; `depth` counts enclosing arrays.
GgufValue read_value(Cursor& c, uint32_t type, const std::string& what, int depth) {
    if (!known_value_type(type)) c.fail(what + " has unknown value type " + num(type));
    const auto t = static_cast<GgufType>(type);
    if (t == GgufType::String) return GgufValue::string(c.read_string(what, "string"));
    if (t != GgufType::Array) {
        const size_t n = gguf_scalar_size(t);
        uint64_t bits = 0;
        std::memcpy(&bits, c.take(n, what, gguf_type_name(t)).data(), n);
        return GgufValue::scalar(t, bits);
    }

    const uint32_t elem = c.read<uint32_t>(what, "array element type");
    if (!known_value_type(elem)) c.fail(what + " is an array of unknown value type " + num(elem));
    const auto et = static_cast<GgufType>(elem);
    const uint64_t count = c.read<uint64_t>(what, "array length");
    if (et == GgufType::Array && depth + 1 >= kMaxArrayDepth)
        c.fail(what + " nests arrays deeper than " + num(kMaxArrayDepth) + " levels");
    // The fewest bytes one element can take; bounds `count` before anything is reserved.
    const uint64_t min_elem = et == GgufType::String  ? 8
                              : et == GgufType::Array ? 4 + 8
                                                      : gguf_scalar_size(et);
    if (count > c.left() / min_elem) {
        c.fail(what + " is an array of " + num(count) + " " + gguf_type_name(et) +
               " values, but the " + num(c.left()) + " bytes left in the file hold at most " +
               num(c.left() / min_elem));
    }
    if (et == GgufType::String) {
        std::vector<std::string_view> items;
        items.reserve(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i)
            items.push_back(c.read_string(what, "string", static_cast<int64_t>(i)));
        return GgufValue::string_array(std::move(items));
    }
    if (et == GgufType::Array) {
        std::vector<GgufValue> items;
        items.reserve(static_cast<size_t>(count));
        const std::string inner = what + " (nested array)";
        for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(c, elem, inner, depth + 1));
        return GgufValue::nested_array(std::move(items));
    }
    const auto raw = c.take(count * min_elem, what, "array data");
    return GgufValue::scalar_array(et, count, raw);
}

// a + b, or nullopt on overflow.
std::optional<uint64_t> add(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

std::optional<uint64_t> mul(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

}  // namespace

GgufFile GgufFile::open(const std::filesystem::path& path) {
    GgufFile f;
    f.mapping_ = MappedFile(path);
    f.name_ = path.string();
    f.bytes_ = f.mapping_.bytes();
    f.parse_all();
    return f;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
    GgufFile f;
    f.name_ = std::move(name);
    f.bytes_ = bytes;
    f.parse_all();
    return f;
}

void GgufFile::parse_all() {
    Cursor c(bytes_, name_);

    // --- Header.
    if (bytes_.size() < 4) c.fail("not a GGUF file (" + num(bytes_.size()) + " bytes, too short)");
    if (std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
        const std::string_view magic(reinterpret_cast<const char*>(bytes_.data()), 4);
        c.fail("not a GGUF file (magic " + quoted(magic) + ", expected 'GGUF')");
    }
    c.take(4, "the header", "magic");
    version_ = c.read<uint32_t>("the header", "version");
    if (version_ == 1)
        c.fail("GGUF version 1 is not supported (it used 32-bit counts); convert the file again");
    if (version_ != 2 && version_ != 3) {
        const uint32_t swapped = __builtin_bswap32(version_);
        if (swapped == 2 || swapped == 3) c.fail("big-endian GGUF files are not supported");
        c.fail("unsupported GGUF version " + num(version_) + " (Sightline reads versions 2 and 3)");
    }
    const uint64_t tensor_count = c.read<uint64_t>("the header", "tensor count");
    const uint64_t kv_count = c.read<uint64_t>("the header", "metadata key count");
    if (kv_count > c.left() / kMinKeyValueBytes) {
        c.fail("header claims " + num(kv_count) + " metadata keys, but the " + num(c.left()) +
               " bytes left hold at most " + num(c.left() / kMinKeyValueBytes));
    }
    if (tensor_count > c.left() / kMinTensorInfoBytes) {
        c.fail("header claims " + num(tensor_count) + " tensors, but the " + num(c.left()) +
               " bytes left hold at most " + num(c.left() / kMinTensorInfoBytes));
    }

    // --- Metadata.
    metadata_.reserve(static_cast<size_t>(kv_count));
    key_index_.reserve(static_cast<size_t>(kv_count));
    for (uint64_t i = 0; i < kv_count; ++i) {
        const std::string key_what = "metadata key #" + num(i);
        const std::string_view key = c.read_string(key_what, "key");
        if (key.empty()) c.fail(key_what + " is empty");
        if (key.size() > kMaxKeyBytes)
            c.fail(key_what + " is " + num(key.size()) + " bytes long (at most 65535)");
        const std::string what = "key " + quoted(key);
        const uint32_t type = c.read<uint32_t>(what, "value type");
        GgufValue value = read_value(c, type, what, 0);
        if (!key_index_.emplace(key, metadata_.size()).second) c.fail("duplicate " + what);
        metadata_.push_back({key, std::move(value)});
    }

    if (const GgufValue* a = find("general.alignment")) {
        if (a->type() != GgufType::Uint32) {
            c.fail("key 'general.alignment' has type " + std::string(gguf_type_name(a->type())) +
                   ", expected uint32");
        }
        const uint64_t v = *a->to_u64();
        if (v == 0 || !std::has_single_bit(v))
            c.fail("key 'general.alignment' is " + num(v) + ", not a power of two");
        alignment_ = static_cast<uint32_t>(v);
    } else {
        alignment_ = kDefaultAlignment;
    }

    // --- Tensor infos.
    tensors_.reserve(static_cast<size_t>(tensor_count));
    tensor_index_.reserve(static_cast<size_t>(tensor_count));
    for (uint64_t i = 0; i < tensor_count; ++i) {
        const std::string name_what = "tensor #" + num(i);
        GgufTensorInfo t;
        t.name = c.read_string(name_what, "name");
        const std::string what = "tensor " + quoted(t.name);
        if (t.name.empty()) c.fail(name_what + " has an empty name");
        if (!tensor_index_.emplace(t.name, tensors_.size()).second) c.fail("duplicate " + what);

        const uint32_t n_dims = c.read<uint32_t>(what, "dimension count");
        if (n_dims == 0 || n_dims > kMaxDims)
            c.fail(what + " has " + num(n_dims) + " dimensions (expected 1 to 4)");
        t.dims.resize(n_dims);
        for (uint32_t d = 0; d < n_dims; ++d) {
            const auto dim = c.read<int64_t>(what, "dimension", d);
            if (dim <= 0) {
                c.fail(what + " has dimension " + num(d) + " = " + std::to_string(dim) +
                       " (must be positive)");
            }
            t.dims[d] = static_cast<uint64_t>(dim);
        }
        t.type = c.read<uint32_t>(what, "type");
        t.offset = c.read<uint64_t>(what, "offset");

        const kernels::TensorTypeInfo info = kernels::tensor_type_info(t.type);
        if (info.name == nullptr) c.fail(what + " has unknown tensor type " + num(t.type));
        uint64_t n = 1;
        for (const uint64_t d : t.dims) {
            const auto p = mul(n, d);
            if (!p || *p > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                c.fail(what + " has too many elements (the product of its dimensions overflows)");
            n = *p;
        }
        t.n_elements = n;
        if (t.dims[0] % info.block_size != 0) {
            c.fail(what + " has row length " + num(t.dims[0]) + ", not a multiple of " + info.name +
                   "'s block size " + num(info.block_size));
        }
        const auto bytes = mul(n / info.block_size, info.type_size);
        if (!bytes) c.fail(what + " is too large (its byte size overflows)");
        t.n_bytes = *bytes;
        tensors_.push_back(std::move(t));
    }

    // --- Data section: after the header, rounded up to the alignment.
    const uint64_t header_end = c.pos();
    data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
    const uint64_t size = bytes_.size();
    for (GgufTensorInfo& t : tensors_) {
        const std::string what = "tensor " + quoted(t.name);
        if (t.offset % alignment_ != 0) {
            c.fail(what + " has offset " + num(t.offset) + ", not a multiple of the alignment " +
                   num(alignment_));
        }
        const auto start = add(data_offset_, t.offset);
        const auto end = start ? add(*start, t.n_bytes) : std::nullopt;
        if (!end || *end > size) {
            c.fail(what + " extends past the end of the file (offset " +
                   (start ? num(*start) : num(data_offset_) + " + " + num(t.offset)) + " + " +
                   num(t.n_bytes) + " bytes > " + num(size) + ")");
        }
        t.data = bytes_.data() + *start;
    }

    // --- No two tensors share bytes, and none leaves unused bytes behind it: writers (llama.cpp,
    // gguf-py) place each tensor right after the previous one, padded to the alignment, so a gap
    // of a whole alignment unit or more means a tensor's type or shape no longer matches its data
    // (say, a type field changed to a smaller type), which would compute garbage.
    std::vector<size_t> order(tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const GgufTensorInfo& prev = tensors_[order[i - 1]];
        const GgufTensorInfo& next = tensors_[order[i]];
        if (prev.offset + prev.n_bytes > next.offset) {
            c.fail("tensors " + quoted(prev.name) + " (bytes " + num(prev.offset) + ".." +
                   num(prev.offset + prev.n_bytes) + " of the data section) and " +
                   quoted(next.name) + " (from byte " + num(next.offset) + ") overlap");
        }
        if (next.offset - (prev.offset + prev.n_bytes) >= alignment_) {
            c.fail("tensor " + quoted(prev.name) + " (" + num(prev.n_bytes) + " bytes by its type and shape) is followed by " +
                   num(next.offset - (prev.offset + prev.n_bytes)) + " unused bytes before " + quoted(next.name) +
                   ": its type or shape does not match its data");
        }
    }
}

void GgufFile::fail_key(std::string_view key, const std::string& what) const {
    throw FormatError(name_ + ": key " + quoted(key) + " " + what);
}

const GgufValue* GgufFile::find(std::string_view key) const {
    const auto it = key_index_.find(key);
    return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

namespace {

std::string type_desc(const GgufValue& v) {
    if (!v.is_array()) return gguf_type_name(v.type());
    return std::string("an array of ") + gguf_type_name(v.elem_type());
}

}  // namespace

std::optional<uint32_t> GgufFile::get_u32(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto u = v->to_u64();
    if (!u) fail_key(key, "has type " + type_desc(*v) + ", expected an unsigned integer");
    if (*u > std::numeric_limits<uint32_t>::max())
        fail_key(key, "is " + num(*u) + ", out of the uint32 range");
    return static_cast<uint32_t>(*u);
}

std::optional<uint64_t> GgufFile::get_u64(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto u = v->to_u64();
    if (!u) fail_key(key, "has type " + type_desc(*v) + ", expected an unsigned integer");
    return *u;
}

std::optional<int32_t> GgufFile::get_i32(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto i = v->to_i64();
    if (!i) fail_key(key, "has type " + type_desc(*v) + ", expected an integer");
    if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
        fail_key(key, "is " + std::to_string(*i) + ", out of the int32 range");
    return static_cast<int32_t>(*i);
}

std::optional<float> GgufFile::get_f32(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto d = v->to_f64();
    if (!d) fail_key(key, "has type " + type_desc(*v) + ", expected a number");
    return static_cast<float>(*d);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto b = v->to_bool();
    if (!b) fail_key(key, "has type " + type_desc(*v) + ", expected bool");
    return *b;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    const auto s = v->to_string();
    if (!s) fail_key(key, "has type " + type_desc(*v) + ", expected string");
    return *s;
}

std::optional<std::span<const std::string_view>> GgufFile::get_string_array(
    std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array() || v->elem_type() != GgufType::String)
        fail_key(key, "has type " + type_desc(*v) + ", expected an array of string");
    return v->strings();
}

std::optional<std::vector<int32_t>> GgufFile::get_i32_array(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array()) fail_key(key, "has type " + type_desc(*v) + ", expected an array of int32");
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(v->size()));
    if (v->elem_type() == GgufType::Int32) {  // the common case: one copy
        out.resize(static_cast<size_t>(v->size()));
        // An empty array has no storage: memcpy must not see its null data().
        if (!out.empty()) std::memcpy(out.data(), v->raw().data(), out.size() * sizeof(int32_t));
        return out;
    }
    for (size_t i = 0; i < v->size(); ++i) {
        const auto e = v->at(i).to_i64();
        if (!e || *e < std::numeric_limits<int32_t>::min() ||
            *e > std::numeric_limits<int32_t>::max()) {
            fail_key(key, "element " + num(i) + " (" + type_desc(*v) + ") is not an int32");
        }
        out.push_back(static_cast<int32_t>(*e));
    }
    return out;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
    const GgufValue* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_array() || v->elem_type() == GgufType::String || v->elem_type() == GgufType::Array ||
        v->elem_type() == GgufType::Bool) {
        fail_key(key, "has type " + type_desc(*v) + ", expected an array of float32");
    }
    std::vector<float> out(static_cast<size_t>(v->size()));
    if (v->elem_type() == GgufType::Float32) {
        if (!out.empty()) std::memcpy(out.data(), v->raw().data(), out.size() * sizeof(float));
        return out;
    }
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(*v->at(i).to_f64());
    return out;
}

std::string_view GgufFile::architecture() const {
    return get_string("general.architecture").value_or(std::string_view{});
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string arch_key(const GgufFile& file, std::string_view suffix) {
    const std::string_view arch = file.architecture();
    if (arch.empty()) throw FormatError(file.name() + ": no key 'general.architecture'");
    std::string key(arch);
    key += '.';
    key += suffix;
    return key;
}

uint32_t arch_u32(const GgufFile& file, std::string_view suffix) {
    const std::string key = arch_key(file, suffix);
    const auto v = file.get_u32(key);
    if (!v) throw FormatError(file.name() + ": no key '" + key + "'");
    return *v;
}

float arch_f32(const GgufFile& file, std::string_view suffix) {
    const std::string key = arch_key(file, suffix);
    const auto v = file.get_f32(key);
    if (!v) throw FormatError(file.name() + ": no key '" + key + "'");
    return *v;
}

uint32_t arch_u32(const GgufFile& file, std::string_view suffix, uint32_t fallback) {
    return file.get_u32(arch_key(file, suffix)).value_or(fallback);
}

float arch_f32(const GgufFile& file, std::string_view suffix, float fallback) {
    return file.get_f32(arch_key(file, suffix)).value_or(fallback);
}

}  // namespace sl
