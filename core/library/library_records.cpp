// Library: token streams with provenance, KV cache records, chats and reports.
#include <sqlite3.h>

#include <cstring>

#include "core/library/library.h"
#include "core/library/library_codec.h"
#include "core/library/library_internal.h"
#include "core/library/sqlite_db.h"

namespace sl {

using library_internal::now_ms;
using sqlite::Stmt;
using sqlite::Transaction;

// ---- token streams ------------------------------------------------------------------------------

void Library::save_token_stream(const StoredTokenStream& s) {
    const std::string where = database_path().string() + ": token stream of document " + std::to_string(s.document);
    const auto n = static_cast<int64_t>(s.tokens.size());
    int64_t at = 0;
    for (const auto& span : s.spans) {
        if (span.begin != at || span.end <= span.begin)
            throw LibraryError(where + ": spans must be sorted, non-empty and contiguous from 0 (span [" +
                               std::to_string(span.begin) + ", " + std::to_string(span.end) + ") after " +
                               std::to_string(at) + ")");
        at = span.end;
    }
    if (at != n)
        throw LibraryError(where + ": spans cover " + std::to_string(at) + " of " + std::to_string(n) + " tokens");
    Transaction tx(db_);
    Stmt ok(db_, "SELECT 1 FROM documents WHERE id = ?1 AND state = 'ready'");
    ok.bind(1, s.document);
    if (!ok.step()) throw LibraryError(where + ": no ready document with that id");
    const auto spans = library_codec::encode_spans(s.spans);
    Stmt put(db_,
             "INSERT OR REPLACE INTO token_streams(document, fingerprint, settings, n_tokens, tokens, spans, "
             "created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    put.bind(1, s.document).bind(2, s.fingerprint).bind(3, s.settings).bind(4, n);
    put.bind_blob(5, s.tokens.data(), s.tokens.size() * sizeof(int32_t));
    put.bind_blob(6, spans.data(), spans.size());
    put.bind(7, s.created_ms ? s.created_ms : now_ms()).run();
    tx.commit();
}

std::optional<StoredTokenStream> Library::load_token_stream(DocId id, const std::string& fingerprint) const {
    Stmt s(db_,
           "SELECT settings, n_tokens, tokens, spans, created_ms FROM token_streams WHERE document = ?1 AND "
           "fingerprint = ?2");
    s.bind(1, id).bind(2, fingerprint);
    if (!s.step()) return std::nullopt;
    const std::string file = database_path().string();
    StoredTokenStream t;
    t.document = id;
    t.fingerprint = fingerprint;
    t.settings = s.text(0);
    const int64_t n = s.int64(1);
    size_t bytes = 0;
    const void* p = s.blob_data(2, &bytes);
    if (n < 0 || bytes != static_cast<size_t>(n) * sizeof(int32_t))
        throw FormatError(file + ": the token stream of document " + std::to_string(id) + " has " +
                          std::to_string(bytes) + " bytes for " + std::to_string(n) + " tokens");
    t.tokens.resize(static_cast<size_t>(n));
    if (bytes) std::memcpy(t.tokens.data(), p, bytes);
    p = s.blob_data(3, &bytes);
    t.spans = library_codec::decode_spans(p, bytes, file);
    t.created_ms = s.int64(4);
    return t;
}

std::optional<int64_t> Library::token_count(DocId id, const std::string& fingerprint) const {
    Stmt s(db_, "SELECT n_tokens FROM token_streams WHERE document = ?1 AND fingerprint = ?2");
    s.bind(1, id).bind(2, fingerprint);
    if (!s.step()) return std::nullopt;
    return s.int64(0);
}

void Library::remove_token_streams(const std::string& fingerprint) {
    Transaction tx(db_);
    Stmt s(db_, "DELETE FROM token_streams WHERE fingerprint = ?1");
    s.bind(1, fingerprint).run();
    tx.commit();
}

// ---- KV caches ----------------------------------------------------------------------------------

namespace {

constexpr const char* kKvColumns =
    "id, path, model_fingerprint, documents, n_tokens, total_tokens, settings, state, updated_ms";

KvCacheRecord read_kv(const Stmt& s, const std::string& file, const std::filesystem::path& dir) {
    KvCacheRecord r;
    r.id = s.int64(0);
    r.path = library_internal::resolve_kv_path(dir, s.text(1));
    r.model_fingerprint = s.text(2);
    r.documents = library_codec::decode_ids(s.text(3), file);
    r.n_tokens = s.int64(4);
    r.total_tokens = s.int64(5);
    r.settings = s.text(6);
    r.state = library_codec::kv_cache_state(s.text(7), file);
    r.updated_ms = s.int64(8);
    return r;
}

}  // namespace

int64_t Library::save_kv_cache(const KvCacheRecord& r) {
    Transaction tx(db_);
    const std::string docs = library_codec::encode_ids(r.documents);
    int64_t id = r.id;
    if (id == 0) {
        Stmt s(db_,
               "INSERT INTO kv_caches(path, model_fingerprint, documents, n_tokens, total_tokens, settings, state, "
               "updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
        s.bind(1, library_internal::stored_kv_path(dir_, r.path)).bind(2, r.model_fingerprint).bind(3, docs).bind(4, r.n_tokens).bind(5, r.total_tokens);
        s.bind(6, r.settings).bind(7, to_string(r.state)).bind(8, now_ms()).run();
        id = sqlite3_last_insert_rowid(db_);
    } else {
        Stmt s(db_,
               "UPDATE kv_caches SET path = ?2, model_fingerprint = ?3, documents = ?4, n_tokens = ?5, "
               "total_tokens = ?6, settings = ?7, state = ?8, updated_ms = ?9 WHERE id = ?1");
        s.bind(1, id).bind(2, library_internal::stored_kv_path(dir_, r.path)).bind(3, r.model_fingerprint).bind(4, docs).bind(5, r.n_tokens);
        s.bind(6, r.total_tokens).bind(7, r.settings).bind(8, to_string(r.state)).bind(9, now_ms()).run();
        if (sqlite3_changes(db_) != 1)
            throw LibraryError(database_path().string() + ": no KV cache record with id " + std::to_string(id));
        Stmt del(db_, "DELETE FROM kv_cache_documents WHERE kv_cache = ?1");
        del.bind(1, id).run();
    }
    // The link rows make removing a document drop the caches that include it (foreign keys check
    // that every document exists).
    Stmt link(db_, "INSERT INTO kv_cache_documents(kv_cache, document, position) VALUES (?1, ?2, ?3)");
    for (size_t i = 0; i < r.documents.size(); ++i) {
        link.bind(1, id).bind(2, r.documents[i]).bind(3, static_cast<int64_t>(i)).run();
        link.reset();
    }
    tx.commit();
    return id;
}

std::vector<KvCacheRecord> Library::list_kv_caches() const {
    Stmt s(db_, std::string("SELECT ") + kKvColumns + " FROM kv_caches ORDER BY id");
    std::vector<KvCacheRecord> out;
    const std::string file = database_path().string();
    while (s.step()) out.push_back(read_kv(s, file, dir_));
    return out;
}

std::optional<KvCacheRecord> Library::find_kv_cache(const std::string& model_fingerprint,
                                                    const std::vector<DocId>& documents,
                                                    const std::string& settings) const {
    Stmt s(db_, std::string("SELECT ") + kKvColumns +
                    " FROM kv_caches WHERE model_fingerprint = ?1 AND documents = ?2 AND settings = ?3 "
                    "ORDER BY updated_ms DESC, id DESC");
    s.bind(1, model_fingerprint).bind(2, library_codec::encode_ids(documents)).bind(3, settings);
    if (!s.step()) return std::nullopt;
    return read_kv(s, database_path().string(), dir_);
}

void Library::remove_kv_cache(int64_t id) {
    Transaction tx(db_);
    Stmt p(db_, "SELECT path FROM kv_caches WHERE id = ?1");
    p.bind(1, id);
    std::vector<std::string> files;
    if (p.step()) files.push_back(p.text(0));
    Stmt s(db_, "DELETE FROM kv_caches WHERE id = ?1");
    s.bind(1, id).run();
    tx.commit();
    library_internal::remove_kv_files(kv_dir(), files);
}

// ---- chats and reports --------------------------------------------------------------------------

int64_t Library::add_chat(const ChatRecord& c) {
    Transaction tx(db_);
    Stmt s(db_,
           "INSERT INTO chats(question, answer, citations, settings, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)");
    s.bind(1, c.question).bind(2, c.answer).bind(3, c.citations).bind(4, c.settings);
    s.bind(5, c.created_ms ? c.created_ms : now_ms()).run();
    const int64_t id = sqlite3_last_insert_rowid(db_);
    tx.commit();
    return id;
}

namespace {
ChatRecord read_chat(const Stmt& s) {
    ChatRecord c;
    c.id = s.int64(0);
    c.question = s.text(1);
    c.answer = s.text(2);
    c.citations = s.text(3);
    c.settings = s.text(4);
    c.created_ms = s.int64(5);
    return c;
}
}  // namespace

std::vector<ChatRecord> Library::list_chats() const {
    Stmt s(db_, "SELECT id, question, answer, citations, settings, created_ms FROM chats ORDER BY created_ms, id");
    std::vector<ChatRecord> out;
    while (s.step()) out.push_back(read_chat(s));
    return out;
}

std::optional<ChatRecord> Library::chat(int64_t id) const {
    Stmt s(db_, "SELECT id, question, answer, citations, settings, created_ms FROM chats WHERE id = ?1");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return read_chat(s);
}

void Library::remove_chats() {
    Transaction tx(db_);
    Stmt(db_, "DELETE FROM chats").run();
    tx.commit();
}

int64_t Library::add_report(const ReportRecord& r) {
    Transaction tx(db_);
    Stmt s(db_, "INSERT INTO reports(path, format, chats, created_ms) VALUES (?1, ?2, ?3, ?4)");
    s.bind(1, r.path).bind(2, r.format).bind(3, library_codec::encode_ids(r.chats));
    s.bind(4, r.created_ms ? r.created_ms : now_ms()).run();
    const int64_t id = sqlite3_last_insert_rowid(db_);
    tx.commit();
    return id;
}

std::vector<ReportRecord> Library::list_reports() const {
    Stmt s(db_, "SELECT id, path, format, chats, created_ms FROM reports ORDER BY created_ms, id");
    std::vector<ReportRecord> out;
    const std::string file = database_path().string();
    while (s.step()) {
        ReportRecord r;
        r.id = s.int64(0);
        r.path = s.text(1);
        r.format = s.text(2);
        r.chats = library_codec::decode_ids(s.text(3), file);
        r.created_ms = s.int64(4);
        out.push_back(std::move(r));
    }
    return out;
}

}  // namespace sl
