// libFuzzer target for what the library decodes from its SQLite database (core/library): the blob
// and id-list codecs, and the readers over damaged rows. Reading a damaged library either works or
// throws an sl::Error (FormatError, LibraryError) naming the database; anything else (a crash, a
// sanitizer report, std::out_of_range or another foreign exception, a huge allocation) is a bug.
//
// Input: one mode byte, then
// - mode even: the rest goes straight to the codecs (block lines blob, provenance spans blob, id
//   list, the enumerations); what decodes must encode back to the same bytes (spans) or size.
// - mode odd: records [slot][length][bytes] that overwrite columns of the first row of a table
//   in a small library made once at start-up (a document with units, blocks with lines, visuals,
//   outline, links, a token stream, a KV cache record, a chat, a report); every reader then runs
//   on it, and the rows are put back afterwards. Slot bit 7: write NULL instead.
// Seeds: tests/fuzz/corpus/fuzz_library (written by tests/fuzz/make_seeds.py).
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/library/library.h"
#include "core/library/library_codec.h"
#include "core/util/error.h"

namespace {

namespace codec = sl::library_codec;

void fuzz_codecs(std::span<const uint8_t> in) {
    const std::string file = "fuzz.sqlite";
    const std::string text(reinterpret_cast<const char*>(in.data()), in.size());
    volatile size_t sink = 0;
    try {
        const auto lines = codec::decode_lines(in.data(), in.size(), file);
        if (codec::encode_lines(lines).size() != in.size()) __builtin_trap();
        for (const auto& l : lines) sink = sink + l.text.size();
    } catch (const sl::FormatError&) {
    }
    try {
        const auto spans = codec::decode_spans(in.data(), in.size(), file);
        const auto back = codec::encode_spans(spans);
        if (back.size() != in.size() || (!back.empty() && std::memcmp(back.data(), in.data(), back.size())))
            __builtin_trap();
    } catch (const sl::FormatError&) {
    }
    try {
        const auto ids = codec::decode_ids(text, file);
        // Decoded ids encode to a list that decodes to the same ids.
        if (codec::decode_ids(codec::encode_ids(ids), file) != ids) __builtin_trap();
    } catch (const sl::FormatError&) {
    }
    auto any = [&](auto parse) {
        try {
            sink = sink + static_cast<size_t>(parse(text, file));
        } catch (const sl::FormatError&) {
        }
    };
    any(codec::document_kind);
    any(codec::unit_kind);
    any(codec::block_role);
    any(codec::visual_kind);
    any(codec::document_state);
    any(codec::kv_cache_state);
}

// ---- the damaged-library mode ----------------------------------------------------------------

enum class Col { Text, Int, Real, Blob };
struct Slot {
    const char* table;
    const char* column;
    Col kind;
};
constexpr Slot kSlots[] = {
    {"documents", "kind", Col::Text},           {"documents", "state", Col::Text},
    {"documents", "unit_count", Col::Int},      {"documents", "duration", Col::Real},
    {"documents", "path", Col::Text},           {"documents", "id", Col::Int},
    {"units", "idx", Col::Int},                 {"units", "kind", Col::Text},
    {"units", "t0", Col::Real},                 {"units", "rotation", Col::Int},
    {"units", "document", Col::Int},            {"units", "label", Col::Text},
    {"blocks", "role", Col::Text},              {"blocks", "lines", Col::Blob},
    {"blocks", "unit", Col::Int},               {"blocks", "idx", Col::Int},
    {"blocks", "text", Col::Text},              {"blocks", "x0", Col::Real},
    {"visuals", "kind", Col::Text},             {"visuals", "encoded", Col::Blob},
    {"visuals", "unit", Col::Int},              {"visuals", "width", Col::Int},
    {"visuals", "timestamp", Col::Real},        {"outline", "unit", Col::Int},
    {"outline", "level", Col::Int},             {"outline", "time", Col::Real},
    {"links", "unit", Col::Int},                {"links", "x0", Col::Real},
    {"links", "target_unit", Col::Int},         {"document_metadata", "key", Col::Text},
    {"token_streams", "tokens", Col::Blob},     {"token_streams", "spans", Col::Blob},
    {"token_streams", "n_tokens", Col::Int},    {"token_streams", "document", Col::Int},
    {"kv_caches", "documents", Col::Text},      {"kv_caches", "state", Col::Text},
    {"kv_caches", "path", Col::Text},           {"kv_caches", "n_tokens", Col::Int},
    {"kv_cache_documents", "position", Col::Int}, {"kv_cache_documents", "document", Col::Int},
    {"chats", "citations", Col::Text},          {"chats", "created_ms", Col::Int},
    {"reports", "chats", Col::Text},            {"reports", "format", Col::Text},
};
constexpr size_t kNumSlots = std::size(kSlots);

std::string first_row(const Slot& s) {
    return std::string(" WHERE rowid = (SELECT min(rowid) FROM ") + s.table + ")";
}

sl::doc::Document sample_document(const std::string& path) {
    using namespace sl::doc;
    Document d;
    d.id = std::string(64, 'a');
    d.path = path;
    d.kind = DocumentKind::Pdf;
    d.title = "Sample";
    d.metadata = {{"author", "A"}, {"pages", "2"}};
    for (int i = 0; i < 2; ++i) {
        Unit u;
        u.kind = UnitKind::Page;
        u.index = i;
        u.label = std::to_string(i + 1);
        u.width = 612;
        u.height = 792;
        Block b;
        b.text = "Block text " + std::to_string(i);
        b.bbox = BBox{0.1f, 0.1f, 0.9f, 0.2f};
        b.lines = {{"Block", BBox{0.1f, 0.1f, 0.3f, 0.2f}}, {"text", BBox{0.4f, 0.1f, 0.9f, 0.2f}}};
        u.blocks.push_back(b);
        Visual v;
        v.kind = VisualKind::PageRender;
        v.width = 10;
        v.height = 12;
        v.locator = "page:" + std::to_string(i) + "@150dpi";
        v.mime = "image/png";
        v.encoded = {0x89, 'P', 'N', 'G'};
        u.visuals.push_back(v);
        d.units.push_back(u);
    }
    d.outline = {{"Intro", 0, 0, std::nullopt}, {"End", 1, 1, std::nullopt}};
    d.links = {{0, BBox{0.1f, 0.1f, 0.2f, 0.2f}, "", 1}};
    return d;
}

class DamagedLibrary {
public:
    DamagedLibrary()
        : dir_(std::filesystem::path(std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                                : "/tmp") /
               ("sightline-fuzz-library-" + std::to_string(::getpid()))),
          lib_(make()) {
        db_ = lib_.handle();
        sqlite3_exec(db_, "PRAGMA foreign_keys = OFF; PRAGMA synchronous = OFF;", nullptr, nullptr,
                     nullptr);
        for (const Slot& s : kSlots) {
            sqlite3_stmt* q = nullptr;
            const std::string sql =
                std::string("SELECT ") + s.column + " FROM " + s.table + first_row(s);
            sqlite3_prepare_v2(db_, sql.c_str(), -1, &q, nullptr);
            if (!q || sqlite3_step(q) != SQLITE_ROW) __builtin_trap();  // every table has a row
            original_.push_back(sqlite3_value_dup(sqlite3_column_value(q, 0)));
            sqlite3_finalize(q);
            sqlite3_stmt* u = nullptr;
            const std::string upd =
                std::string("UPDATE ") + s.table + " SET " + s.column + " = ?1" + first_row(s);
            if (sqlite3_prepare_v2(db_, upd.c_str(), -1, &u, nullptr) != SQLITE_OK) __builtin_trap();
            update_.push_back(u);
        }
    }

