#include "core/library/library_schema.h"

#include <sqlite3.h>

#include "core/library/library.h"
#include "core/library/sqlite_db.h"

namespace sl::library_schema {

namespace {

// Version 1: documents and their content. Enumerations are stored as the text of to_string().
// Boxes are four REAL columns (NULL when absent); times REAL seconds (NULL when absent).
// Block lines are a blob (see library_codec.h).
const char* kV1 = R"SQL(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) VALUES (0);
CREATE TABLE documents(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'pdf',
  title TEXT NOT NULL DEFAULT '',
  size_bytes INTEGER NOT NULL DEFAULT 0,
  mtime_ns INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  ingest_options TEXT NOT NULL DEFAULT '{}',
  duration REAL NOT NULL DEFAULT 0,
  unit_count INTEGER NOT NULL DEFAULT 0,
  added_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX documents_path ON documents(path);
CREATE INDEX documents_sha256 ON documents(sha256);
CREATE TABLE document_metadata(
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(document, key));
CREATE TABLE units(
  id INTEGER PRIMARY KEY,
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  kind TEXT NOT NULL,
  label TEXT NOT NULL,
  t0 REAL, t1 REAL,
  width REAL NOT NULL, height REAL NOT NULL,
  rotation INTEGER NOT NULL,
  UNIQUE(document, idx));
CREATE TABLE blocks(
  id INTEGER PRIMARY KEY,
  unit INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  role TEXT NOT NULL,
  text TEXT NOT NULL,
  x0 REAL, y0 REAL, x1 REAL, y1 REAL,
  t0 REAL, t1 REAL,
  confidence REAL NOT NULL,
  lines BLOB,
  UNIQUE(unit, idx));
CREATE TABLE visuals(
  id INTEGER PRIMARY KEY,
  unit INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  kind TEXT NOT NULL,
  x0 REAL, y0 REAL, x1 REAL, y1 REAL,
  timestamp REAL,
  width INTEGER NOT NULL, height INTEGER NOT NULL,
  locator TEXT NOT NULL,
  mime TEXT NOT NULL,
  encoded BLOB,
  UNIQUE(unit, idx));
CREATE TABLE outline(
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  title TEXT NOT NULL,
  level INTEGER NOT NULL,
  unit INTEGER NOT NULL,
  time REAL,
  PRIMARY KEY(document, idx));
CREATE TABLE links(
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  unit INTEGER NOT NULL,
  x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
  uri TEXT NOT NULL,
  target_unit INTEGER NOT NULL,
  PRIMARY KEY(document, idx));
)SQL";

// Version 2: crash bookkeeping on documents (the writer's pid, when it became ready), token
// streams with provenance, KV cache files, chats and reports.
const char* kV2 = R"SQL(
ALTER TABLE documents ADD COLUMN writer_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN ready_ms INTEGER NOT NULL DEFAULT 0;
UPDATE documents SET ready_ms = added_ms WHERE state = 'ready';
CREATE TABLE token_streams(
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  fingerprint TEXT NOT NULL,
  settings TEXT NOT NULL,
  n_tokens INTEGER NOT NULL,
  tokens BLOB NOT NULL,
  spans BLOB NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY(document, fingerprint));
CREATE TABLE kv_caches(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  model_fingerprint TEXT NOT NULL,
  documents TEXT NOT NULL,
  n_tokens INTEGER NOT NULL,
  total_tokens INTEGER NOT NULL,
  settings TEXT NOT NULL,
  state TEXT NOT NULL,
  updated_ms INTEGER NOT NULL);
CREATE INDEX kv_caches_key ON kv_caches(model_fingerprint, documents);
CREATE TABLE kv_cache_documents(
  kv_cache INTEGER NOT NULL REFERENCES kv_caches(id) ON DELETE CASCADE,
  document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  PRIMARY KEY(kv_cache, position));
CREATE INDEX kv_cache_documents_document ON kv_cache_documents(document);
CREATE TABLE chats(
  id INTEGER PRIMARY KEY,
  question TEXT NOT NULL,
  answer TEXT NOT NULL,
  citations TEXT NOT NULL,
  settings TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE reports(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  format TEXT NOT NULL,
  chats TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
)SQL";

bool has_table(sqlite3* db, const char* name) {
    sqlite::Stmt s(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
    s.bind(1, name);
    return s.step();
}

}  // namespace

const std::vector<const char*>& migrations() {
    static const std::vector<const char*> m = {kV1, kV2};
    static_assert(Library::kSchemaVersion == 2, "add the migration to the list");
    return m;
}

int read_version(sqlite3* db) {
    if (!has_table(db, "schema_version")) {
        sqlite::Stmt any(db, "SELECT count(*) FROM sqlite_master");
        any.step();
        if (any.int64(0) != 0)
            throw FormatError(sqlite::db_file(db) +
                              ": an SQLite database but not a Sightline library (no schema_version table)");
        return 0;
    }
    sqlite::Stmt s(db, "SELECT version FROM schema_version");
    if (!s.step())
        throw FormatError(sqlite::db_file(db) + ": the library's schema_version table is empty");
    return s.int32(0);
}

void migrate(sqlite3* db) {
    const int target = static_cast<int>(migrations().size());
    if (read_version(db) == target) return;  // the common case, without taking the write lock
    sqlite::Transaction tx(db);
    const int have = read_version(db);         // again, under the lock: another process may have won
    if (have > target)
        throw FormatError(sqlite::db_file(db) + ": the library has schema version " + std::to_string(have) +
                          ", newer than this Sightline knows (" + std::to_string(target) +
                          "); use a newer Sightline");
    for (int v = have; v < target; ++v) sqlite::exec(db, migrations()[static_cast<size_t>(v)]);
    sqlite::Stmt set(db, "UPDATE schema_version SET version = ?1");
    set.bind(1, target).run();
    tx.commit();
}

std::vector<std::string> schema_problems(sqlite3* db) {
    // The current schema, as the migrations make it.
    sqlite3* mem = nullptr;
    if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
        sqlite3_close_v2(mem);
        return {"cannot open an in-memory database to compare the schema with"};
    }
    struct Closer {
        sqlite3* d;
        ~Closer() { sqlite3_close_v2(d); }
    } closer{mem};
    for (const char* m : migrations()) sqlite::exec(mem, m);
    std::vector<std::string> problems;
    sqlite::Stmt tables(mem, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
    while (tables.step()) {
        const std::string t = tables.text(0);
        if (!has_table(db, t.c_str())) {
            problems.push_back("table " + t + " is missing");
            continue;
        }
        sqlite::Stmt want(mem, ("SELECT name FROM pragma_table_info('" + t + "')").c_str());
        while (want.step()) {
            const std::string col = want.text(0);
            sqlite::Stmt have(db, ("SELECT 1 FROM pragma_table_info('" + t + "') WHERE name = ?1").c_str());
            have.bind(1, col);
            if (!have.step()) problems.push_back("column " + t + "." + col + " is missing");
        }
    }
    return problems;
}

}  // namespace sl::library_schema
