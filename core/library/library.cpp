// Library: opening, the schema, and writing documents (the crash-safe three-phase store).
// Reading lives in library_read.cpp, token streams / KV caches / chats / reports in
// library_records.cpp, the add flow in library_add.cpp.
#include "core/library/library.h"

#include <sqlite3.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <system_error>
#include <unistd.h>

#include "core/library/library_codec.h"
#include "core/library/library_internal.h"
#include "core/library/library_schema.h"
#include "core/library/sqlite_db.h"

namespace sl {

namespace fs = std::filesystem;
using sqlite::Stmt;
using sqlite::Transaction;

const char* to_string(DocumentState s) {
    switch (s) {
        case DocumentState::Ingesting: return "ingesting";
        case DocumentState::Ready: return "ready";
        case DocumentState::Failed: return "failed";
    }
    return "unknown";
}

const char* to_string(KvCacheState s) {
    switch (s) {
        case KvCacheState::Partial: return "partial";
        case KvCacheState::Complete: return "complete";
    }
    return "unknown";
}

namespace library_internal {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void delete_document_rows(sqlite3* db, DocId id, std::vector<std::string>* kv_files) {
    {
        Stmt kv(db,
                "SELECT DISTINCT k.id, k.path FROM kv_caches k JOIN kv_cache_documents d ON d.kv_cache = k.id "
                "WHERE d.document = ?1");
        kv.bind(1, id);
        std::vector<int64_t> ids;
        while (kv.step()) {
            ids.push_back(kv.int64(0));
            if (kv_files) kv_files->push_back(kv.text(1));
        }
        Stmt del(db, "DELETE FROM kv_caches WHERE id = ?1");
        for (int64_t k : ids) {
            del.bind(1, k).run();
            del.reset();
        }
    }
    Stmt del(db, "DELETE FROM documents WHERE id = ?1");
    del.bind(1, id).run();
}

std::string stored_kv_path(const fs::path& dir, const std::string& path) {
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) return path;
    const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec) return path;
    const fs::path rel = p.lexically_relative(root);
    if (rel.empty() || rel.native().starts_with("..")) return p.string();
    return rel.string();
}

std::string resolve_kv_path(const fs::path& dir, const std::string& stored) {
    const fs::path s(stored);
    if (stored.empty() || s.is_absolute()) return stored;
    std::error_code ec;
    const fs::path in_library = fs::absolute(dir, ec) / s;
    if (!fs::exists(in_library, ec) && fs::exists(s, ec)) return fs::absolute(s, ec).string();  // an old record
    return in_library.lexically_normal().string();
}

void remove_kv_files(const fs::path& kv_dir, const std::vector<std::string>& files) {
    const fs::path root = fs::weakly_canonical(kv_dir);
    for (const auto& stored : files) {
        std::error_code ec;
        const std::string f = resolve_kv_path(kv_dir.parent_path(), stored);
        const fs::path p = fs::weakly_canonical(fs::path(f), ec);
        if (ec) continue;
        // Only files under kv_dir(): the library never deletes what it did not make.
        const auto rel = p.lexically_relative(root);
        if (rel.empty() || rel.native().starts_with("..")) continue;
        fs::remove(p, ec);
    }
}

}  // namespace library_internal

using library_internal::now_ms;

fs::path Library::default_dir() {
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "sightline";
    if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".local" / "share" / "sightline";
    return fs::temp_directory_path() / "sightline-library";
}

Library::Library(fs::path dir, sqlite3* db) : dir_(std::move(dir)), db_(db) {}

Library::Library(Library&& o) noexcept : dir_(std::move(o.dir_)), db_(o.db_) { o.db_ = nullptr; }

Library& Library::operator=(Library&& o) noexcept {
    if (this != &o) {
        if (db_) sqlite3_close_v2(db_);
        dir_ = std::move(o.dir_);
        db_ = o.db_;
        o.db_ = nullptr;
    }
    return *this;
}

Library::~Library() {
    if (db_) sqlite3_close_v2(db_);
}

namespace {

// "file:" URI of `path` with the characters a URI gives meaning to escaped.
std::string file_uri(const fs::path& path) {
    std::string u = "file:";
    for (const char c : path.string()) {
        if (c == '%' || c == '?' || c == '#') {
            char b[4];
            std::snprintf(b, sizeof b, "%%%02X", static_cast<unsigned char>(c));
            u += b;
        } else {
            u += c;
        }
    }
    return u;
}

}  // namespace