    ~DamagedLibrary() {
        for (sqlite3_stmt* u : update_) sqlite3_finalize(u);
        for (sqlite3_value* v : original_) sqlite3_value_free(v);
    }

    void run(std::span<const uint8_t> in) {
        std::vector<bool> touched(kNumSlots, false);
        sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
        for (size_t at = 0; at + 2 <= in.size();) {
            const uint8_t tag = in[at];
            const size_t len = std::min<size_t>(in[at + 1], in.size() - at - 2);
            const uint8_t* v = in.data() + at + 2;
            at += 2 + len;
            const size_t i = (tag & 0x7F) % kNumSlots;
            sqlite3_stmt* u = update_[i];
            if (tag & 0x80) {
                sqlite3_bind_null(u, 1);
            } else if (kSlots[i].kind == Col::Blob) {
                sqlite3_bind_blob(u, 1, v, static_cast<int>(len), SQLITE_TRANSIENT);
            } else if (kSlots[i].kind == Col::Int && len == 8) {
                int64_t x;
                std::memcpy(&x, v, 8);
                sqlite3_bind_int64(u, 1, x);
            } else if (kSlots[i].kind == Col::Real && len == 8) {
                double x;
                std::memcpy(&x, v, 8);
                sqlite3_bind_double(u, 1, x);
            } else {  // text; a number in text form takes the column's affinity
                sqlite3_bind_text(u, 1, reinterpret_cast<const char*>(v), static_cast<int>(len),
                                  SQLITE_TRANSIENT);
            }
            sqlite3_step(u);  // constraint failures leave the row as it was
            sqlite3_reset(u);
            touched[i] = true;
        }
        sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);

