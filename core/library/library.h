// The library: one SQLite store (WAL mode) per user that keeps every ingested Document, its
// thumbnails, the token streams the context builder made from it (with provenance), the KV cache
// files prefilled from them, and the chats and reports made on top. Free of Qt (sqlite3 C API).
//
// Files: <dir>/library.sqlite (+ -wal, -shm), <dir>/kv/ for KV cache files the engine writes.
// Default <dir>: $XDG_DATA_HOME/sightline, else ~/.local/share/sightline (default_dir()).
//
// Identity: a stored document has a library id (DocId, SQLite rowid, stable until removed) and a
// content hash (DocumentInfo::sha256 == doc::Document::id == doc::SourceRef::document). At most one
// *ready* document per path; normally at most one ready document per content hash (add_file()
// reports a second path with the same bytes as a duplicate instead of storing it twice).
//
// Crash safety: every write below is one SQLite transaction. store_document() writes a document
// as: a header row in state Ingesting → units in batches (one transaction each) → one final
// transaction that fills title/metadata/outline/links, flips the state to Ready and removes the
// older version of the same path. A crash or kill -9 at any point leaves either the old version
// Ready, or the new one Ready; never a half document marked Ready. Rows left in state Ingesting by a
// dead process are invisible to list_documents() (unless asked) and are deleted by
// remove_abandoned() (add_file() calls it first).
//
// Threading: a Library object owns one SQLite connection and is NOT thread-safe; use one object
// per thread. Any number of Library objects (threads or processes) may open the same directory:
// readers never block and see the last committed state (WAL); writers take turns (busy timeout
// 10 s, then LibraryError). Objects are movable, not copyable.
//
// Durability: synchronous=FULL, so a commit that returned survives a process kill and a power cut.
//
// Errors: a corrupt database or a file that is not one throws FormatError naming the file
// ("…/library.sqlite: not a Sightline library database, or it is corrupt (file is not a database;
// while …)"); so does a database from a newer Sightline. A file that cannot be opened, read or
// written throws IoError; other SQLite failures (busy past the timeout, constraint) throw
// LibraryError naming the file and the operation. Bad arguments (unknown DocId) throw LibraryError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "core/util/error.h"

struct sqlite3;