Library Library::open(const fs::path& dir, LibraryOpen mode) {
    const fs::path file = dir / "library.sqlite";
    std::error_code ec;
    const bool exists = fs::exists(file, ec);
    if (!exists && mode != LibraryOpen::Create)
        throw LibraryError(dir.string() + ": no library here (nothing was ever added; `sightline-cli add --library " +
                           dir.string() + " FILE` makes one)");
    if (exists && fs::is_regular_file(file, ec) && fs::file_size(file, ec) == 0 && !ec && mode != LibraryOpen::Inspect)
        throw LibraryError(file.string() + ": the library database is empty (0 bytes): the library is damaged; move the folder "
                           "away to start a new one");
    // Write access: the folder (journal, WAL and lock files, kv/) and the database file.
    const bool writable = ::access(dir.c_str(), W_OK) == 0 && (!exists || ::access(file.c_str(), W_OK) == 0);
    const bool read_only = mode == LibraryOpen::Inspect || (exists && !writable);
    if (read_only && mode == LibraryOpen::Create)
        throw LibraryError(dir.string() + ": the library is read-only (no write permission): it can be listed and asked, "
                           "not added to");
    if (!read_only) {
        fs::create_directories(dir / "kv", ec);
        if (ec) throw IoError((dir / "kv").string() + ": cannot create the library folder: " + ec.message());
    }
    sqlite3* db = nullptr;
    // Read-only: immutable (no locks, no -shm, nothing written, works on read-only media; a WAL
    // left by a writer that died is not read).
    const int rc = read_only ? sqlite3_open_v2((file_uri(file) + "?immutable=1").c_str(), &db,
                                               SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr)
                             : sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                               nullptr);
    if (rc != SQLITE_OK) {
        const std::string why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        sqlite3_close_v2(db);
        throw IoError(file.string() + ": cannot open the library database: " + why);
    }
    Library lib(dir, db);  // closes db if anything below throws
    lib.read_only_ = read_only;
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, 10000);
    if (read_only) {
        // The first read: a non-database file fails here with SQLITE_NOTADB.
        sqlite::exec(db, "PRAGMA foreign_keys = ON;");
        if (mode != LibraryOpen::Inspect && library_schema::read_version(db) != kSchemaVersion)
            throw LibraryError(file.string() + ": the library is read-only and was written by another Sightline version "
                               "(schema " + std::to_string(library_schema::read_version(db)) + ", this one " +
                               std::to_string(kSchemaVersion) + ")");
    } else {
        {
            // The first read of the file: a non-database file fails here with SQLITE_NOTADB.
            Stmt wal(db, "PRAGMA journal_mode = WAL");
            if (!wal.step() || wal.text(0) != "wal")
                throw LibraryError(file.string() + ": cannot switch the library database to WAL mode");
        }
        sqlite::exec(db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;");
        library_schema::migrate(db);
    }
    if (mode != LibraryOpen::Inspect) {
        const std::vector<std::string> problems = library_schema::schema_problems(db);
        if (!problems.empty())
            throw LibraryError(file.string() + ": the library is damaged (" + problems.front() +
                               "); `sightline-cli library check` lists every problem");
    }
    return lib;
}

std::vector<std::string> Library::check() const {
    std::vector<std::string> problems;
    std::error_code ec;
    const fs::path file = dir_ / "library.sqlite";
    if (fs::file_size(file, ec) == 0 && !ec) problems.push_back("the database file is empty (0 bytes)");
    if (const std::string ic = integrity_check(); ic != "ok") problems.push_back("integrity: " + ic);
    {
        Stmt fk(db_, "PRAGMA foreign_key_check");
        int shown = 0, n = 0;
        while (fk.step()) {
            ++n;
            if (shown < 10) {
                problems.push_back("row " + std::to_string(fk.int64(1)) + " of table " + fk.text(0) + " points to a missing row of " +
                                   fk.text(2));
                ++shown;
            }
        }
        if (n > shown) problems.push_back(std::to_string(n - shown) + " more rows point to missing rows");
    }
    try {
        library_schema::read_version(db_);
    } catch (const Error& e) {
        problems.push_back(e.what());
    }
    for (auto& p : library_schema::schema_problems(db_)) problems.push_back(std::move(p));
    return problems;
}

