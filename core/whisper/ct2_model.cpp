#include "core/whisper/ct2_model.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/util/error.h"
#include "kernels/cpu/convert.h"

namespace sl {

static_assert(std::endian::native == std::endian::little,
              "CTranslate2 files are read as little-endian");

namespace {

// The fewest bytes one entry can take, to bound counts before reserving memory: a variable is a
// one-character name (2 + 2) + rank (1) + dtype (1) + n_bytes (4); an alias two such names.
constexpr uint64_t kMinVariableBytes = 4 + 1 + 1 + 4;
constexpr uint64_t kMinAliasBytes = 4 + 4;

std::string num(uint64_t v) {
    return std::to_string(v);
}

std::string quote_name(std::string_view s) {
    std::string out = "'";
    for (const char c : s.substr(0, 200)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u != 0x7f) {
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

std::string shape_str(std::span<const uint32_t> shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + num(shape[i]);
    return s + "]";
}

// Sequential reads, each checked against the bytes that remain.
class Cursor {
public:
    Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

    size_t pos() const { return pos_; }
    uint64_t left() const { return bytes_.size() - pos_; }

    [[noreturn]] void fail(const std::string& message) const {
        throw FormatError(name_ + ": " + message);
    }

    void need(uint64_t n, const std::string& what, const char* item) const {
        if (n <= left()) return;
        fail("truncated file: " + what + ": " + item + " needs " + num(n) + " bytes at offset " +
             num(pos_) + ", but only " + num(left()) + " remain");
    }

    template <typename T>
    T read(const std::string& what, const char* item) {
        need(sizeof(T), what, item);
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    const uint8_t* take(uint64_t n, const std::string& what, const char* item) {
        need(n, what, item);
        const uint8_t* p = bytes_.data() + pos_;
        pos_ += static_cast<size_t>(n);
        return p;
    }

    // A uint16 length (counting the NUL) and the bytes; returns the string without its NUL.
    std::string_view read_string(const std::string& what, const char* item) {
        const uint16_t len = read<uint16_t>(what, item);
        if (len == 0) fail(what + ": " + item + " has length 0 (the length counts a final NUL)");
        const auto* p = reinterpret_cast<const char*>(take(len, what, item));
        const std::string_view s(p, len - 1u);
        if (p[len - 1] != '\0')
            fail(what + ": " + item + " " + quote_name(s) + " does not end in a NUL");
        for (const char c : s) {
            const auto u = static_cast<unsigned char>(c);
            if (u < 0x20 || u == 0x7f)
                fail(what + ": " + item + " " + quote_name(s) + " holds a control byte");
        }
        if (s.empty()) fail(what + ": " + item + " is empty");
        return s;
    }

private:
    std::span<const uint8_t> bytes_;
    const std::string& name_;
    size_t pos_ = 0;
};

bool known_dtype(uint8_t t) {
    return t <= static_cast<uint8_t>(Ct2Dtype::BF16);
}

template <typename T>
T load(const uint8_t* p, uint64_t i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    return v;
}

}  // namespace

const char* ct2_dtype_name(Ct2Dtype t) {
    switch (t) {
        case Ct2Dtype::F32:
            return "float32";
        case Ct2Dtype::I8:
            return "int8";
        case Ct2Dtype::I16:
            return "int16";
        case Ct2Dtype::I32:
            return "int32";
        case Ct2Dtype::F16:
            return "float16";
        case Ct2Dtype::BF16:
            return "bfloat16";
    }
    return "?";
}

size_t ct2_dtype_size(Ct2Dtype t) {
    switch (t) {
        case Ct2Dtype::I8:
            return 1;
        case Ct2Dtype::I16:
        case Ct2Dtype::F16:
        case Ct2Dtype::BF16:
            return 2;
        case Ct2Dtype::F32:
        case Ct2Dtype::I32:
            return 4;
    }
    return 0;
}

Ct2Model Ct2Model::open(const std::filesystem::path& path) {
    Ct2Model m;
    m.mapping_ = MappedFile(path);
    m.name_ = path.string();
    m.bytes_ = m.mapping_.bytes();
    m.parse_all();
    return m;
}

Ct2Model Ct2Model::parse(std::span<const uint8_t> bytes, std::string name) {
    Ct2Model m;
    m.name_ = std::move(name);
    m.bytes_ = bytes;
    m.parse_all();
    return m;
}

void Ct2Model::fail(const std::string& what) const {
    throw FormatError(name_ + ": " + what);
}

void Ct2Model::parse_all() {
    Cursor c(bytes_, name_);
    const std::string header = "the header";
    if (bytes_.size() < 4)
        c.fail("not a CTranslate2 model (" + num(bytes_.size()) + " bytes, too short)");
    version_ = c.read<uint32_t>(header, "binary version");
    if (version_ < kMinVersion || version_ > kMaxVersion) {
        const uint32_t swapped = __builtin_bswap32(version_);
        if (swapped >= kMinVersion && swapped <= kMaxVersion)
            c.fail("big-endian CTranslate2 files are not supported");
        if (version_ >= 1 && version_ < kMinVersion) {
            c.fail("CTranslate2 binary version " + num(version_) +
                   " is too old (Sightline reads versions 4 to 6); convert the model again");
        }
        c.fail("not a CTranslate2 model, or an unsupported binary version " + num(version_) +
               " (Sightline reads versions 4 to 6)");
    }
    spec_name_ = c.read_string(header, "spec name");
    spec_revision_ = c.read<uint32_t>(header, "spec revision");

    // --- Variables.
    const uint32_t n_vars = c.read<uint32_t>(header, "variable count");
    if (n_vars > c.left() / kMinVariableBytes) {
        c.fail("header claims " + num(n_vars) + " variables, but the " + num(c.left()) +
               " bytes left hold at most " + num(c.left() / kMinVariableBytes));
    }
    variables_.reserve(n_vars);
    index_.reserve(n_vars);
    for (uint32_t i = 0; i < n_vars; ++i) {
        Ct2Variable v;
        v.name = c.read_string("variable #" + num(i), "name");
        const std::string what = "variable " + quote_name(v.name);
        if (!index_.emplace(v.name, variables_.size()).second) c.fail("duplicate " + what);
        const uint8_t rank = c.read<uint8_t>(what, "rank");
        if (rank > kMaxRank)
            c.fail(what + " has rank " + num(rank) + " (at most " + num(kMaxRank) + ")");
        v.shape.resize(rank);
        uint64_t n = 1;
        for (uint8_t d = 0; d < rank; ++d) {
            v.shape[d] = c.read<uint32_t>(what, "dimension");
            if (__builtin_mul_overflow(n, uint64_t{v.shape[d]}, &n))
                c.fail(what + " has too many elements (the product of its dimensions overflows)");
        }
        v.n_elements = n;
        const uint8_t dtype = c.read<uint8_t>(what, "dtype");
        if (!known_dtype(dtype)) c.fail(what + " has unknown dtype id " + num(dtype));
        v.dtype = static_cast<Ct2Dtype>(dtype);
        const uint32_t stored = c.read<uint32_t>(what, "byte count");
        const bool too_big =
            __builtin_mul_overflow(n, uint64_t{ct2_dtype_size(v.dtype)}, &v.n_bytes);
        if (too_big || v.n_bytes != stored) {
            c.fail(what + " has shape " + shape_str(v.shape) + " of " + ct2_dtype_name(v.dtype) +
                   " (" + (too_big ? std::string("over 2^64") : num(v.n_bytes)) +
                   " bytes) but stores " + num(stored) + " bytes");
        }
        v.data = c.take(v.n_bytes, what, "data");
        variables_.push_back(std::move(v));
    }

    // --- Aliases: a name that stands for another variable (CTranslate2 deduplicates tied weights).
    const uint32_t n_aliases = c.read<uint32_t>("the alias table", "alias count");
    if (n_aliases > c.left() / kMinAliasBytes) {
        c.fail("the alias table claims " + num(n_aliases) + " aliases, but the " + num(c.left()) +
               " bytes left hold at most " + num(c.left() / kMinAliasBytes));
    }
    aliases_.reserve(n_aliases);
    for (uint32_t i = 0; i < n_aliases; ++i) {
        const std::string what = "alias #" + num(i);
        const std::string_view alias = c.read_string(what, "name");
        const std::string_view target = c.read_string("alias " + quote_name(alias), "target");
        const auto it = index_.find(target);
        if (it == index_.end() || it->second >= variables_.size() ||
            variables_[it->second].name != target) {
            c.fail("alias " + quote_name(alias) + " names " + quote_name(target) +
                   ", which is not a variable of the file");
        }
        if (!index_.emplace(alias, it->second).second)
            c.fail("alias " + quote_name(alias) + " clashes with a variable or alias of that name");
        aliases_.emplace_back(alias, target);
    }
    if (c.left() != 0)
        c.fail(num(c.left()) + " unexpected bytes after the alias table (offset " + num(c.pos()) +
               ")");
}

const Ct2Variable* Ct2Model::find(std::string_view name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &variables_[it->second];
}

const Ct2Variable& Ct2Model::get(std::string_view name) const {
    const Ct2Variable* v = find(name);
    if (!v) fail("variable " + quote_name(name) + " is missing");
    return *v;
}

const Ct2Variable& Ct2Model::get(std::string_view name, std::span<const uint32_t> shape) const {
    const Ct2Variable& v = get(name);
    if (!std::equal(v.shape.begin(), v.shape.end(), shape.begin(), shape.end())) {
        fail("variable " + quote_name(name) + " has shape " + shape_str(v.shape) + ", expected " +
             shape_str(shape));
    }
    return v;
}

std::vector<float> Ct2Model::to_f32(std::string_view name) const {
    const Ct2Variable& v = get(name);
    const uint64_t n = v.n_elements;
    std::vector<float> out(static_cast<size_t>(n));
    switch (v.dtype) {
        case Ct2Dtype::F32:
            if (n) std::memcpy(out.data(), v.data, static_cast<size_t>(v.n_bytes));
            return out;
        case Ct2Dtype::F16:
        case Ct2Dtype::BF16: {
            std::vector<uint16_t> h(static_cast<size_t>(n));
            if (n) std::memcpy(h.data(), v.data, static_cast<size_t>(v.n_bytes));
            if (v.dtype == Ct2Dtype::F16)
                kernels::f16_to_f32(out.data(), h.data(), h.size());
            else
                kernels::bf16_to_f32(out.data(), h.data(), h.size());
            return out;
        }
        case Ct2Dtype::I32:
            for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int32_t>(v.data, i));
            return out;
        case Ct2Dtype::I8:
        case Ct2Dtype::I16:
            break;
    }

    // Quantized: the scale belongs to the variable the name resolves to.
    const std::string scale_name = std::string(v.name) + "_scale";
    const std::string what =
        "variable " + quote_name(v.name) + " (" + ct2_dtype_name(v.dtype) + ")";
    const Ct2Variable* s = find(scale_name);
    if (!s) fail(what + " has no scale variable " + quote_name(scale_name));
    if (s->dtype != Ct2Dtype::F32)
        fail("scale " + quote_name(scale_name) + " is " + ct2_dtype_name(s->dtype) +
             ", expected float32");
    const uint64_t rows = v.shape.empty() ? 1 : v.shape[0];
    if (s->n_elements != 1 && s->n_elements != rows) {
        fail("scale " + quote_name(scale_name) + " has " + num(s->n_elements) +
             " values; expected 1 or one per row (" + num(rows) + ")");
    }
    const uint64_t row_len = rows ? n / rows : 0;
    for (uint64_t r = 0; r < (rows ? rows : 0); ++r) {
        const float scale = load<float>(s->data, s->n_elements == 1 ? 0 : r);
        if (!(std::isfinite(scale) && scale > 0.0f)) {
            fail("scale " + quote_name(scale_name) + " value " + num(s->n_elements == 1 ? 0 : r) +
                 " is not a finite positive number");
        }
        const float inv = 1.0f / scale;
        for (uint64_t k = r * row_len; k < (r + 1) * row_len; ++k) {
            const float q = v.dtype == Ct2Dtype::I8 ? static_cast<float>(load<int8_t>(v.data, k))
                                                    : static_cast<float>(load<int16_t>(v.data, k));
            out[k] = q * inv;
        }
    }
    return out;
}

int64_t Ct2Model::scalar_int(std::string_view name) const {
    const Ct2Variable& v = get(name);
    if (!v.shape.empty())
        fail("variable " + quote_name(name) + " has shape " + shape_str(v.shape) +
             ", expected a scalar");
    switch (v.dtype) {
        case Ct2Dtype::I8:
            return load<int8_t>(v.data, 0);
        case Ct2Dtype::I16:
            return load<int16_t>(v.data, 0);
        case Ct2Dtype::I32:
            return load<int32_t>(v.data, 0);
        default:
            break;
    }
    fail("variable " + quote_name(name) + " is " + ct2_dtype_name(v.dtype) +
         ", expected an integer");
}

float Ct2Model::scalar_f32(std::string_view name) const {
    const Ct2Variable& v = get(name);
    if (!v.shape.empty())
        fail("variable " + quote_name(name) + " has shape " + shape_str(v.shape) +
             ", expected a scalar");
    if (v.dtype != Ct2Dtype::F32)
        fail("variable " + quote_name(name) + " is " + ct2_dtype_name(v.dtype) +
             ", expected float32");
    return load<float>(v.data, 0);
}

}  // namespace sl