namespace sl {

// A database operation failed (locked for too long, disk full, constraint, unknown id...).
class LibraryError : public Error {
public:
    using Error::Error;
};

using DocId = int64_t;

enum class DocumentState {
    Ingesting,  // header written, units being written; not usable
    Ready,      // complete and consistent
    Failed,     // ingest failed; `error` says why; no units
};
const char* to_string(DocumentState s);  // "ingesting", "ready", "failed"

// One row of the documents table: what list_documents() returns (no units).
struct DocumentInfo {
    DocId id = 0;
    std::string path;            // absolute, as given to add_file()/store_document()
    std::string sha256;          // lowercase hex of the file's bytes (== doc::Document::id)
    doc::DocumentKind kind = doc::DocumentKind::Pdf;
    std::string title;
    int64_t size_bytes = 0;      // file size when ingested
    int64_t mtime_ns = 0;        // file modification time when ingested (ns since the epoch)
    DocumentState state = DocumentState::Ingesting;
    std::string error;           // why it failed (state Failed), else empty
    std::string ingest_options;  // the options it was ingested with, as JSON text (opaque here)
    int unit_count = 0;          // units stored (pages, slides, segments, images)
    double duration = 0;         // seconds, media only
    int64_t added_ms = 0;        // when ingest started (ms since the epoch)
    int64_t ready_ms = 0;        // when it became Ready (0 otherwise)
};

// What to load back with a document. Block lines (word/line boxes) and visual bytes are the bulky
// parts; leave them out when only the text is needed (the context builder).
struct LoadOptions {
    bool lines = true;         // Block::lines
    bool visual_bytes = true;  // Visual::encoded (thumbnails, frames)
};

// A token range of a stored token stream and what it came from. `unit` and `block` are indices
// into the loaded Document (Document::units[unit].blocks[block]); block == -1 for tokens that are
// not block text (unit markers such as "[R-intro.pdf p. 12]"); visual >= 0 for image-patch tokens
// of Document::units[unit].visuals[visual]. Spans are sorted, non-overlapping, and cover
// [0, tokens.size()).
struct TokenSpan {
    int64_t begin = 0, end = 0;  // token indices, [begin, end)
    int32_t unit = 0;
    int32_t block = -1;
    int32_t visual = -1;
};

// One document's token stream for one tokenizer/model, as the context builder made it.
struct StoredTokenStream {
    DocId document = 0;
    std::string fingerprint;    // tokenizer/model fingerprint chosen by the context builder
    std::string settings;       // JSON text: how it was built (effort, frames, markers...); opaque
    std::vector<int32_t> tokens;
    std::vector<TokenSpan> spans;
    int64_t created_ms = 0;
};

enum class KvCacheState {
    Partial,   // prefill in progress or interrupted: the file holds the first n_tokens
    Complete,  // the whole context is prefilled
};
const char* to_string(KvCacheState s);  // "partial", "complete"

// A KV cache file the engine wrote for a context made of `documents` (in that order).
struct KvCacheRecord {
    int64_t id = 0;                  // 0 when not stored yet
    std::string path;                // usually under kv_dir(); absolute when read (stored relative to
                                     // the library folder when under it: a moved library keeps it)
    std::string model_fingerprint;
    std::vector<DocId> documents;    // the context's documents, in context order
    int64_t n_tokens = 0;            // tokens prefilled into the file so far
    int64_t total_tokens = 0;        // tokens of the whole context
    std::string settings;            // JSON text (attention mode, block size, top-k...); opaque
    KvCacheState state = KvCacheState::Partial;
    int64_t updated_ms = 0;          // set by save_kv_cache()
};

struct ChatRecord {
    int64_t id = 0;                  // 0 when not stored yet
    std::string question;
    std::string answer;
    std::string citations;           // JSON text (the answer module's format); opaque here
    std::string settings;            // JSON text (effort, model, documents...); opaque here
    int64_t created_ms = 0;          // 0: now
};

struct ReportRecord {
    int64_t id = 0;
    std::string path;
    std::string format;              // "md", "html", "pdf"
    std::vector<int64_t> chats;      // the chats it contains
    int64_t created_ms = 0;          // 0: now
};

// How Library::open treats the folder.
enum class LibraryOpen {
    Create,    // make the library when missing (add, the desktop app); needs write access
    Existing,  // the library must be there (list, ask, report): a mistyped path is an error, not a
               // new empty library; without write access it opens read-only
    Inspect,   // as Existing, never writes and never refuses a damaged library (library check)
};

class Library {
public:
    // Opens the library in `dir` (dir/library.sqlite): with Create, makes the folder when missing.
    // Turns on WAL and foreign keys and migrates the schema to kSchemaVersion in one transaction
    // (not when read-only or inspecting). A library whose schema lacks a table or column, or whose
    // database file is empty, is refused (LibraryError naming the problem) except by Inspect.
    // Throws FormatError (corrupt, or newer schema) / IoError (cannot create the folder) /
    // LibraryError (no library there, damaged, read-only for Create).
    static Library open(const std::filesystem::path& dir, LibraryOpen mode = LibraryOpen::Create);

    // $XDG_DATA_HOME/sightline, else $HOME/.local/share/sightline.
    static std::filesystem::path default_dir();

    // The schema version this build writes. Older databases are migrated on open().
    static constexpr int kSchemaVersion = 2;

    Library(Library&&) noexcept;
    Library& operator=(Library&&) noexcept;
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
    ~Library();

    const std::filesystem::path& dir() const { return dir_; }
    std::filesystem::path database_path() const { return dir_ / "library.sqlite"; }
    std::filesystem::path kv_dir() const { return dir_ / "kv"; }  // created by open()
    int schema_version() const;

    // ---- documents: writing ------------------------------------------------------------------

