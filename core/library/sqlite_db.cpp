#include "core/library/sqlite_db.h"

#include <sqlite3.h>

#include "core/library/library.h"

namespace sl::sqlite {

std::string db_file(sqlite3* db) {
    const char* f = db ? sqlite3_db_filename(db, "main") : nullptr;
    return f && *f ? std::string(f) : std::string("(library database)");
}

void fail(sqlite3* db, int rc, const std::string& what) {
    const int primary = rc & 0xff;
    std::string msg = db_file(db) + ": ";
    const char* detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
        msg += "not a Sightline library database, or it is corrupt (" + std::string(detail) + "; while " +
               what + ")";
        throw FormatError(msg);
    }
    msg += what + " failed: " + detail;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
        msg += " (another process held the library for too long)";
    if (primary == SQLITE_FULL) msg += " (disk full)";
    if (primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR || primary == SQLITE_READONLY ||
        primary == SQLITE_PERM)
        throw IoError(msg);
    throw LibraryError(msg);
}

void exec(sqlite3* db, const char* sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        sqlite3_free(err);
        std::string s(sql);
        if (s.size() > 60) s = s.substr(0, 60) + "...";
        fail(db, rc, "'" + s + "'");
    }
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s_, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, "preparing '" + sql_ + "'");
}

Stmt::~Stmt() { sqlite3_finalize(s_); }

namespace {
void check_bind(sqlite3* db, int rc, const std::string& sql) {
    if (rc != SQLITE_OK) fail(db, rc, "binding a parameter of '" + sql + "'");
}
}  // namespace

Stmt& Stmt::bind(int i, int64_t v) {
    check_bind(db_, sqlite3_bind_int64(s_, i, v), sql_);
    return *this;
}

Stmt& Stmt::bind(int i, double v) {
    check_bind(db_, sqlite3_bind_double(s_, i, v), sql_);
    return *this;
}

Stmt& Stmt::bind(int i, std::string_view v) {
    check_bind(db_, sqlite3_bind_text64(s_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), sql_);
    return *this;
}

Stmt& Stmt::bind_blob(int i, const void* data, size_t size) {
    // A zero-length blob is stored as a blob, not NULL (sqlite3_bind_blob64 with nullptr is NULL).
    static const char kEmpty = 0;
    check_bind(db_, sqlite3_bind_blob64(s_, i, size ? data : &kEmpty, size, SQLITE_TRANSIENT), sql_);
    return *this;
}

Stmt& Stmt::bind_null(int i) {
    check_bind(db_, sqlite3_bind_null(s_, i), sql_);
    return *this;
}

bool Stmt::step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, "'" + sql_ + "'");
}

void Stmt::run() {
    while (step()) {
    }
}

void Stmt::reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }
int64_t Stmt::int64(int col) const { return sqlite3_column_int64(s_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(s_, col); }

std::string Stmt::text(int col) const {
    const auto* p = sqlite3_column_text(s_, col);
    const int n = sqlite3_column_bytes(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

const void* Stmt::blob_data(int col, size_t* size) const {
    const void* p = sqlite3_column_blob(s_, col);
    *size = static_cast<size_t>(sqlite3_column_bytes(s_, col));
    return p;
}

std::vector<uint8_t> Stmt::blob(int col) const {
    size_t n = 0;
    const auto* p = static_cast<const uint8_t*>(blob_data(col, &n));
    return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

Transaction::Transaction(sqlite3* db) : db_(db) {
    exec(db_, "BEGIN IMMEDIATE");
    open_ = true;
}

Transaction::~Transaction() {
    if (open_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
    exec(db_, "COMMIT");
    open_ = false;
}

}  // namespace sl::sqlite