int Library::schema_version() const { return library_schema::read_version(db_); }

// ---- writing documents --------------------------------------------------------------------------

namespace {

void check_document(sqlite3* db, DocId id, DocumentState want, const char* doing) {
    Stmt s(db, "SELECT state FROM documents WHERE id = ?1");
    s.bind(1, id);
    if (!s.step())
        throw LibraryError(sqlite::db_file(db) + ": " + doing + ": no document with id " + std::to_string(id));
    const auto state = library_codec::document_state(s.text(0), sqlite::db_file(db));
    if (state != want)
        throw LibraryError(sqlite::db_file(db) + ": " + doing + ": document " + std::to_string(id) + " is " +
                           to_string(state) + ", expected " + to_string(want));
}

template <class B>
void bind_box(Stmt& s, int first, const std::optional<B>& box) {
    if (box) {
        s.bind(first, static_cast<double>(box->x0)).bind(first + 1, static_cast<double>(box->y0));
        s.bind(first + 2, static_cast<double>(box->x1)).bind(first + 3, static_cast<double>(box->y1));
    } else {
        for (int i = 0; i < 4; ++i) s.bind_null(first + i);
    }
}

// Appends units to document `id` inside the caller's transaction.
void insert_units(sqlite3* db, DocId id, const std::vector<doc::Unit>& units, size_t from, size_t to) {
    Stmt count(db, "SELECT count(*) FROM units WHERE document = ?1");
    count.bind(1, id).step();
    int64_t position = count.int64(0);
    Stmt unit(db,
              "INSERT INTO units(document, idx, kind, label, t0, t1, width, height, rotation) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    Stmt block(db,
               "INSERT INTO blocks(unit, idx, role, text, x0, y0, x1, y1, t0, t1, confidence, lines) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    Stmt visual(db,
                "INSERT INTO visuals(unit, idx, kind, x0, y0, x1, y1, timestamp, width, height, locator, mime, "
                "encoded) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    for (size_t i = from; i < to; ++i, ++position) {
        const doc::Unit& u = units[i];
        unit.bind(1, id).bind(2, position).bind(3, doc::to_string(u.kind)).bind(4, u.label);
        if (u.time) unit.bind(5, u.time->t0).bind(6, u.time->t1);
        else unit.bind_null(5).bind_null(6);
        unit.bind(7, static_cast<double>(u.width)).bind(8, static_cast<double>(u.height)).bind(9, u.rotation);
        unit.run();
        unit.reset();
        const int64_t unit_row = sqlite3_last_insert_rowid(db);
        for (size_t b = 0; b < u.blocks.size(); ++b) {
            const doc::Block& k = u.blocks[b];
            block.bind(1, unit_row).bind(2, static_cast<int64_t>(b)).bind(3, doc::to_string(k.role)).bind(4, k.text);
            bind_box(block, 5, k.bbox);
            if (k.time) block.bind(9, k.time->t0).bind(10, k.time->t1);
            else block.bind_null(9).bind_null(10);
            block.bind(11, static_cast<double>(k.confidence));
            if (k.lines.empty()) {
                block.bind_null(12);
            } else {
                const auto blob = library_codec::encode_lines(k.lines);
                block.bind_blob(12, blob.data(), blob.size());
            }
            block.run();
            block.reset();
        }
        for (size_t v = 0; v < u.visuals.size(); ++v) {
            const doc::Visual& x = u.visuals[v];
            visual.bind(1, unit_row).bind(2, static_cast<int64_t>(v)).bind(3, doc::to_string(x.kind));
            bind_box(visual, 4, x.bbox);
            visual.bind(8, x.timestamp).bind(9, x.width).bind(10, x.height).bind(11, x.locator).bind(12, x.mime);
            if (x.encoded.empty()) visual.bind_null(13);
            else visual.bind_blob(13, x.encoded.data(), x.encoded.size());
            visual.run();
            visual.reset();
        }
    }
}

// The final step of storing, inside the caller's transaction. Returns KV files to delete.
std::vector<std::string> finish_impl(sqlite3* db, DocId id, const doc::Document& d) {
    check_document(db, id, DocumentState::Ingesting, "finishing a document");
    Stmt up(db,
            "UPDATE documents SET kind = ?2, title = ?3, duration = ?4, sha256 = CASE WHEN ?5 = '' THEN sha256 "
            "ELSE ?5 END, unit_count = (SELECT count(*) FROM units WHERE document = ?1), state = 'ready', "
            "error = '', ready_ms = ?6, writer_pid = 0 WHERE id = ?1");
    up.bind(1, id).bind(2, doc::to_string(d.kind)).bind(3, d.title).bind(4, d.duration).bind(5, d.id);
    up.bind(6, now_ms()).run();
    Stmt meta(db, "INSERT OR REPLACE INTO document_metadata(document, key, value) VALUES (?1, ?2, ?3)");
    for (const auto& [k, v] : d.metadata) {
        meta.bind(1, id).bind(2, k).bind(3, v).run();
        meta.reset();
    }
    Stmt out(db, "INSERT INTO outline(document, idx, title, level, unit, time) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    for (size_t i = 0; i < d.outline.size(); ++i) {
        const auto& o = d.outline[i];
        out.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, o.title).bind(4, o.level).bind(5, o.unit);
        out.bind(6, o.time).run();
        out.reset();
    }
    Stmt link(db,
              "INSERT INTO links(document, idx, unit, x0, y0, x1, y1, uri, target_unit) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    for (size_t i = 0; i < d.links.size(); ++i) {
        const auto& l = d.links[i];
        link.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, l.unit);
        bind_box(link, 4, std::optional<doc::BBox>(l.bbox));
        link.bind(8, l.uri).bind(9, l.target_unit).run();
        link.reset();
    }
    // The older version of this path (and earlier failures) go in the same transaction.
    std::vector<std::string> kv_files;
    Stmt olds(db,
              "SELECT id FROM documents WHERE path = (SELECT path FROM documents WHERE id = ?1) AND id != ?1 "
              "AND state != 'ingesting'");
    olds.bind(1, id);
    std::vector<DocId> old_ids;
    while (olds.step()) old_ids.push_back(olds.int64(0));
    for (DocId o : old_ids) library_internal::delete_document_rows(db, o, &kv_files);
    return kv_files;
}

}  // namespace