    // Where a document came from, for store_document(). sha256 must equal d.id.
    struct FileInfo {
        std::string path;            // absolute path
        int64_t size_bytes = 0;
        int64_t mtime_ns = 0;
        std::string ingest_options;  // JSON text
    };

    // Phase 1 of storing: a header row in state Ingesting (committed at once), tagged with this
    // process's id so that remove_abandoned() can tell live writers from dead ones. The kind and
    // title are filled by finish_document().
    DocId begin_document(const FileInfo& file, const std::string& sha256);
    // Phase 2: appends units (their blocks and visuals) in one transaction. Units must come in
    // index order across calls.
    void add_units(DocId id, const std::vector<doc::Unit>& units);
    // Phase 3, one transaction: kind, title, metadata, duration, outline, links (and sha256 = d.id
    // when d.id is set); state → Ready; any other document with the same path (older version,
    // earlier failure) is removed.
    void finish_document(DocId id, const doc::Document& d);
    // Marks a document Failed with `error` and drops its units; older Failed rows of the same
    // path are removed, a Ready older version is kept (one transaction).
    void fail_document(DocId id, const std::string& error);
    // Records that a stored document's file now lives at `path` (moved or renamed).
    void set_path(DocId id, const std::string& path);

    // Phases 2 and 3 for a document begun with begin_document(): units in batches of
    // `batch_units` (one transaction each), then finish_document(); a document of at most
    // `batch_units` units commits units and the final step in one transaction. On failure the
    // document is marked Failed and the error rethrown.
    void write_document(DocId id, const doc::Document& d, int batch_units = 64);

    // All three phases for a whole Document (begin_document + write_document); returns its id.
    DocId store_document(const doc::Document& d, const FileInfo& file, int batch_units = 64);

    // Removes a document and everything derived from it (units, blocks, visuals, token streams,
    // KV cache records that include it and their files under kv_dir()). False when not found.
    bool remove_document(DocId id);

    // Deletes documents left in state Ingesting by processes that no longer run (crash, kill -9).
    // Returns how many. Safe while other processes ingest: their rows are kept.
    int remove_abandoned();

    // ---- documents: reading ------------------------------------------------------------------

    // Documents ordered by path; Ready and Failed ones, plus Ingesting ones when asked.
    std::vector<DocumentInfo> list_documents(bool include_ingesting = false) const;
    std::optional<DocumentInfo> info(DocId id) const;
    // The Ready document with these bytes, if any (the most recently finished one).
    std::optional<DocumentInfo> find_by_hash(const std::string& sha256) const;
    // The Ready document at this path, if any.
    std::optional<DocumentInfo> find_by_path(const std::string& path) const;
    // The latest row at this path in any state (Ready, Failed, Ingesting), if any.
    std::optional<DocumentInfo> find_any_by_path(const std::string& path) const;

    // The stored Document, equal to what was stored (field for field; floats exact). Throws
    // LibraryError when `id` is unknown or not Ready.
    doc::Document load_document(DocId id, const LoadOptions& options = {}) const;
    // One unit (0-based index) of a Ready document, e.g. for a viewer.
    doc::Unit load_unit(DocId id, int unit, const LoadOptions& options = {}) const;
    // The encoded bytes of units[unit].visuals[visual] (empty when the reader kept none).
    std::vector<uint8_t> visual_bytes(DocId id, int unit, int visual) const;

    // ---- token streams (context builder) -----------------------------------------------------

    // Stores (replacing) the stream for (s.document, s.fingerprint). Validates the spans.
    void save_token_stream(const StoredTokenStream& s);
    std::optional<StoredTokenStream> load_token_stream(DocId id, const std::string& fingerprint) const;
    // Token counts per (document, fingerprint) without loading the tokens: for the budget planner.
    std::optional<int64_t> token_count(DocId id, const std::string& fingerprint) const;
    void remove_token_streams(const std::string& fingerprint);  // e.g. after a tokenizer change

    // ---- KV cache files -----------------------------------------------------------------------

