// Writes CTranslate2 model.bin files byte by byte for the tests (and the fuzz seeds), including
// broken ones: every field can be given any value. Layout: core/whisper/ct2_model.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sl::test {

class Ct2Writer {
public:
    using Bytes = std::vector<uint8_t>;

    Bytes bytes;

    Ct2Writer& u8(uint8_t v) { return raw(&v, 1); }
    Ct2Writer& u16(uint16_t v) { return raw(&v, 2); }
    Ct2Writer& u32(uint32_t v) { return raw(&v, 4); }
    Ct2Writer& raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
        return *this;
    }
    // A well-formed string: length counting the NUL, the bytes, the NUL.
    Ct2Writer& str(const std::string& s) {
        u16(static_cast<uint16_t>(s.size() + 1));
        raw(s.data(), s.size());
        return u8(0);
    }
    Ct2Writer& header(uint32_t version = 6, const std::string& spec = "WhisperSpec",
                      uint32_t revision = 3) {
        u32(version);
        str(spec);
        return u32(revision);
    }
    // One variable: name, shape, dtype id and data; n_bytes is data.size() unless given.
    Ct2Writer& var(const std::string& name, const std::vector<uint32_t>& shape, uint8_t dtype,
                   const Bytes& data, int64_t n_bytes = -1) {
        str(name);
        u8(static_cast<uint8_t>(shape.size()));
        for (const uint32_t d : shape) u32(d);
        u8(dtype);
        u32(static_cast<uint32_t>(n_bytes >= 0 ? n_bytes : static_cast<int64_t>(data.size())));
        return raw(data.data(), data.size());
    }
    template <typename T>
    static Bytes of(const std::vector<T>& v) {
        Bytes b(v.size() * sizeof(T));
        if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
        return b;
    }
};

}  // namespace sl::test
