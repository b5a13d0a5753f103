// Thin RAII helpers over the sqlite3 C API for the library store: prepared statements, immediate
// transactions, and errors that name the database file. Internal to core/library.
// Threading: as the connection they wrap (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace sl::sqlite {

// The file a connection has open ("" for in-memory).
std::string db_file(sqlite3* db);

// Throws the Sightline error for SQLite result `rc` while doing `what`: FormatError for a corrupt or
// non-database file, LibraryError otherwise; the message names the file.
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what);

// Runs one or more statements without results.
void exec(sqlite3* db, const char* sql);

class Stmt {
public:
    Stmt(sqlite3* db, std::string_view sql);
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    // Binders take 1-based parameter indices and return *this for chaining.
    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, double v);
    Stmt& bind(int i, std::string_view v);
    Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
    Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
    Stmt& bind_blob(int i, const void* data, size_t size);
    Stmt& bind_null(int i);
    template <class T>
    Stmt& bind(int i, const std::optional<T>& v) {
        return v ? bind(i, *v) : bind_null(i);
    }

    // Steps once: true when a row is available, false when done. Throws on error.
    bool step();
    // Steps to completion (for statements without rows).
    void run();
    // Ready for another round of binds and steps.
    void reset();

    bool is_null(int col) const;
    int64_t int64(int col) const;
    int int32(int col) const { return static_cast<int>(int64(col)); }
    double real(int col) const;
    std::string text(int col) const;
    std::vector<uint8_t> blob(int col) const;
    // Pointer and size of a blob column, valid until the next step/reset.
    const void* blob_data(int col, size_t* size) const;

private:
    sqlite3* db_;
    sqlite3_stmt* s_ = nullptr;
    std::string sql_;
};

// BEGIN IMMEDIATE (takes the write lock at once, waiting up to the busy timeout) ... COMMIT;
// rolls back when destroyed without commit().
class Transaction {
public:
    explicit Transaction(sqlite3* db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

private:
    sqlite3* db_;
    bool open_ = false;
};

}  // namespace sl::sqlite
