// SHA-256 (FIPS 180-4): content hashes of documents and checks of pinned downloads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sl {

// Incremental hasher. Not thread-safe; one per thread.
class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t size);
    void update(std::string_view s) { update(s.data(), s.size()); }
    std::array<uint8_t, 32> digest();  // finishes; the object must be reset() before reuse
    void reset();

private:
    void block(const uint8_t* p);
    std::array<uint32_t, 8> h_{};
    std::array<uint8_t, 64> buf_{};
    uint64_t length_ = 0;  // bytes hashed so far
    size_t fill_ = 0;      // bytes in buf_
};

// Lowercase hex of a digest.
std::string to_hex(const std::array<uint8_t, 32>& digest);

std::string sha256_hex(std::string_view data);

// Hashes a whole file in 1 MiB reads. Throws IoError naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace sl
