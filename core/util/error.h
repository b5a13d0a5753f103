// Error types of the engine. Libraries throw these (never exit()); callers at the edges (CLI, app)
// catch sl::Error and show what() to the user. Messages name the file or object and what is wrong.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sl {

// Base of every Sightline error.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A file could not be opened, read, mapped or written.
class IoError : public Error {
public:
    using Error::Error;
};

// A file's contents are malformed, truncated, hostile or of an unsupported kind.
class FormatError : public Error {
public:
    using Error::Error;
};

// A page of a saved context (.slkv) failed its checksum when first read, after the restore that
// attached it (pages are checked lazily: KvCache::attach): the session that read it was emptied;
// path() names the damaged file (page (layer(), block()) of it), which should not be used again.
class DamagedContextError : public FormatError {
public:
    DamagedContextError(const std::string& path, int layer, int64_t block, const std::string& what)
        : FormatError(what), path_(path), layer_(layer), block_(block) {}
    const std::string& path() const { return path_; }
    int layer() const { return layer_; }
    int64_t block() const { return block_; }

private:
    std::string path_;
    int layer_;
    int64_t block_;
};

// The compute device failed (a CUDA error, device memory exhausted): what ran there is lost, but
// the work can go on elsewhere (Session falls back to the CPU).
class DeviceError : public Error {
public:
    using Error::Error;
};

}  // namespace sl