    // Inserts (id == 0) or updates the record; returns its id. Sets updated_ms.
    int64_t save_kv_cache(const KvCacheRecord& r);
    std::vector<KvCacheRecord> list_kv_caches() const;
    // The record for exactly this model, document list (same order) and settings, if any.
    std::optional<KvCacheRecord> find_kv_cache(const std::string& model_fingerprint,
                                               const std::vector<DocId>& documents,
                                               const std::string& settings) const;
    // Removes the record and, when it lies under kv_dir(), its file.
    void remove_kv_cache(int64_t id);

    // ---- chats and reports --------------------------------------------------------------------

    int64_t add_chat(const ChatRecord& c);                     // returns its id
    std::vector<ChatRecord> list_chats() const;                // oldest first
    std::optional<ChatRecord> chat(int64_t id) const;
    void remove_chats();  // every chat (the app's Clear); reports keep the chat ids they recorded
    int64_t add_report(const ReportRecord& r);                 // returns its id
    std::vector<ReportRecord> list_reports() const;            // oldest first

    // ---- maintenance --------------------------------------------------------------------------

    // A number that changes whenever another connection (thread or process) commits to the
    // library (PRAGMA data_version): poll it to refresh a view cheaply.
    int64_t data_version() const;

    // "ok", or SQLite's list of problems (PRAGMA integrity_check).
    std::string integrity_check() const;
    // Every problem found, empty when none: SQLite's integrity check, rows whose foreign keys point
    // nowhere (PRAGMA foreign_key_check), tables or columns missing from the schema.
    std::vector<std::string> check() const;
    // Opened without write access (LibraryOpen::Existing on a read-only folder or file, or
    // Inspect): reading works, any write fails.
    bool read_only() const { return read_only_; }
    // Folds the WAL into the database file (PRAGMA wal_checkpoint(TRUNCATE)).
    void checkpoint();

    // The raw connection, for tests and tools; owned by this object.
    sqlite3* handle() const { return db_; }

private:
    Library(std::filesystem::path dir, sqlite3* db);
    std::filesystem::path dir_;
    sqlite3* db_ = nullptr;
    bool read_only_ = false;
};

// ---- adding files (the `add` flow shared by the CLI and the app) ---------------------------------

enum class AddStatus {
    Added,      // new document stored
    Replaced,   // the path was in the library with other bytes; re-ingested, old version removed
    Unchanged,  // the path is in the library with the same bytes; nothing done
    Duplicate,  // the same bytes are in the library under another path that still exists;
                // nothing stored (when that path no longer exists the document is moved to
                // the new path and the status is Unchanged, message "moved from <old path>")
    Failed,     // reading or storing failed; `message` says why; recorded as a Failed row
};
const char* to_string(AddStatus s);  // "added", "replaced", "unchanged", "duplicate", "failed"

struct AddResult {
    AddStatus status = AddStatus::Failed;
    DocId id = 0;          // the stored (or existing) document; 0 when failed before storing
    DocumentInfo info;     // its row after the operation (when id != 0)
    std::string message;   // the failure, or "same content as <path>" for duplicates
    std::vector<std::string> notes;  // the reader's notes on a document it read (Document::notes)
};

// Reads a file into a Document: the caller wires in ingest::read_document with its own options,
// progress and cancellation (core does not depend on ingest). Throws sl::Error on failure.
using ReadDocumentFn = std::function<doc::Document(const std::string& path)>;

struct AddOptions {
    std::string ingest_options;  // JSON text stored with the document
    bool force = false;          // re-ingest even when unchanged
    int batch_units = 64;        // see Library::store_document
};

// The add flow for one file: makes the path absolute, hashes it, decides Unchanged / Duplicate /
// Added / Replaced, calls `read` only when needed, and stores the result crash-safely. Never
// throws for a bad file (returns Failed with the reason); throws only when the library itself
// fails (LibraryError, FormatError). Runs on the calling thread.
AddResult add_file(Library& lib, const std::string& path, const ReadDocumentFn& read,
                   const AddOptions& options = {});

}  // namespace sl