DocId Library::begin_document(const FileInfo& file, const std::string& sha256) {
    Transaction tx(db_);
    Stmt s(db_,
           "INSERT INTO documents(path, sha256, size_bytes, mtime_ns, state, ingest_options, added_ms, writer_pid, kind) "
           "VALUES (?1, ?2, ?3, ?4, 'ingesting', ?5, ?6, ?7, ?8)");
    s.bind(1, file.path).bind(2, sha256).bind(3, file.size_bytes).bind(4, file.mtime_ns);
    s.bind(5, file.ingest_options.empty() ? std::string("{}") : file.ingest_options);
    // The kind by the extension until the document is read (a failed add keeps it).
    s.bind(6, now_ms()).bind(7, static_cast<int64_t>(::getpid())).bind(8, std::string(doc::to_string(doc::kind_from_extension(file.path)))).run();
    const DocId id = sqlite3_last_insert_rowid(db_);
    tx.commit();
    return id;
}

void Library::add_units(DocId id, const std::vector<doc::Unit>& units) {
    Transaction tx(db_);
    check_document(db_, id, DocumentState::Ingesting, "adding units");
    insert_units(db_, id, units, 0, units.size());
    tx.commit();
}

void Library::finish_document(DocId id, const doc::Document& d) {
    Transaction tx(db_);
    const auto kv_files = finish_impl(db_, id, d);
    tx.commit();
    library_internal::remove_kv_files(kv_dir(), kv_files);
}

void Library::fail_document(DocId id, const std::string& error) {
    Transaction tx(db_);
    Stmt exists(db_, "SELECT path FROM documents WHERE id = ?1");
    exists.bind(1, id);
    if (!exists.step())
        throw LibraryError(database_path().string() + ": marking a document failed: no document with id " +
                           std::to_string(id));
    const std::string path = exists.text(0);
    Stmt units(db_, "DELETE FROM units WHERE document = ?1");
    units.bind(1, id).run();
    Stmt up(db_,
            "UPDATE documents SET state = 'failed', error = ?2, unit_count = 0, writer_pid = 0 WHERE id = ?1");
    up.bind(1, id).bind(2, error).run();
    Stmt old(db_, "DELETE FROM documents WHERE path = ?1 AND id != ?2 AND state = 'failed'");
    old.bind(1, path).bind(2, id).run();
    tx.commit();
}

