#include "ingest/slides/zip_archive.h"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <zip.h>

#include "ingest/ingest_error.h"

namespace sl::ingest {

namespace {

constexpr int64_t kChunk = 64 * 1024;

IngestError open_error(const std::string& name, int code, const char* detail) {
    switch (code) {
        case ZIP_ER_NOZIP:
            return IngestError(IngestErrorKind::Corrupt, name,
                               "not a zip archive (truncated, or not this format)");
        case ZIP_ER_INCONS:
            return IngestError(IngestErrorKind::Corrupt, name,
                               "the zip archive is inconsistent (truncated or damaged)");
        case ZIP_ER_OPEN:
        case ZIP_ER_READ:
        case ZIP_ER_NOENT:
        case ZIP_ER_SEEK:
            return IngestError(IngestErrorKind::Io, name,
                               std::string("cannot read the file: ") + detail);
        case ZIP_ER_MEMORY:
            return IngestError(IngestErrorKind::TooLarge, name,
                               "the zip directory does not fit in memory");
        default:
            return IngestError(IngestErrorKind::Corrupt, name,
                               std::string("bad zip archive: ") + detail);
    }
}

std::string zip_error_text(int code) {
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    std::string s = zip_error_strerror(&e);
    zip_error_fini(&e);
    return s;
}

}  // namespace

ZipLimits ZipLimits::from(const IngestOptions& o) {
    ZipLimits l;
    l.max_total_bytes = o.max_uncompressed_bytes;
    l.max_ratio = o.max_compression_ratio;
    return l;
}

void ZipArchive::Closer::operator()(zip* z) const {
    if (z) zip_discard(z);  // read-only: never writes anything back
}

ZipArchive::ZipArchive(zip* archive, std::string name, const ZipLimits& limits)
    : zip_(archive), name_(std::move(name)), limits_(limits) {}

ZipArchive::ZipArchive(ZipArchive&&) noexcept = default;
ZipArchive& ZipArchive::operator=(ZipArchive&&) noexcept = default;
ZipArchive::~ZipArchive() = default;

ZipArchive ZipArchive::open_file(const std::string& path, const ZipLimits& limits) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 &&
        !ec)
        throw IngestError(IngestErrorKind::Corrupt, path, "empty file, not a zip archive");
    int err = 0;
    zip* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
    if (!z) throw open_error(path, err, zip_error_text(err).c_str());
    ZipArchive a(z, path, limits);
    a.index_entries();
    return a;
}

ZipArchive ZipArchive::open_memory(std::span<const uint8_t> bytes, const std::string& display_name,
                                   const ZipLimits& limits) {
    // libzip opens an empty buffer as a new, empty archive; for a reader that is no archive at all.
    if (bytes.empty())
        throw IngestError(IngestErrorKind::Corrupt, display_name, "empty file, not a zip archive");
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
    if (!src) {
        const std::string text = zip_error_strerror(&error);
        const int code = zip_error_code_zip(&error);
        zip_error_fini(&error);
        throw open_error(display_name, code, text.c_str());
    }
    zip* z = zip_open_from_source(src, ZIP_RDONLY, &error);
    if (!z) {
        zip_source_free(src);
        const std::string text = zip_error_strerror(&error);
        const int code = zip_error_code_zip(&error);
        zip_error_fini(&error);
        throw open_error(display_name, code, text.c_str());
    }
    zip_error_fini(&error);
    ZipArchive a(z, display_name, limits);
    a.index_entries();
    return a;
}

bool ZipArchive::is_safe_name(const std::string& name) {
    if (name.empty() || name.front() == '/') return false;
    if (name.find('\\') != std::string::npos || name.find('\0') != std::string::npos) return false;
    if (name.size() >= 2 && name[1] == ':') return false;  // "C:..." drive letters
    std::string_view rest(name);
    while (!rest.empty()) {
        const size_t slash = rest.find('/');
        const std::string_view part = rest.substr(0, slash);
        if (part == "..") return false;
        if (slash == std::string_view::npos) break;
        rest.remove_prefix(slash + 1);
    }
    return true;
}