        read_everything();

        sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr);
        for (size_t i = 0; i < kNumSlots; ++i) {
            if (!touched[i]) continue;
            sqlite3_bind_value(update_[i], 1, original_[i]);
            sqlite3_step(update_[i]);
            sqlite3_reset(update_[i]);
        }
        sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    }

private:
    sl::Library make() {
        std::filesystem::remove_all(dir_);
        sl::Library lib = sl::Library::open(dir_);
        const sl::doc::Document d = sample_document((dir_ / "a.pdf").string());
        doc_ = lib.store_document(d, {d.path, 100, 1, "{}"});
        sl::StoredTokenStream t;
        t.document = doc_;
        t.fingerprint = "fp";
        t.settings = "{}";
        t.tokens = {1, 2, 3, 4, 5, 6};
        t.spans = {{0, 2, 0, -1, -1}, {2, 4, 0, 0, -1}, {4, 6, 1, 0, -1}};
        lib.save_token_stream(t);
        lib.save_kv_cache({0, (lib.kv_dir() / "1.kv").string(), "model", {doc_}, 3, 6, "{}",
                           sl::KvCacheState::Partial, 0});
        const int64_t chat = lib.add_chat({0, "Q?", "A [1].", "[]", "{}", 0});
        lib.add_report({0, (dir_ / "r.md").string(), "md", {chat}, 0});
        return lib;
    }

    template <class F>
    void guarded(F&& f) {
        try {
            f();
        } catch (const sl::Error&) {
        }
    }

    void read_everything() {
        volatile size_t sink = 0;
        const sl::Library& lib = lib_;
        guarded([&] { sink = sink + lib.list_documents(true).size(); });
        guarded([&] { sink = sink + (lib.info(doc_) ? 1 : 0); });
        guarded([&] { sink = sink + (lib.find_by_path((dir_ / "a.pdf").string()) ? 1 : 0); });
        guarded([&] { sink = sink + lib.load_document(doc_).units.size(); });
        guarded([&] { sink = sink + lib.load_document(doc_, {false, false}).text_chars(); });
        for (int u = -1; u < 3; ++u) {
            guarded([&] { sink = sink + lib.load_unit(doc_, u).blocks.size(); });
            guarded([&] { sink = sink + lib.visual_bytes(doc_, u, 0).size(); });
        }
        guarded([&] {
            const auto t = lib.load_token_stream(doc_, "fp");
            if (t) sink = sink + t->tokens.size() + t->spans.size();
        });
        guarded([&] { sink = sink + static_cast<size_t>(lib.token_count(doc_, "fp").value_or(0)); });
        guarded([&] { sink = sink + lib.list_kv_caches().size(); });
        guarded([&] { sink = sink + (lib.find_kv_cache("model", {doc_}, "{}") ? 1 : 0); });
        guarded([&] { sink = sink + lib.list_chats().size(); });
        guarded([&] { sink = sink + lib.list_reports().size(); });
    }

    std::filesystem::path dir_;
    sl::DocId doc_ = 0;  // before lib_: make() sets it
    sl::Library lib_;
    sqlite3* db_ = nullptr;
    std::vector<sqlite3_value*> original_;
    std::vector<sqlite3_stmt*> update_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const std::span<const uint8_t> rest(data + 1, size - 1);
    if (!(data[0] & 1)) {
        fuzz_codecs(rest);
    } else {
        static DamagedLibrary lib;  // made once; each run puts its rows back
        lib.run(rest);
    }
    return 0;
}
