// The GGUF model-file reader (versions 2 and 3, little-endian), over a memory map or a byte span.
//
// Layout of a file:
//   "GGUF" | uint32 version | uint64 tensor_count | uint64 kv_count
//   kv_count x  (string key | uint32 value type | value)            see core/gguf/gguf_value.h
//   tensor_count x (string name | uint32 n_dims | uint64 dims[n_dims] | uint32 ggml type
//                   | uint64 offset into the data section)
//   padding to `general.alignment` (uint32, default 32) | data section
// A string is a uint64 byte length and that many bytes.
//
// The file is untrusted. Every count, length, dimension and offset is checked against the bytes
// that remain and for overflow before it is used or memory is reserved for it; a file that breaks
// a rule throws FormatError whose message starts with the file's name (or "<memory>") and names
// the key or tensor and what is wrong. After construction every tensor lies inside the file, at an
// aligned offset, with no overlap, a known type and a size that matches its shape. Memory use is
// bounded by a small multiple of the file's header size (at worst ~9x, for arrays of empty
// arrays); arrays nest at most 8 deep.
//
// Ownership: open() owns its MappedFile; parse() borrows the caller's bytes, which must outlive
// the GgufFile. Keys, string values, tensor names and tensor data are views into those bytes.
// A GgufFile is immutable after construction; const member functions are safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/gguf/gguf_value.h"
#include "core/util/mapped_file.h"

namespace sl {

struct GgufKeyValue {
    std::string_view key;  // view into the file
    GgufValue value;
};

struct GgufTensorInfo {
    std::string_view name;       // view into the file, e.g. "blk.0.attn_q.weight"
    uint32_t type = 0;           // ggml type number: kernels::tensor_type_info(type)
    std::vector<uint64_t> dims;  // ggml order: dims[0] is the row length (fastest-varying); 1..4
    uint64_t offset = 0;      // bytes from the start of the data section; a multiple of alignment
    uint64_t n_elements = 0;  // product of dims
    uint64_t n_bytes = 0;     // n_elements / block_size * type_size
    const uint8_t* data = nullptr;  // the tensor's first byte in the file; aligned to the file's
                                    // alignment when the file's first byte is (always for open())
};

class GgufFile {
public:
    // Maps `path` and parses it. Throws IoError when it cannot be read, FormatError when it is
    // not a valid GGUF v2/v3 file; messages start with the path.
    static GgufFile open(const std::filesystem::path& path);
    // Parses bytes the caller owns; `bytes` must stay alive and unchanged while the result lives.
    // `name` stands for the file in error messages.
    static GgufFile parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

    GgufFile(GgufFile&&) noexcept = default;
    GgufFile& operator=(GgufFile&&) noexcept = default;
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::string& name() const { return name_; }  // the path, or parse()'s name
    uint32_t version() const { return version_; }      // 2 or 3
    uint64_t file_size() const { return bytes_.size(); }
    std::span<const uint8_t> bytes() const { return bytes_; }
    uint32_t alignment() const { return alignment_; }      // a power of two
    uint64_t data_offset() const { return data_offset_; }  // start of the data section

    // --- Metadata. Keys are unique; metadata() keeps the file's order. ---
    const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
    const GgufValue* find(std::string_view key) const;  // nullptr when absent

    // Typed getters: nullopt when the key is absent; FormatError naming the key when it is present
    // with another type or a value out of range. Integer getters take any integer type that fits;
    // get_f32 takes float32, float64 or an integer.
    std::optional<uint32_t> get_u32(std::string_view key) const;
    std::optional<uint64_t> get_u64(std::string_view key) const;
    std::optional<int32_t> get_i32(std::string_view key) const;
    std::optional<float> get_f32(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    // Views into the file (no copies); for tokenizer.ggml.tokens / merges.
    std::optional<std::span<const std::string_view>> get_string_array(std::string_view key) const;
    // Decoded copies; any integer element type that fits / float32, float64 elements.
    std::optional<std::vector<int32_t>> get_i32_array(std::string_view key) const;
    std::optional<std::vector<float>> get_f32_array(std::string_view key) const;

    // general.architecture ("llama", "qwen2", ...); empty when absent.
    std::string_view architecture() const;

    // --- Tensors, in file order. ---
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent

private:
    GgufFile() = default;
    void parse_all();
    [[noreturn]] void fail_key(std::string_view key, const std::string& what) const;

    MappedFile mapping_;  // empty for parse()
    std::string name_;
    std::span<const uint8_t> bytes_;
    uint32_t version_ = 0;
    uint32_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::vector<GgufKeyValue> metadata_;
    std::unordered_map<std::string_view, size_t> key_index_;
    std::vector<GgufTensorInfo> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

// --- Model hyperparameters: "<architecture>.<suffix>" keys, e.g. arch_u32(f, "block_count") reads
// "llama.block_count". Llama-family suffixes: block_count, context_length, embedding_length,
// feed_forward_length, attention.head_count, attention.head_count_kv,
// attention.layer_norm_rms_epsilon, attention.key_length, rope.freq_base, rope.dimension_count.
// All throw FormatError when general.architecture is missing or the value has the wrong type.

// "<architecture>.<suffix>".
std::string arch_key(const GgufFile& file, std::string_view suffix);
// Required: throws FormatError naming the key when it is absent.
uint32_t arch_u32(const GgufFile& file, std::string_view suffix);
float arch_f32(const GgufFile& file, std::string_view suffix);
// Optional: `fallback` when absent.
uint32_t arch_u32(const GgufFile& file, std::string_view suffix, uint32_t fallback);
float arch_f32(const GgufFile& file, std::string_view suffix, float fallback);

}  // namespace sl
