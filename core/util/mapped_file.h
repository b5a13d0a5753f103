// A read-only memory map of a whole file (models, caches). Move-only; unmaps on destruction.
// The bytes stay valid while the object lives; views into them must not outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace sl {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `path` read-only. Throws IoError naming the file when it cannot be opened or mapped.
    // An empty file maps to an empty span.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    const std::filesystem::path& path() const { return path_; }

private:
    void release();
    std::filesystem::path path_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace sl
