// Library: reading documents back (lists, look-ups, whole Documents, single units, visual bytes).
#include <sqlite3.h>

#include <algorithm>
#include <unordered_map>

#include "core/library/library.h"
#include "core/library/library_codec.h"
#include "core/library/sqlite_db.h"

namespace sl {

using sqlite::Stmt;

namespace {

constexpr const char* kInfoColumns =
    "id, path, sha256, kind, title, size_bytes, mtime_ns, state, error, ingest_options, unit_count, duration, "
    "added_ms, ready_ms";

DocumentInfo read_info(const Stmt& s, const std::string& file) {
    DocumentInfo i;
    i.id = s.int64(0);
    i.path = s.text(1);
    i.sha256 = s.text(2);
    i.kind = library_codec::document_kind(s.text(3), file);
    i.title = s.text(4);
    i.size_bytes = s.int64(5);
    i.mtime_ns = s.int64(6);
    i.state = library_codec::document_state(s.text(7), file);
    i.error = s.text(8);
    i.ingest_options = s.text(9);
    i.unit_count = s.int32(10);
    i.duration = s.real(11);
    i.added_ms = s.int64(12);
    i.ready_ms = s.int64(13);
    return i;
}

std::optional<DocumentInfo> one_info(sqlite3* db, const std::string& where, const std::string& arg) {
    Stmt s(db, std::string("SELECT ") + kInfoColumns + " FROM documents WHERE " + where);
    s.bind(1, arg);
    if (!s.step()) return std::nullopt;
    return read_info(s, sqlite::db_file(db));
}

std::optional<doc::BBox> read_box(const Stmt& s, int first) {
    if (s.is_null(first)) return std::nullopt;
    return doc::BBox{static_cast<float>(s.real(first)), static_cast<float>(s.real(first + 1)),
                     static_cast<float>(s.real(first + 2)), static_cast<float>(s.real(first + 3))};
}

std::optional<doc::TimeRange> read_time(const Stmt& s, int first) {
    if (s.is_null(first)) return std::nullopt;
    return doc::TimeRange{s.real(first), s.real(first + 1)};
}

// Reads the units of `id` with index in [first, last) into `out` (indexed from `first`).
void read_units(sqlite3* db, DocId id, int first, int last, const LoadOptions& options,
                std::vector<doc::Unit>& out) {
    const std::string file = sqlite::db_file(db);
    std::unordered_map<int64_t, size_t> slot;  // units.id -> position in out
    {
        Stmt u(db,
               "SELECT id, idx, kind, label, t0, t1, width, height, rotation FROM units "
               "WHERE document = ?1 AND idx >= ?2 AND idx < ?3 ORDER BY idx");
        u.bind(1, id).bind(2, first).bind(3, last);
        while (u.step()) {
            doc::Unit x;
            x.index = u.int32(1);
            x.kind = library_codec::unit_kind(u.text(2), file);
            x.label = u.text(3);
            x.time = read_time(u, 4);
            x.width = static_cast<float>(u.real(6));
            x.height = static_cast<float>(u.real(7));
            x.rotation = u.int32(8);
            slot[u.int64(0)] = out.size();
            out.push_back(std::move(x));
        }
    }
    const std::string lines_col = options.lines ? "b.lines" : "NULL";
    Stmt b(db, "SELECT b.unit, b.role, b.text, b.x0, b.y0, b.x1, b.y1, b.t0, b.t1, b.confidence, " + lines_col +
                   " FROM blocks b JOIN units u ON b.unit = u.id WHERE u.document = ?1 AND u.idx >= ?2 AND "
                   "u.idx < ?3 ORDER BY u.idx, b.idx");
    b.bind(1, id).bind(2, first).bind(3, last);
    while (b.step()) {
        auto it = slot.find(b.int64(0));
        if (it == slot.end()) continue;
        doc::Block k;
        k.role = library_codec::block_role(b.text(1), file);
        k.text = b.text(2);
        k.bbox = read_box(b, 3);
        k.time = read_time(b, 7);
        k.confidence = static_cast<float>(b.real(9));
        if (!b.is_null(10)) {
            size_t n = 0;
            const void* p = b.blob_data(10, &n);
            k.lines = library_codec::decode_lines(p, n, file);
        }
        out[it->second].blocks.push_back(std::move(k));
    }
    const std::string bytes_col = options.visual_bytes ? "v.encoded" : "NULL";
    Stmt v(db, "SELECT v.unit, v.kind, v.x0, v.y0, v.x1, v.y1, v.timestamp, v.width, v.height, v.locator, "
               "v.mime, " + bytes_col +
                   " FROM visuals v JOIN units u ON v.unit = u.id WHERE u.document = ?1 AND u.idx >= ?2 AND "
                   "u.idx < ?3 ORDER BY u.idx, v.idx");
    v.bind(1, id).bind(2, first).bind(3, last);
    while (v.step()) {
        auto it = slot.find(v.int64(0));
        if (it == slot.end()) continue;
        doc::Visual x;
        x.kind = library_codec::visual_kind(v.text(1), file);
        x.bbox = read_box(v, 2);
        if (!v.is_null(6)) x.timestamp = v.real(6);
        x.width = v.int32(7);
        x.height = v.int32(8);
        x.locator = v.text(9);
        x.mime = v.text(10);
        if (!v.is_null(11)) x.encoded = v.blob(11);
        out[it->second].visuals.push_back(std::move(x));
    }
}

DocumentInfo require_ready(const Library& lib, DocId id, const char* doing) {
    auto info = lib.info(id);
    if (!info)
        throw LibraryError(lib.database_path().string() + ": " + doing + ": no document with id " +
                           std::to_string(id));
    if (info->state != DocumentState::Ready)
        throw LibraryError(lib.database_path().string() + ": " + doing + ": " + info->path + " is " +
                           to_string(info->state) + ", not ready");
    return *info;
}

// Units [first, first + want) have indices first.. (UNIQUE(document, idx), read in idx order), so
// reading fewer than asked for means rows are missing or misnumbered: a damaged library.
void require_units(const Library& lib, const DocumentInfo& info, size_t got, int64_t want) {
    if (want >= 0 && got == static_cast<size_t>(want)) return;
    throw FormatError(lib.database_path().string() + ": " + info.path + " is damaged in the library: " +
                      std::to_string(got) + " of its units read back where " + std::to_string(want) +
                      " were expected (unit count " + std::to_string(info.unit_count) + ")");
}

}  // namespace

std::vector<DocumentInfo> Library::list_documents(bool include_ingesting) const {
    Stmt s(db_, std::string("SELECT ") + kInfoColumns + " FROM documents" +
                    (include_ingesting ? "" : " WHERE state != 'ingesting'") + " ORDER BY path, id");
    std::vector<DocumentInfo> out;
    const std::string file = sqlite::db_file(db_);
    while (s.step()) out.push_back(read_info(s, file));
    return out;
}

std::optional<DocumentInfo> Library::info(DocId id) const {
    Stmt s(db_, std::string("SELECT ") + kInfoColumns + " FROM documents WHERE id = ?1");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_info(s, sqlite::db_file(db_));
}

std::optional<DocumentInfo> Library::find_by_hash(const std::string& sha256) const {
    return one_info(db_, "sha256 = ?1 AND state = 'ready' ORDER BY ready_ms DESC, id DESC", sha256);
}

std::optional<DocumentInfo> Library::find_by_path(const std::string& path) const {
    return one_info(db_, "path = ?1 AND state = 'ready' ORDER BY ready_ms DESC, id DESC", path);
}

std::optional<DocumentInfo> Library::find_any_by_path(const std::string& path) const {
    return one_info(db_, "path = ?1 ORDER BY id DESC", path);
}

doc::Document Library::load_document(DocId id, const LoadOptions& options) const {
    // One read transaction, so that the document is read from one snapshot even while another
    // connection writes.
    sqlite::exec(db_, "BEGIN");
    try {
        const DocumentInfo info = require_ready(*this, id, "loading a document");
        doc::Document d;
        d.id = info.sha256;
        d.path = info.path;
        d.kind = info.kind;
        d.title = info.title;
        d.duration = info.duration;
        {
            Stmt m(db_, "SELECT key, value FROM document_metadata WHERE document = ?1");
            m.bind(1, id);
            while (m.step()) d.metadata[m.text(0)] = m.text(1);
        }
        {
            Stmt o(db_, "SELECT title, level, unit, time FROM outline WHERE document = ?1 ORDER BY idx");
            o.bind(1, id);
            while (o.step()) {
                doc::OutlineEntry e;
                e.title = o.text(0);
                e.level = o.int32(1);
                e.unit = o.int32(2);
                if (!o.is_null(3)) e.time = o.real(3);
                d.outline.push_back(std::move(e));
            }
        }
        {
            Stmt l(db_, "SELECT unit, x0, y0, x1, y1, uri, target_unit FROM links WHERE document = ?1 ORDER BY idx");
            l.bind(1, id);
            while (l.step()) {
                doc::Link k;
                k.unit = l.int32(0);
                k.bbox = *read_box(l, 1);
                k.uri = l.text(5);
                k.target_unit = l.int32(6);
                d.links.push_back(std::move(k));
            }
        }
        // unit_count comes from the database: a damaged one must not size an allocation.
        d.units.reserve(static_cast<size_t>(std::clamp(info.unit_count, 0, 4096)));
        read_units(db_, id, 0, info.unit_count, options, d.units);
        require_units(*this, info, d.units.size(), info.unit_count);
        sqlite::exec(db_, "COMMIT");
        return d;
    } catch (...) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

doc::Unit Library::load_unit(DocId id, int unit, const LoadOptions& options) const {
    sqlite::exec(db_, "BEGIN");
    try {
        const DocumentInfo info = require_ready(*this, id, "loading a unit");
        if (unit < 0 || unit >= info.unit_count)
            throw LibraryError(database_path().string() + ": " + info.path + " has no unit " + std::to_string(unit) +
                               " (it has " + std::to_string(info.unit_count) + ")");
        std::vector<doc::Unit> out;
        read_units(db_, id, unit, unit + 1, options, out);
        require_units(*this, info, out.size(), 1);
        sqlite::exec(db_, "COMMIT");
        return std::move(out[0]);
    } catch (...) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
}

std::vector<uint8_t> Library::visual_bytes(DocId id, int unit, int visual) const {
    Stmt s(db_,
           "SELECT v.encoded FROM visuals v JOIN units u ON v.unit = u.id WHERE u.document = ?1 AND u.idx = ?2 "
           "AND v.idx = ?3");
    s.bind(1, id).bind(2, unit).bind(3, visual);
    if (!s.step())
        throw LibraryError(database_path().string() + ": document " + std::to_string(id) + " has no visual " +
                           std::to_string(visual) + " on unit " + std::to_string(unit));
    return s.is_null(0) ? std::vector<uint8_t>() : s.blob(0);
}

}  // namespace sl