void ZipArchive::index_entries() {
    const zip_int64_t n = zip_get_num_entries(zip_.get(), 0);
    if (n < 0) throw IngestError(IngestErrorKind::Corrupt, name_, "cannot list the zip entries");
    if (n > limits_.max_entries)
        throw IngestError(IngestErrorKind::TooLarge, name_,
                          "the zip archive has " + std::to_string(n) +
                              " entries, over the cap of " + std::to_string(limits_.max_entries));
    entries_.reserve(static_cast<size_t>(n));
    for (zip_int64_t i = 0; i < n; ++i) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(zip_.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) continue;
        if (!(st.valid & ZIP_STAT_NAME) || !st.name) continue;
        std::string entry_name = st.name;
        if (!is_safe_name(entry_name)) {
            if (unsafe_.size() < 100) unsafe_.push_back(std::move(entry_name));
            continue;
        }
        ZipEntry e;
        e.name = std::move(entry_name);
        e.index = static_cast<uint64_t>(i);
        e.size = (st.valid & ZIP_STAT_SIZE) ? st.size : 0;
        e.compressed_size = (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size : 0;
        e.encrypted =
            (st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE;
        by_name_.emplace(e.name, entries_.size());
        entries_.push_back(std::move(e));
    }
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

QByteArray ZipArchive::read(const std::string& name, int64_t max_bytes) {
    return read_impl(name, max_bytes, false);
}

QByteArray ZipArchive::read_prefix(const std::string& name, int64_t max_bytes) {
    return read_impl(name, max_bytes, true);
}

QByteArray ZipArchive::read_impl(const std::string& name, int64_t max_bytes, bool prefix) {
    if (!is_safe_name(name))
        throw IngestError(IngestErrorKind::Corrupt, name_,
                          "refusing unsafe zip entry name '" + name + "'");
    const ZipEntry* e = find(name);
    if (!e) throw IngestError(IngestErrorKind::Corrupt, name_, "zip entry " + name + " is missing");
    if (e->encrypted)
        throw IngestError(IngestErrorKind::Encrypted, name_,
                          "zip entry " + name + " is encrypted and needs a password");

    struct FileCloser {
        void operator()(zip_file_t* f) const { zip_fclose(f); }
    };
    std::unique_ptr<zip_file_t, FileCloser> f(zip_fopen_index(zip_.get(), e->index, 0));
    if (!f) {
        const int code = zip_error_code_zip(zip_get_error(zip_.get()));
        const std::string text = zip_strerror(zip_.get());
        zip_error_clear(zip_.get());
        if (code == ZIP_ER_NOPASSWD || code == ZIP_ER_WRONGPASSWD || code == ZIP_ER_ENCRNOTSUPP)
            throw IngestError(IngestErrorKind::Encrypted, name_,
                              "zip entry " + name + " is encrypted and needs a password");
        if (code == ZIP_ER_COMPNOTSUPP)
            throw IngestError(IngestErrorKind::Unsupported, name_,
                              "zip entry " + name + " uses an unsupported compression method");
        throw IngestError(IngestErrorKind::Corrupt, name_,
                          "cannot open zip entry " + name + ": " + text);
    }

    QByteArray out;
    // Never trust the header's size for the allocation: reserve at most 8 MiB up front.
    const int64_t guess =
        std::min<int64_t>({static_cast<int64_t>(std::min<uint64_t>(e->size, uint64_t{1} << 40)),
                           max_bytes, int64_t{8} << 20});
    if (guess > 0) out.reserve(static_cast<qsizetype>(guess));
    const double compressed = static_cast<double>(std::max<uint64_t>(e->compressed_size, 1));
    int64_t got = 0;
    std::vector<char> chunk(static_cast<size_t>(kChunk));
    for (;;) {
        int64_t want = kChunk;
        if (prefix) {
            want = std::min(want, max_bytes - got);
            if (want <= 0) break;
        }
        const zip_int64_t n = zip_fread(f.get(), chunk.data(), static_cast<zip_uint64_t>(want));
        if (n < 0) {
            const std::string text = zip_file_strerror(f.get());
            throw IngestError(IngestErrorKind::Corrupt, name_,
                              "zip entry " + name + " is damaged: " + text);
        }
        if (n == 0) break;
        got += n;
        total_ += n;
        if (!prefix && got > max_bytes)
            throw IngestError(IngestErrorKind::TooLarge, name_,
                              "zip entry " + name + " inflates to more than " +
                                  std::to_string(max_bytes) + " bytes");
        if (total_ > limits_.max_total_bytes)
            throw IngestError(IngestErrorKind::TooLarge, name_,
                              "the archive inflates to more than " +
                                  std::to_string(limits_.max_total_bytes) +
                                  " bytes (a zip bomb?), stopped at " + name);
        if (got > limits_.ratio_floor_bytes &&
            static_cast<double>(got) > limits_.max_ratio * compressed)
            throw IngestError(IngestErrorKind::TooLarge, name_,
                              "zip entry " + name + " inflates more than " +
                                  std::to_string(static_cast<int64_t>(limits_.max_ratio)) +
                                  "x its compressed size (a zip bomb?)");
        out.append(chunk.data(), static_cast<qsizetype>(n));
    }
    return out;
}

}  // namespace sl::ingest
