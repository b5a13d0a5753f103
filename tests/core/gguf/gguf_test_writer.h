// A test-only GGUF writer: builds valid files in memory, and hostile ones through its overrides
// (wrong counts, explicit offsets, raw value bytes). Not a general writer: no checks at all.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_value.h"

namespace sl::test {

using Bytes = std::vector<uint8_t>;

// A value's type tag and its encoded payload (what follows the type in the file).
struct GgufTestValue {
    uint32_t type;
    Bytes payload;
};

namespace gv {
GgufTestValue u8(uint8_t v);
GgufTestValue i8(int8_t v);
GgufTestValue u16(uint16_t v);
GgufTestValue i16(int16_t v);
GgufTestValue u32(uint32_t v);
GgufTestValue i32(int32_t v);
GgufTestValue f32(float v);
GgufTestValue boolean(bool v);
GgufTestValue str(std::string_view s);
GgufTestValue u64(uint64_t v);
GgufTestValue i64(int64_t v);
GgufTestValue f64(double v);
// An array of `elem_type`; each item's type must be elem_type (not checked).
GgufTestValue array(GgufType elem_type, const std::vector<GgufTestValue>& items);
GgufTestValue str_array(const std::vector<std::string>& items);
// Any type number and payload, for hostile files.
GgufTestValue raw(uint32_t type, Bytes payload);
}  // namespace gv

class GgufTestWriter {
public:
    GgufTestWriter& version(uint32_t v);
    GgufTestWriter& magic(std::string_view four_bytes);
    // Header counts to write instead of the real ones.
    GgufTestWriter& tensor_count_override(uint64_t n);
    GgufTestWriter& kv_count_override(uint64_t n);
    // Padding before the data section (default 32). Does not write general.alignment; alignment()
    // does both.
    GgufTestWriter& pad_to(uint32_t a);
    GgufTestWriter& alignment(uint32_t a);

    GgufTestWriter& kv(std::string_view key, GgufTestValue value);

    // A tensor whose data follows the previous one at the next aligned offset, filled with a byte
    // pattern; its byte size comes from the type's block layout.
    GgufTestWriter& tensor(std::string_view name, uint32_t type, std::vector<int64_t> dims);
    // A tensor at an explicit offset with an explicit byte size (the data section grows to hold
    // it); the type and dims are written as given.
    GgufTestWriter& tensor_at(std::string_view name, uint32_t type, std::vector<int64_t> dims,
                              uint64_t offset, uint64_t n_bytes);
    // Dims written as raw uint32 n_dims and the given count of dims (n_dims may lie); adds no
    // data to the data section.
    GgufTestWriter& tensor_raw_dims(std::string_view name, uint32_t n_dims,
                                    std::vector<int64_t> dims, uint32_t type, uint64_t offset);

    Bytes build() const;
    // build() written to `path`.
    void write(const std::filesystem::path& path) const;

    // The byte pattern of tensor data: byte i of the data section is data_byte(i).
    static uint8_t data_byte(uint64_t i) { return static_cast<uint8_t>(i * 131 + 7); }

private:
    struct Tensor {
        std::string name;
        uint32_t n_dims;
        std::vector<int64_t> dims;
        uint32_t type;
        uint64_t offset;
        uint64_t n_bytes;
    };
    uint64_t next_offset() const;

    std::string magic_ = "GGUF";
    uint32_t version_ = 3;
    std::optional<uint64_t> tensor_count_;
    std::optional<uint64_t> kv_count_;
    uint32_t pad_ = 32;
    std::vector<std::pair<std::string, GgufTestValue>> kvs_;
    std::vector<Tensor> tensors_;
};

}  // namespace sl::test
