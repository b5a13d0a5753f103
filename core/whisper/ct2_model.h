// Reader of CTranslate2's model.bin (binary versions 4 to 6, little-endian), over a memory map or a
// byte span. CTranslate2 is the format faster-whisper uses; #24 reads Whisper weights from it.
//
// Layout of a file (CTranslate2's python/ctranslate2/specs/model_spec.py writes it):
//   uint32 binary_version | string spec_name | uint32 spec_revision
//   uint32 n_variables, then n_variables x
//     (string name | uint8 rank | uint32 dims[rank] | uint8 dtype | uint32 n_bytes | n_bytes data)
//   uint32 n_aliases, then n_aliases x (string alias | string target variable)
// A string is a uint16 length that counts a terminating NUL, then that many bytes, the last a NUL.
// Dims are row-major (the last varies fastest; a Linear weight is (out, in)). dtype ids:
// 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16. A rank-0 variable is a scalar (a
// flag, a head count). Quantized weights (int8, int16) come with a float32 "<name>_scale"
// variable: one value per row for int8, one for the whole weight for int16; value = q / scale.
// Variables are written in name order, with no padding, so data is not aligned.
//
// The file is untrusted. Checked before anything is used or reserved: the version is 4..6; every
// string has its NUL, no NUL or other control byte inside, and fits the file; counts are bounded
// by the bytes left; rank <= 8; the element count cannot overflow; elements x dtype size equals
// the stored n_bytes, which fits the file; names are unique; every alias names a variable and
// clashes with none; nothing follows the aliases. A rule broken throws FormatError whose message
// starts with the file's name (or parse()'s name) and names the variable and what is wrong; a file
// that cannot be read throws IoError.
//
// Ownership: open() owns its MappedFile; parse() borrows the caller's bytes, which must outlive
// the Ct2Model. Names and data are views into those bytes. Immutable after construction; const
// member functions are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/util/mapped_file.h"

namespace sl {

enum class Ct2Dtype : uint8_t { F32 = 0, I8 = 1, I16 = 2, I32 = 3, F16 = 4, BF16 = 5 };

const char* ct2_dtype_name(Ct2Dtype t);  // "float32", "int8", ...
size_t ct2_dtype_size(Ct2Dtype t);       // bytes per element

struct Ct2Variable {
    std::string_view name;  // view into the file, e.g. "encoder/conv1/weight"
    Ct2Dtype dtype = Ct2Dtype::F32;
    std::vector<uint32_t> shape;    // row-major; empty for a scalar
    uint64_t n_elements = 0;        // product of shape (1 for a scalar)
    uint64_t n_bytes = 0;           // n_elements * ct2_dtype_size(dtype)
    const uint8_t* data = nullptr;  // first byte, inside the file; unaligned
};

class Ct2Model {
public:
    static constexpr uint32_t kMinVersion = 4;  // earlier files stored item sizes, not dtypes
    static constexpr uint32_t kMaxVersion = 6;
    static constexpr size_t kMaxRank = 8;

    // Maps `path` and parses it. Throws IoError / FormatError, messages starting with the path.
    static Ct2Model open(const std::filesystem::path& path);
    // Parses bytes the caller owns (they must outlive the result); `name` stands for them in
    // error messages.
    static Ct2Model parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

    Ct2Model(Ct2Model&&) noexcept = default;
    Ct2Model& operator=(Ct2Model&&) noexcept = default;
    Ct2Model(const Ct2Model&) = delete;
    Ct2Model& operator=(const Ct2Model&) = delete;

    const std::string& name() const { return name_; }
    uint32_t binary_version() const { return version_; }
    std::string_view spec_name() const { return spec_name_; }  // "WhisperSpec", ...
    uint32_t spec_revision() const { return spec_revision_; }

    // Variables in file order (by name), aliases excluded.
    const std::vector<Ct2Variable>& variables() const { return variables_; }
    // (alias, target) in file order.
    const std::vector<std::pair<std::string_view, std::string_view>>& aliases() const {
        return aliases_;
    }
    // By name or alias; nullptr when absent.
    const Ct2Variable* find(std::string_view name) const;
    // By name or alias; FormatError naming the file and the variable when absent.
    const Ct2Variable& get(std::string_view name) const;
    // get() and a shape check: FormatError naming the variable, its shape and the expected one.
    const Ct2Variable& get(std::string_view name, std::span<const uint32_t> shape) const;

    // The values as float32 (row-major copy): float32/float16/bfloat16 converted exactly; int8
    // and int16 dequantized with "<name>_scale" (FormatError when the scale is missing, has the
    // wrong size, or is not a finite positive float32); int32 converted. `name` may be an alias
    // (its scale is the target's).
    std::vector<float> to_f32(std::string_view name) const;
    // A rank-0 integer variable (int8/int16/int32), or a float32 one: FormatError otherwise.
    int64_t scalar_int(std::string_view name) const;
    float scalar_f32(std::string_view name) const;

private:
    Ct2Model() = default;
    void parse_all();
    [[noreturn]] void fail(const std::string& what) const;

    MappedFile mapping_;  // empty for parse()
    std::string name_;
    std::span<const uint8_t> bytes_;
    uint32_t version_ = 0;
    std::string_view spec_name_;
    uint32_t spec_revision_ = 0;
    std::vector<Ct2Variable> variables_;
    std::vector<std::pair<std::string_view, std::string_view>> aliases_;
    std::unordered_map<std::string_view, size_t> index_;  // names and aliases -> variables_
};

}  // namespace sl
