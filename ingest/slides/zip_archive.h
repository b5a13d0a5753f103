// A read-only zip archive for hostile containers (PPTX, ODP): lists the entries and reads one entry
// into memory, stream-inflating in chunks and counting the bytes actually inflated, never trusting
// the sizes the headers claim. Nothing is ever extracted to disk.
//
// Safety:
// - total bytes inflated over the archive's life ≤ ZipLimits::max_total_bytes (TooLarge);
// - bytes inflated from one entry ≤ the read's own cap (TooLarge);
// - inflated / compressed size of one entry ≤ ZipLimits::max_ratio once past ratio_floor_bytes
//   (TooLarge: zip bombs);
// - entries whose names could escape a folder ("../", absolute paths, drive letters, backslashes,
//   NUL) are left out of the listing and cannot be read (unsafe_names() lists them);
// - archives with more than max_entries entries are refused (TooLarge).
// Errors are IngestError naming the archive (display name) and the entry.
//
// Threading: not thread-safe (libzip's zip_t is not); one ZipArchive per thread. Movable, not
// copyable. An archive opened from memory borrows the bytes: they must outlive the ZipArchive.
#pragma once

#include <QByteArray>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ingest/ingest_context.h"

struct zip;

namespace sl::ingest {

struct ZipLimits {
    int64_t max_total_bytes = int64_t{2} << 30;    // inflated over all reads of the archive
    double max_ratio = 200.0;                      // per entry, inflated / compressed
    int64_t ratio_floor_bytes = int64_t{1} << 20;  // the ratio is checked once past this many bytes
    int64_t max_entries = 1 << 20;

    static ZipLimits from(const IngestOptions& o);
};

struct ZipEntry {
    std::string name;    // as stored, '/'-separated, relative
    uint64_t index = 0;  // libzip index
    uint64_t size = 0;   // uncompressed size the header claims (never trusted)
    uint64_t compressed_size = 0;
    bool encrypted = false;
};

class ZipArchive {
public:
    // Opens the archive at `path`; display name = path. Throws IngestError (Io, Corrupt,
    // TooLarge).
    static ZipArchive open_file(const std::string& path, const ZipLimits& limits);
    // Opens an archive held in memory; `bytes` must outlive the returned object. `display_name`
    // is what errors name.
    static ZipArchive open_memory(std::span<const uint8_t> bytes, const std::string& display_name,
                                  const ZipLimits& limits);

    ZipArchive(ZipArchive&&) noexcept;
    ZipArchive& operator=(ZipArchive&&) noexcept;
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;
    ~ZipArchive();

    const std::string& display_name() const { return name_; }
    // Safe entries in archive order (directories included, names ending in '/').
    const std::vector<ZipEntry>& entries() const { return entries_; }
    // Names refused as unsafe, for diagnostics.
    const std::vector<std::string>& unsafe_names() const { return unsafe_; }

    bool contains(const std::string& name) const { return by_name_.count(name) != 0; }
    const ZipEntry* find(const std::string& name) const;

    // The whole entry, inflated; at most `max_bytes` (TooLarge beyond). Throws IngestError: Corrupt
    // (missing entry, bad data, CRC), Encrypted, Unsupported (compression method), TooLarge.
    QByteArray read(const std::string& name, int64_t max_bytes);
    // At most the first `max_bytes` of the entry (no error when the entry is longer): image
    // headers.
    QByteArray read_prefix(const std::string& name, int64_t max_bytes);

    // Bytes inflated so far over all reads.
    int64_t total_inflated() const { return total_; }

    // Whether `name` is safe to use as a relative path: no "..", no absolute path or drive letter,
    // no backslash or NUL, not empty.
    static bool is_safe_name(const std::string& name);

private:
    ZipArchive(zip* archive, std::string name, const ZipLimits& limits);
    void index_entries();
    QByteArray read_impl(const std::string& name, int64_t max_bytes, bool prefix);

    struct Closer {
        void operator()(zip* z) const;
    };
    std::unique_ptr<zip, Closer> zip_;
    std::string name_;
    ZipLimits limits_;
    std::vector<ZipEntry> entries_;
    std::map<std::string, size_t> by_name_;  // name -> position in entries_ (first wins)
    std::vector<std::string> unsafe_;
    int64_t total_ = 0;
};

}  // namespace sl::ingest
