// Reader of the safetensors format (Hugging Face), over a memory map or a byte span.
//
// Layout of a file:
//   uint64 little-endian N | N bytes of JSON header (UTF-8, may end in spaces) | data section
//   header = { "__metadata__": {string: string} (optional),
//              "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin,
//              end]},
//              ... }
// Offsets are bytes from the start of the data section; shapes are row-major (PyTorch order: the
// last dim varies fastest; a Linear weight is [out, in]).
//
// The file is untrusted. Checked before anything is used: N <= 100 MiB and within the file; the
// header is one strict JSON object (core/embed/json.h) with no duplicate names; every tensor has a
// known dtype, at most 8 dims, an element count that does not overflow, begin <= end <= data size,
// end - begin == elements * dtype size, and no two tensors overlap. Breaking a rule throws
// FormatError whose message starts with the file's name (or the caller's origin) and names the
// tensor and the problem; a file that cannot be read throws IoError.
//
// Ownership: open() owns its MappedFile; parse() borrows the caller's bytes, which must outlive
// the SafetensorsFile. Tensor data are views into those bytes, aligned only as the file lays them
// out (the data section starts at 8 + N, which writers pad to 8 bytes but the format does not
// require). Immutable after construction; const member functions are safe from any thread.
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

enum class SafetensorsDtype : uint8_t {
    BOOL,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    I64,
    U64,
    F64
};

// "F32" etc., as in the header.
const char* dtype_name(SafetensorsDtype t);
// Bytes per element.
size_t dtype_size(SafetensorsDtype t);

struct SafetensorsTensor {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::F32;
    std::vector<uint64_t> shape;    // row-major; empty for a scalar
    uint64_t n_elements = 0;        // product of shape (1 for a scalar)
    uint64_t n_bytes = 0;           // n_elements * dtype_size
    const uint8_t* data = nullptr;  // first byte, inside the file; may be unaligned
};

class SafetensorsFile {
public:
    static constexpr uint64_t kMaxHeaderBytes = 100u << 20;
    static constexpr size_t kMaxDims = 8;

    // Maps `path` and parses it. Throws IoError / FormatError, messages starting with the path.
    static SafetensorsFile open(const std::filesystem::path& path);
    // Parses bytes the caller owns (they must outlive the result); `origin` names them in errors.
    static SafetensorsFile parse(std::span<const uint8_t> bytes,
                                 const std::string& origin = "<memory>");

    const std::string& origin() const { return origin_; }
    // In header order.
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
    // nullptr when absent.
    const SafetensorsTensor* find(std::string_view name) const;
    // Like find, but throws FormatError "<origin>: tensor 'name' is missing".
    const SafetensorsTensor& get(std::string_view name) const;

    // The tensor's values as f32 (F32, F16 and BF16 only; any alignment). Throws FormatError naming
    // the tensor for other dtypes.
    std::vector<float> to_f32(const SafetensorsTensor& t) const;

private:
    SafetensorsFile() = default;
    void parse_bytes(std::span<const uint8_t> bytes);

    MappedFile map_;
    std::string origin_;
    std::vector<SafetensorsTensor> tensors_;
    std::unordered_map<std::string, size_t> index_;
    std::vector<std::pair<std::string, std::string>> metadata_;
};

}  // namespace sl
