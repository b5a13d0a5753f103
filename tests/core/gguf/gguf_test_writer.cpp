#include "tests/core/gguf/gguf_test_writer.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "kernels/cpu/tensor_types.h"

namespace sl::test {

namespace {

template <typename T>
void put(Bytes& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(Bytes& out, std::string_view s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

template <typename T>
GgufTestValue scalar(GgufType type, T v) {
    GgufTestValue out{static_cast<uint32_t>(type), {}};
    put(out.payload, v);
    return out;
}

}  // namespace

namespace gv {
GgufTestValue u8(uint8_t v) {
    return scalar(GgufType::Uint8, v);
}
GgufTestValue i8(int8_t v) {
    return scalar(GgufType::Int8, v);
}
GgufTestValue u16(uint16_t v) {
    return scalar(GgufType::Uint16, v);
}
GgufTestValue i16(int16_t v) {
    return scalar(GgufType::Int16, v);
}
GgufTestValue u32(uint32_t v) {
    return scalar(GgufType::Uint32, v);
}
GgufTestValue i32(int32_t v) {
    return scalar(GgufType::Int32, v);
}
GgufTestValue f32(float v) {
    return scalar(GgufType::Float32, v);
}
GgufTestValue boolean(bool v) {
    return scalar(GgufType::Bool, static_cast<uint8_t>(v ? 1 : 0));
}
GgufTestValue u64(uint64_t v) {
    return scalar(GgufType::Uint64, v);
}
GgufTestValue i64(int64_t v) {
    return scalar(GgufType::Int64, v);
}
GgufTestValue f64(double v) {
    return scalar(GgufType::Float64, v);
}

GgufTestValue str(std::string_view s) {
    GgufTestValue out{static_cast<uint32_t>(GgufType::String), {}};
    put_string(out.payload, s);
    return out;
}

GgufTestValue array(GgufType elem_type, const std::vector<GgufTestValue>& items) {
    GgufTestValue out{static_cast<uint32_t>(GgufType::Array), {}};
    put<uint32_t>(out.payload, static_cast<uint32_t>(elem_type));
    put<uint64_t>(out.payload, items.size());
    for (const auto& item : items)
        out.payload.insert(out.payload.end(), item.payload.begin(), item.payload.end());
    return out;
}

GgufTestValue str_array(const std::vector<std::string>& items) {
    std::vector<GgufTestValue> values;
    for (const auto& s : items) values.push_back(str(s));
    return array(GgufType::String, values);
}

GgufTestValue raw(uint32_t type, Bytes payload) {
    return {type, std::move(payload)};
}
}  // namespace gv

GgufTestWriter& GgufTestWriter::version(uint32_t v) {
    version_ = v;
    return *this;
}

GgufTestWriter& GgufTestWriter::magic(std::string_view four_bytes) {
    magic_ = std::string(four_bytes);
    return *this;
}

GgufTestWriter& GgufTestWriter::tensor_count_override(uint64_t n) {
    tensor_count_ = n;
    return *this;
}

GgufTestWriter& GgufTestWriter::kv_count_override(uint64_t n) {
    kv_count_ = n;
    return *this;
}

GgufTestWriter& GgufTestWriter::pad_to(uint32_t a) {
    pad_ = a;
    return *this;
}

GgufTestWriter& GgufTestWriter::alignment(uint32_t a) {
    pad_ = a;
    return kv("general.alignment", gv::u32(a));
}

GgufTestWriter& GgufTestWriter::kv(std::string_view key, GgufTestValue value) {
    kvs_.emplace_back(std::string(key), std::move(value));
    return *this;
}

uint64_t GgufTestWriter::next_offset() const {
    uint64_t end = 0;
    for (const auto& t : tensors_) {
        if (t.n_bytes > 0) end = std::max(end, t.offset + t.n_bytes);
    }
    const uint64_t a = pad_ == 0 ? 1 : pad_;
    return (end + a - 1) / a * a;
}

GgufTestWriter& GgufTestWriter::tensor(std::string_view name, uint32_t type,
                                       std::vector<int64_t> dims) {
    const auto info = kernels::tensor_type_info(type);
    uint64_t n = 1;
    for (const int64_t d : dims) n *= static_cast<uint64_t>(d);
    const uint64_t n_bytes = info.block_size ? n / info.block_size * info.type_size : 0;
    return tensor_at(name, type, std::move(dims), next_offset(), n_bytes);
}

GgufTestWriter& GgufTestWriter::tensor_at(std::string_view name, uint32_t type,
                                          std::vector<int64_t> dims, uint64_t offset,
                                          uint64_t n_bytes) {
    const auto n_dims = static_cast<uint32_t>(dims.size());
    tensors_.push_back({std::string(name), n_dims, std::move(dims), type, offset, n_bytes});
    return *this;
}

GgufTestWriter& GgufTestWriter::tensor_raw_dims(std::string_view name, uint32_t n_dims,
                                                std::vector<int64_t> dims, uint32_t type,
                                                uint64_t offset) {
    tensors_.push_back({std::string(name), n_dims, std::move(dims), type, offset, 0});
    return *this;
}

Bytes GgufTestWriter::build() const {
    Bytes out(magic_.begin(), magic_.end());
    put<uint32_t>(out, version_);
    put<uint64_t>(out, tensor_count_.value_or(tensors_.size()));
    put<uint64_t>(out, kv_count_.value_or(kvs_.size()));
    for (const auto& [key, value] : kvs_) {
        put_string(out, key);
        put<uint32_t>(out, value.type);
        out.insert(out.end(), value.payload.begin(), value.payload.end());
    }
    for (const auto& t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, t.n_dims);
        for (const int64_t d : t.dims) put<int64_t>(out, d);
        put<uint32_t>(out, t.type);
        put<uint64_t>(out, t.offset);
    }
    if (tensors_.empty()) return out;
    const uint64_t a = pad_ == 0 ? 1 : pad_;
    out.resize((out.size() + a - 1) / a * a, 0);
    uint64_t data_size = 0;
    for (const auto& t : tensors_) {
        if (t.n_bytes > 0) data_size = std::max(data_size, t.offset + t.n_bytes);
    }
    const size_t data_start = out.size();
    out.resize(data_start + data_size);
    for (uint64_t i = 0; i < data_size; ++i) out[data_start + i] = data_byte(i);
    return out;
}

void GgufTestWriter::write(const std::filesystem::path& path) const {
    const Bytes b = build();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace sl::test