void Library::set_path(DocId id, const std::string& path) {
    Transaction tx(db_);
    Stmt s(db_, "UPDATE documents SET path = ?2 WHERE id = ?1");
    s.bind(1, id).bind(2, path).run();
    if (sqlite3_changes(db_) != 1)
        throw LibraryError(database_path().string() + ": setting a path: no document with id " + std::to_string(id));
    tx.commit();
}

void Library::write_document(DocId id, const doc::Document& d, int batch_units) {
    const size_t batch = static_cast<size_t>(batch_units > 0 ? batch_units : 64);
    try {
        std::vector<std::string> kv_files;
        if (d.units.size() <= batch) {
            Transaction tx(db_);
            insert_units(db_, id, d.units, 0, d.units.size());
            kv_files = finish_impl(db_, id, d);
            tx.commit();
        } else {
            for (size_t at = 0; at < d.units.size(); at += batch) {
                Transaction tx(db_);
                check_document(db_, id, DocumentState::Ingesting, "adding units");
                insert_units(db_, id, d.units, at, std::min(d.units.size(), at + batch));
                tx.commit();
            }
            Transaction tx(db_);
            kv_files = finish_impl(db_, id, d);
            tx.commit();
        }
        library_internal::remove_kv_files(kv_dir(), kv_files);
    } catch (const std::exception& e) {
        try {
            fail_document(id, std::string("storing failed: ") + e.what());
        } catch (...) {  // the original error is the one to report
        }
        throw;
    }
}

DocId Library::store_document(const doc::Document& d, const FileInfo& file, int batch_units) {
    const DocId id = begin_document(file, d.id);
    write_document(id, d, batch_units);
    return id;
}

bool Library::remove_document(DocId id) {
    Transaction tx(db_);
    Stmt s(db_, "SELECT sha256 FROM documents WHERE id = ?1");
    s.bind(1, id);
    if (!s.step()) return false;
    const std::string sha = s.text(0);
    std::vector<std::string> kv_files;
    library_internal::delete_document_rows(db_, id, &kv_files);
    Stmt other(db_, "SELECT 1 FROM documents WHERE sha256 = ?1");
    other.bind(1, sha);
    const bool shared = other.step();
    tx.commit();
    library_internal::remove_kv_files(kv_dir(), kv_files);
    // The question ranking's sentence embeddings of its units (core/ask/unit_embeddings.h:
    // embed/<first 24 hex of the content hash>-<model>.emb), unless another row has the same bytes.
    if (!shared && sha.size() >= 24) {
        std::error_code ec;
        const std::string prefix = sha.substr(0, 24) + "-";
        for (std::filesystem::directory_iterator it(dir_ / "embed", ec), end; !ec && it != end; it.increment(ec))
            if (it->path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(it->path(), ec);
    }
    return true;
}

int Library::remove_abandoned() {
    Stmt s(db_, "SELECT id, writer_pid FROM documents WHERE state = 'ingesting'");
    std::vector<DocId> dead;
    while (s.step()) {
        const int64_t pid = s.int64(1);
        const bool alive = pid > 0 && (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
        if (!alive) dead.push_back(s.int64(0));
    }
    if (dead.empty()) return 0;
    Transaction tx(db_);
    std::vector<std::string> kv_files;
    for (DocId id : dead) library_internal::delete_document_rows(db_, id, &kv_files);
    tx.commit();
    library_internal::remove_kv_files(kv_dir(), kv_files);
    return static_cast<int>(dead.size());
}

// ---- maintenance --------------------------------------------------------------------------------

std::string Library::integrity_check() const {
    Stmt s(db_, "PRAGMA integrity_check");
    std::string out;
    while (s.step()) {
        if (!out.empty()) out += '\n';
        out += s.text(0);
    }
    return out;
}

int64_t Library::data_version() const {
    Stmt s(db_, "PRAGMA data_version");
    s.step();
    return s.int64(0);
}

void Library::checkpoint() { sqlite::exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)"); }

}  // namespace sl
