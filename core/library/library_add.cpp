// The add flow: hash, decide (unchanged / duplicate / moved / new / changed), read, store.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/library/library.h"
#include "core/util/sha256.h"

namespace sl {

namespace fs = std::filesystem;

const char* to_string(AddStatus s) {
    switch (s) {
        case AddStatus::Added: return "added";
        case AddStatus::Replaced: return "replaced";
        case AddStatus::Unchanged: return "unchanged";
        case AddStatus::Duplicate: return "duplicate";
        case AddStatus::Failed: return "failed";
    }
    return "unknown";
}

namespace {

AddResult failed(std::string message, DocId id = 0) {
    AddResult r;
    r.status = AddStatus::Failed;
    r.id = id;
    r.message = std::move(message);
    return r;
}

AddResult existing(const Library& lib, AddStatus status, DocId id, std::string message = {}) {
    AddResult r;
    r.status = status;
    r.id = id;
    r.info = lib.info(id).value_or(DocumentInfo{});
    r.message = std::move(message);
    return r;
}

}  // namespace

AddResult add_file(Library& lib, const std::string& path_in, const ReadDocumentFn& read, const AddOptions& options) {
    std::error_code ec;
    fs::path abs = fs::absolute(fs::path(path_in), ec);
    if (ec) return failed(path_in + ": " + ec.message());
    abs = abs.lexically_normal();
    const std::string path = abs.string();

    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return failed(path + ": cannot read the file: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return failed(path + ": not a regular file");
    Library::FileInfo file;
    file.path = path;
    file.size_bytes = static_cast<int64_t>(st.st_size);
    file.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    file.ingest_options = options.ingest_options;

    std::string sha;
    try {
        sha = sha256_file_hex(abs);
    } catch (const Error& e) {
        return failed(e.what());
    }

    lib.remove_abandoned();
    const auto at_path = lib.find_by_path(path);
    if (!options.force) {
        if (at_path && at_path->sha256 == sha) return existing(lib, AddStatus::Unchanged, at_path->id);
        if (auto same = lib.find_by_hash(sha); same && same->path != path) {
            if (fs::exists(fs::path(same->path), ec)) {
                return existing(lib, AddStatus::Duplicate, same->id, "same content as " + same->path);
            }
            // The file was moved or renamed: keep the document, record its new place. An older
            // version at the new path (other bytes) is replaced by it.
            if (at_path) lib.remove_document(at_path->id);
            lib.set_path(same->id, path);
            return existing(lib, AddStatus::Unchanged, same->id, "moved from " + same->path);
        }
    }

    const DocId id = lib.begin_document(file, sha);
    doc::Document d;
    try {
        d = read(path);
    } catch (const std::exception& e) {
        lib.fail_document(id, e.what());
        return failed(e.what(), id);
    }
    if (d.id.empty()) d.id = sha;
    d.path = path;
    lib.write_document(id, d, options.batch_units);  // marks the document Failed if it throws
    AddResult r = existing(lib, at_path ? AddStatus::Replaced : AddStatus::Added, id);
    r.notes = d.notes();
    return r;
}

}  // namespace sl
