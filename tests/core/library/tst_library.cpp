// The library store on its own (no ingest): schema creation and migration from a v1 database the
// test writes itself, Document round trips, token streams, KV cache records, chats, reports,
// cascading removal, crash leftovers, concurrent WAL readers, corrupt files.
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "core/library/library.h"
#include "tests/common/test_support.h"
#include "tests/core/library/library_test_util.h"

using namespace sl;
namespace fs = std::filesystem;

namespace {

// The version-1 schema as Sightline 0.1 wrote it, written out here independently of the library's
// migration list (so that a change to that list which breaks old databases fails this test).
const char* kV1Schema = R"SQL(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version(version) VALUES (1);
CREATE TABLE documents(id INTEGER PRIMARY KEY, path TEXT NOT NULL, sha256 TEXT NOT NULL,
  kind TEXT NOT NULL DEFAULT 'pdf', title TEXT NOT NULL DEFAULT '', size_bytes INTEGER NOT NULL DEFAULT 0,
  mtime_ns INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',
  ingest_options TEXT NOT NULL DEFAULT '{}', duration REAL NOT NULL DEFAULT 0,
  unit_count INTEGER NOT NULL DEFAULT 0, added_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX documents_path ON documents(path);
CREATE INDEX documents_sha256 ON documents(sha256);
CREATE TABLE document_metadata(document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(document, key));
CREATE TABLE units(id INTEGER PRIMARY KEY, document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL, kind TEXT NOT NULL, label TEXT NOT NULL, t0 REAL, t1 REAL, width REAL NOT NULL,
  height REAL NOT NULL, rotation INTEGER NOT NULL, UNIQUE(document, idx));
CREATE TABLE blocks(id INTEGER PRIMARY KEY, unit INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL, x0 REAL, y0 REAL, x1 REAL, y1 REAL,
  t0 REAL, t1 REAL, confidence REAL NOT NULL, lines BLOB, UNIQUE(unit, idx));
CREATE TABLE visuals(id INTEGER PRIMARY KEY, unit INTEGER NOT NULL REFERENCES units(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL, kind TEXT NOT NULL, x0 REAL, y0 REAL, x1 REAL, y1 REAL, timestamp REAL,
  width INTEGER NOT NULL, height INTEGER NOT NULL, locator TEXT NOT NULL, mime TEXT NOT NULL, encoded BLOB,
  UNIQUE(unit, idx));
CREATE TABLE outline(document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  title TEXT NOT NULL, level INTEGER NOT NULL, unit INTEGER NOT NULL, time REAL, PRIMARY KEY(document, idx));
CREATE TABLE links(document INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE, idx INTEGER NOT NULL,
  unit INTEGER NOT NULL, x0 REAL NOT NULL, y0 REAL NOT NULL, x1 REAL NOT NULL, y1 REAL NOT NULL,
  uri TEXT NOT NULL, target_unit INTEGER NOT NULL, PRIMARY KEY(document, idx));
INSERT INTO documents(id, path, sha256, kind, title, size_bytes, mtime_ns, state, unit_count, added_ms)
  VALUES (7, '/old/talk.pdf', 'abc123', 'pdf', 'An old talk', 1234, 99, 'ready', 2, 1700000000000);
INSERT INTO document_metadata VALUES (7, 'author', 'Grace');
INSERT INTO units VALUES (70, 7, 0, 'page', 'i', NULL, NULL, 612, 792, 0);
INSERT INTO units VALUES (71, 7, 1, 'page', '1', NULL, NULL, 612, 792, 90);
INSERT INTO blocks VALUES (700, 70, 0, 'title', 'Welcome', 0.1, 0.1, 0.9, 0.2, NULL, NULL, 1.0, NULL);
INSERT INTO blocks VALUES (701, 71, 0, 'body', 'Second page text', 0.1, 0.3, 0.9, 0.5, NULL, NULL, 0.75, NULL);
INSERT INTO visuals VALUES (710, 71, 0, 'picture', 0, 0, 0.5, 0.5, NULL, 10, 20, 'zip:a.png', 'image/png', x'89504e47');
INSERT INTO outline VALUES (7, 0, 'Start', 0, 0, NULL);
INSERT INTO links VALUES (7, 0, 1, 0.1, 0.1, 0.2, 0.2, 'https://example.org', -1);
INSERT INTO documents(id, path, sha256, kind, state, added_ms) VALUES (8, '/old/half.pdf', 'def', 'pdf', 'ingesting', 1);
INSERT INTO units VALUES (80, 8, 0, 'page', '1', NULL, NULL, 612, 792, 0);
)SQL";

void write_file(const fs::path& p, const std::string& bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Library::FileInfo file_info(const std::string& path) {
    Library::FileInfo f;
    f.path = path;
    f.size_bytes = 4242;
    f.mtime_ns = 1234567890123456789;
    f.ingest_options = R"({"ocr":false})";
    return f;
}

}  // namespace

class TestLibrary : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void creates_schema_in_wal_mode() {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "nested" / "lib";
        Library lib = Library::open(dir);
        QCOMPARE(lib.schema_version(), Library::kSchemaVersion);
        QVERIFY(fs::exists(dir / "library.sqlite"));
        QVERIFY(fs::is_directory(lib.kv_dir()));
        QCOMPARE(test::count(lib, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), int64_t{1});
        QCOMPARE(test::count(lib, "SELECT foreign_keys FROM pragma_foreign_keys"), int64_t{1});
        for (const char* t : {"documents", "units", "blocks", "visuals", "outline", "links", "document_metadata",
                              "token_streams", "kv_caches", "kv_cache_documents", "chats", "reports"}) {
            const std::string sql = std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") + t + "'";
            QVERIFY2(test::count(lib, sql.c_str()) == 1, t);
        }
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
        QVERIFY(lib.list_documents(true).empty());
        // Reopening an up-to-date library changes nothing.
        Library again = Library::open(dir);
        QCOMPARE(again.schema_version(), Library::kSchemaVersion);
    }

    void migrates_a_v1_database() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        {
            sqlite3* db = nullptr;
            QCOMPARE(sqlite3_open((dir / "library.sqlite").c_str(), &db), SQLITE_OK);
            char* err = nullptr;
            const int rc = sqlite3_exec(db, kV1Schema, nullptr, nullptr, &err);
            QVERIFY2(rc == SQLITE_OK, err ? err : "?");
            sqlite3_close(db);
        }
        Library lib = Library::open(dir);
        QCOMPARE(lib.schema_version(), 2);
        // The v1 content is intact and reads back through the v2 API.
        const auto info = lib.info(7);
        QVERIFY(info);
        QCOMPARE(info->state, DocumentState::Ready);
        QCOMPARE(info->ready_ms, int64_t{1700000000000});  // filled by the migration from added_ms
        QCOMPARE(info->unit_count, 2);
        const doc::Document d = lib.load_document(7);
        QCOMPARE(d.title, std::string("An old talk"));
        QCOMPARE(d.id, std::string("abc123"));
        QCOMPARE(d.metadata.at("author"), std::string("Grace"));
        QCOMPARE(d.units.size(), size_t{2});
        QCOMPARE(d.units[1].rotation, 90);
        QCOMPARE(d.units[1].blocks.at(0).text, std::string("Second page text"));
        QCOMPARE(d.units[1].blocks.at(0).confidence, 0.75f);
        QCOMPARE(d.units[1].visuals.at(0).encoded, (std::vector<uint8_t>{0x89, 0x50, 0x4e, 0x47}));
        QCOMPARE(d.outline.at(0).title, std::string("Start"));
        QCOMPARE(d.links.at(0).uri, std::string("https://example.org"));
        // The half-ingested v1 row has no writer pid: abandoned, invisible, and removed.
        QCOMPARE(lib.list_documents().size(), size_t{1});
        QCOMPARE(lib.list_documents(true).size(), size_t{2});
        QCOMPARE(lib.remove_abandoned(), 1);
        QCOMPARE(test::count(lib, "SELECT count(*) FROM units WHERE document = 8"), int64_t{0});
        // The v2 tables work on the migrated file.
        StoredTokenStream s{7, "fp", "{}", {1, 2, 3}, {{0, 3, 0, 0, -1}}, 0};
        lib.save_token_stream(s);
        QCOMPARE(lib.token_count(7, "fp").value_or(-1), int64_t{3});
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
    }

    void refuses_a_newer_schema() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        { Library lib = Library::open(dir); sqlite3_exec(lib.handle(), "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr); }
        try {
            Library::open(dir);
            QFAIL("opened a library with a newer schema");
        } catch (const FormatError& e) {
            const QString msg = QString::fromUtf8(e.what());
            QVERIFY2(msg.contains(QStringLiteral("library.sqlite")) && msg.contains(QStringLiteral("99")), e.what());
        }
    }

    void corrupt_database_names_the_file() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::string junk;
        for (int i = 0; i < 500; ++i) junk += "this is not an SQLite database, it is a text file. ";
        write_file(dir / "library.sqlite", junk);
        try {
            Library::open(dir);
            QFAIL("opened a text file as a library");
        } catch (const FormatError& e) {
            const QString msg = QString::fromUtf8(e.what());
            QVERIFY2(msg.contains(QString::fromStdString((dir / "library.sqlite").string())), e.what());
            QVERIFY2(msg.contains(QStringLiteral("not a Sightline library database")), e.what());
        }
        // An SQLite database of some other program.
        const fs::path other = dir / "other";
        fs::create_directories(other);
        {
            sqlite3* db = nullptr;
            sqlite3_open((other / "library.sqlite").c_str(), &db);
            sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr);
            sqlite3_close(db);
        }
        try {
            Library::open(other);
            QFAIL("opened another program's database");
        } catch (const FormatError& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("not a Sightline library")), e.what());
        }
        // A library whose pages were overwritten in the middle: open or a full read fails naming the
        // file, or integrity_check reports it; never a silent success.
        const fs::path damaged = dir / "damaged";
        {
            Library lib = Library::open(damaged);
            for (int i = 0; i < 4; ++i) lib.store_document(test::synthetic_document(80, i, "/d" + std::to_string(i)), file_info("/d" + std::to_string(i)));
            lib.checkpoint();
        }
        {
            std::fstream f(damaged / "library.sqlite", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(0, std::ios::end);
            const auto size = static_cast<long>(f.tellp());
            QVERIFY(size > 64 * 1024);
            f.seekp(size / 2);
            const std::string garbage(16384, '\x5a');
            f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
        }
        bool noticed = false;
        try {
            Library lib = Library::open(damaged);
            noticed = lib.integrity_check() != "ok";
            for (const auto& d : lib.list_documents()) lib.load_document(d.id);
        } catch (const Error& e) {
            noticed = true;
            QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("library.sqlite")), e.what());
        }
        QVERIFY(noticed);
    }

    void default_dir_follows_xdg() {
        const QByteArray old_xdg = qgetenv("XDG_DATA_HOME"), old_home = qgetenv("HOME");
        qputenv("XDG_DATA_HOME", "/x/data");
        QCOMPARE(QString::fromStdString(Library::default_dir().string()), QStringLiteral("/x/data/sightline"));
        qunsetenv("XDG_DATA_HOME");
        qputenv("HOME", "/home/u");
        QCOMPARE(QString::fromStdString(Library::default_dir().string()), QStringLiteral("/home/u/.local/share/sightline"));
        qputenv("HOME", old_home);
        if (!old_xdg.isEmpty()) qputenv("XDG_DATA_HOME", old_xdg);
    }

    void round_trip_data() {
        QTest::addColumn<int>("units");
        QTest::addColumn<int>("batch");
        QTest::newRow("one transaction") << 9 << 64;
        QTest::newRow("batches of 2") << 9 << 2;
        QTest::newRow("batch of 1, odd count") << 7 << 1;
        QTest::newRow("no units") << 0 << 64;
    }
    void round_trip() {
        QFETCH(int, units);
        QFETCH(int, batch);
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        doc::Document d = test::synthetic_document(units, units + batch, "/docs/talk.mp4");
        if (units == 0) d.outline.clear(), d.links.clear();
        const DocId id = lib.store_document(d, file_info(d.path), batch);
        const auto info = lib.info(id);
        QVERIFY(info);
        QCOMPARE(info->state, DocumentState::Ready);
        QCOMPARE(info->unit_count, units);
        QCOMPARE(info->sha256, d.id);
        QCOMPARE(info->size_bytes, int64_t{4242});
        QCOMPARE(info->mtime_ns, int64_t{1234567890123456789});
        QCOMPARE(info->ingest_options, std::string(R"({"ocr":false})"));
        QCOMPARE(info->title, d.title);
        QVERIFY(info->ready_ms >= info->added_ms && info->added_ms > 0);
        QVERIFY(test::same_document(lib.load_document(id), d));
        // Without the bulky parts.
        const doc::Document light = lib.load_document(id, LoadOptions{false, false});
        QVERIFY(test::same_document(light, d, false, false));
        for (const auto& u : light.units) {
            for (const auto& b : u.blocks) QVERIFY(b.lines.empty());
            for (const auto& v : u.visuals) QVERIFY(v.encoded.empty());
        }
        if (units > 3) {
            doc::Document one;
            one.units.push_back(lib.load_unit(id, 3));
            doc::Document want;
            want.units.push_back(d.units[3]);
            QVERIFY(test::same_document(one, want));
            QCOMPARE(lib.visual_bytes(id, 3, 0), d.units[3].visuals[0].encoded);
            QVERIFY(lib.visual_bytes(id, 3, 1).empty());
            QVERIFY_THROWS_EXCEPTION(LibraryError, lib.load_unit(id, units));
        }
        QCOMPARE(lib.find_by_hash(d.id).value_or(DocumentInfo{}).id, id);
        QCOMPARE(lib.find_by_path(d.path).value_or(DocumentInfo{}).id, id);
        QVERIFY(!lib.find_by_path("/elsewhere"));
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.load_document(id + 1000));
    }

    void text_document_round_trip() {
        // DOCX/Markdown/HTML/EPUB documents: kind "text", units "section"; stored by name, so
        // libraries written before these kinds existed read as before (migrates_a_v1_database).
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        doc::Document d;
        d.id = std::string(64, 'e');
        d.path = "/docs/report.docx";
        d.kind = doc::DocumentKind::Text;
        d.title = "Report";
        for (int i = 0; i < 2; ++i) {
            doc::Unit u;
            u.kind = doc::UnitKind::Section;
            u.index = i;
            u.label = i == 0 ? "Intro" : "Results";
            u.blocks.push_back({doc::BlockRole::Title, u.label, std::nullopt, std::nullopt, {}, 1.0f});
            u.blocks.push_back({doc::BlockRole::TableCell, "42", std::nullopt, std::nullopt, {}, 1.0f});
            d.units.push_back(std::move(u));
        }
        const DocId id = lib.store_document(d, file_info(d.path));
        QCOMPARE(lib.info(id)->kind, doc::DocumentKind::Text);
        const doc::Document back = lib.load_document(id);
        QCOMPARE(back.kind, doc::DocumentKind::Text);
        QCOMPARE(back.units.size(), size_t{2});
        QCOMPARE(back.units[1].kind, doc::UnitKind::Section);
        QCOMPARE(QString::fromStdString(back.units[1].label), QStringLiteral("Results"));
        QCOMPARE(back.units[1].blocks[1].role, doc::BlockRole::TableCell);
    }

    void replacing_a_path_removes_the_old_version() {
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        const doc::Document v1 = test::synthetic_document(5, 1, "/docs/a.mp4");
        const doc::Document v2 = test::synthetic_document(3, 2, "/docs/a.mp4");
        const DocId a = lib.store_document(v1, file_info(v1.path));
        lib.save_token_stream({a, "fp", "{}", {5, 6}, {{0, 2, 0, -1, -1}}, 0});
        // While v2 is being written, v1 is still the ready one.
        const DocId b = lib.begin_document(file_info(v2.path), v2.id);
        lib.add_units(b, {v2.units[0]});
        QCOMPARE(lib.find_by_path(v1.path).value_or(DocumentInfo{}).id, a);
        QCOMPARE(lib.list_documents().size(), size_t{1});
        QCOMPARE(lib.list_documents(true).size(), size_t{2});
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.load_document(b));
        lib.add_units(b, {v2.units[1], v2.units[2]});
        lib.finish_document(b, v2);
        QVERIFY(!lib.info(a));
        QCOMPARE(lib.list_documents(true).size(), size_t{1});
        QVERIFY(test::same_document(lib.load_document(b), v2));
        QCOMPARE(test::count(lib, "SELECT count(*) FROM token_streams"), int64_t{0});
        // A failure of a later version is recorded next to the ready one, which stays.
        const DocId c = lib.begin_document(file_info(v2.path), "feed");
        lib.fail_document(c, "a.mp4: truncated");
        QCOMPARE(lib.info(c)->state, DocumentState::Failed);
        QCOMPARE(lib.info(c)->error, std::string("a.mp4: truncated"));
        QCOMPARE(lib.find_by_path(v2.path).value_or(DocumentInfo{}).id, b);
        QCOMPARE(lib.find_any_by_path(v2.path).value_or(DocumentInfo{}).id, c);
        QCOMPARE(lib.list_documents().size(), size_t{2});
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.add_units(c, {v2.units[0]}));
    }

    void remove_cascades() {
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        const doc::Document d = test::synthetic_document(6, 3, "/docs/x.mp4");
        const doc::Document e = test::synthetic_document(2, 4, "/docs/y.mp4");
        const DocId a = lib.store_document(d, file_info(d.path));
        const DocId b = lib.store_document(e, file_info(e.path));
        lib.save_token_stream({a, "fp", "{}", {1, 2, 3, 4}, {{0, 1, 0, -1, -1}, {1, 4, 0, 0, -1}}, 0});
        const fs::path kv_file = lib.kv_dir() / "ctx.kv";
        write_file(kv_file, "kv");
        const fs::path outside = fs::path(tmp.path().toStdString()) / "outside.kv";
        write_file(outside, "kv");
        KvCacheRecord both{0, kv_file.string(), "model", {b, a}, 10, 20, "{}", KvCacheState::Partial, 0};
        KvCacheRecord only_b{0, outside.string(), "model", {b}, 5, 5, "{}", KvCacheState::Complete, 0};
        const int64_t k1 = lib.save_kv_cache(both);
        const int64_t k2 = lib.save_kv_cache(only_b);
        lib.add_chat({0, "q", "a", "[]", "{}", 0});
        QVERIFY(lib.remove_document(a));
        QVERIFY(!lib.remove_document(a));
        QCOMPARE(test::count(lib, "SELECT count(*) FROM units WHERE document NOT IN (SELECT id FROM documents)"), int64_t{0});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM blocks WHERE unit NOT IN (SELECT id FROM units)"), int64_t{0});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM visuals WHERE unit NOT IN (SELECT id FROM units)"), int64_t{0});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM units"), int64_t{2});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM document_metadata"), int64_t{3});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM outline"), int64_t{3});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM token_streams"), int64_t{0});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM pragma_foreign_key_check"), int64_t{0});
        const auto kvs = lib.list_kv_caches();
        QCOMPARE(kvs.size(), size_t{1});
        QCOMPARE(kvs[0].id, k2);
        QVERIFY(!fs::exists(kv_file));  // the library's own file went with its record
        QVERIFY(fs::exists(outside));
        lib.remove_kv_cache(k2);
        QVERIFY(fs::exists(outside));  // never deletes files outside kv_dir()
        QVERIFY(lib.list_kv_caches().empty());
        QCOMPARE(lib.list_chats().size(), size_t{1});  // chats are not per document
        Q_UNUSED(k1);
    }

    void token_streams() {
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        const doc::Document d = test::synthetic_document(4, 5, "/docs/t.mp4");
        const DocId id = lib.store_document(d, file_info(d.path));
        StoredTokenStream s;
        s.document = id;
        s.fingerprint = "smollm2-135m:tok-sha:abc";
        s.settings = R"({"effort":"medium"})";
        auto& r = test::rng();
        const int n = 1000 + static_cast<int>(r() % 5000);
        for (int i = 0; i < n; ++i) s.tokens.push_back(static_cast<int32_t>(r() % 49152));
        for (int64_t at = 0; at < n;) {
            const int64_t len = std::min<int64_t>(n - at, 1 + static_cast<int64_t>(r() % 40));
            s.spans.push_back({at, at + len, static_cast<int32_t>(r() % 4), static_cast<int32_t>(r() % 3) - 1,
                               static_cast<int32_t>(r() % 2) - 1});
            at += len;
        }
        lib.save_token_stream(s);
        auto back = lib.load_token_stream(id, s.fingerprint);
        QVERIFY(back);
        QCOMPARE(back->tokens, s.tokens);
        QCOMPARE(back->spans.size(), s.spans.size());
        for (size_t i = 0; i < s.spans.size(); ++i) {
            QCOMPARE(back->spans[i].begin, s.spans[i].begin);
            QCOMPARE(back->spans[i].end, s.spans[i].end);
            QCOMPARE(back->spans[i].unit, s.spans[i].unit);
            QCOMPARE(back->spans[i].block, s.spans[i].block);
            QCOMPARE(back->spans[i].visual, s.spans[i].visual);
        }
        QCOMPARE(back->settings, s.settings);
        QVERIFY(back->created_ms > 0);
        QCOMPARE(lib.token_count(id, s.fingerprint).value_or(-1), static_cast<int64_t>(n));
        QVERIFY(!lib.load_token_stream(id, "other"));
        // Replacing keeps one row per (document, fingerprint).
        s.tokens.resize(2);
        s.spans = {{0, 2, 0, -1, -1}};
        lib.save_token_stream(s);
        QCOMPARE(lib.load_token_stream(id, s.fingerprint)->tokens.size(), size_t{2});
        QCOMPARE(test::count(lib, "SELECT count(*) FROM token_streams"), int64_t{1});
        // Spans that do not tile the tokens are refused.
        StoredTokenStream bad = s;
        bad.spans = {{0, 1, 0, -1, -1}};
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.save_token_stream(bad));
        bad.spans = {{0, 1, 0, -1, -1}, {2, 2, 0, -1, -1}};
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.save_token_stream(bad));
        bad = s;
        bad.document = id + 99;
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.save_token_stream(bad));
        lib.remove_token_streams(s.fingerprint);
        QVERIFY(!lib.load_token_stream(id, s.fingerprint));
    }

    void kv_caches_chats_reports() {
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        const DocId a = lib.store_document(test::synthetic_document(1, 1, "/a"), file_info("/a"));
        const DocId b = lib.store_document(test::synthetic_document(1, 2, "/b"), file_info("/b"));
        KvCacheRecord r{0, (lib.kv_dir() / "1.kv").string(), "smollm2", {b, a}, 100, 5000, R"({"msa":true})",
                        KvCacheState::Partial, 0};
        r.id = lib.save_kv_cache(r);
        QVERIFY(r.id > 0);
        auto found = lib.find_kv_cache("smollm2", {b, a}, R"({"msa":true})");
        QVERIFY(found);
        QCOMPARE(found->id, r.id);
        QCOMPARE(found->documents, (std::vector<DocId>{b, a}));
        QCOMPARE(found->state, KvCacheState::Partial);
        QVERIFY(!lib.find_kv_cache("smollm2", {a, b}, R"({"msa":true})"));  // order matters
        QVERIFY(!lib.find_kv_cache("smollm2", {b, a}, "{}"));
        r.n_tokens = 5000;
        r.state = KvCacheState::Complete;
        QCOMPARE(lib.save_kv_cache(r), r.id);
        QCOMPARE(lib.list_kv_caches().size(), size_t{1});
        QCOMPARE(lib.list_kv_caches()[0].n_tokens, int64_t{5000});
        QCOMPARE(lib.list_kv_caches()[0].state, KvCacheState::Complete);
        KvCacheRecord dangling = r;
        dangling.id = 0;
        dangling.documents = {a + b + 100};
        QVERIFY_THROWS_EXCEPTION(LibraryError, lib.save_kv_cache(dangling));  // unknown document

        const int64_t c1 = lib.add_chat({0, "What is R?", "A language [1].", R"([{"doc":1,"unit":3}])", "{}", 10});
        const int64_t c2 = lib.add_chat({0, "Second?", "Yes.", "[]", R"({"effort":"high"})", 0});
        const auto chats = lib.list_chats();
        QCOMPARE(chats.size(), size_t{2});
        QCOMPARE(chats[0].id, c1);
        QCOMPARE(chats[0].citations, std::string(R"([{"doc":1,"unit":3}])"));
        QCOMPARE(chats[0].created_ms, int64_t{10});
        QCOMPARE(lib.chat(c2)->settings, std::string(R"({"effort":"high"})"));
        QVERIFY(!lib.chat(c2 + 10));
        lib.add_report({0, "/tmp/r.html", "html", {c1, c2}, 0});
        const auto reports = lib.list_reports();
        QCOMPARE(reports.size(), size_t{1});
        QCOMPARE(reports[0].chats, (std::vector<int64_t>{c1, c2}));
        QCOMPARE(reports[0].format, std::string("html"));
        QVERIFY(reports[0].created_ms > 0);
    }

    // A child process that dies (_exit, like a crash) in the middle of writing a document leaves
    // an Ingesting row that nobody sees as ready and that remove_abandoned() deletes.
    // Saved-context paths are stored relative to the library: a library opened through a relative
    // path from another working directory, or copied elsewhere, finds its own files.
    void kv_paths_relative_to_the_library() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path old_cwd = fs::current_path();
        fs::current_path(root);
        std::string stored;
        {
            Library lib = Library::open("LK");  // relative to the working directory
            const DocId a = lib.store_document(test::synthetic_document(1, 1, "/a"), file_info("/a"));
            std::ofstream(lib.kv_dir() / "ctx.slkv") << "x";
            KvCacheRecord r{0, (lib.kv_dir() / "ctx.slkv").string(), "m", {a}, 1, 1, "{}", KvCacheState::Complete, 0};
            lib.save_kv_cache(r);
            QCOMPARE(fs::path(lib.list_kv_caches()[0].path), fs::absolute("LK/kv/ctx.slkv").lexically_normal());
            // An absolute path outside the library stays absolute.
            KvCacheRecord out{0, (root / "elsewhere.slkv").string(), "m", {a}, 1, 1, "{\"o\":1}", KvCacheState::Complete, 0};
            lib.save_kv_cache(out);
            QVERIFY(lib.find_kv_cache("m", {a}, "{\"o\":1}")->path == (root / "elsewhere.slkv").string());
        }
        fs::create_directories(root / "sub");
        fs::current_path(root / "sub");
        {
            Library lib = Library::open("../LK");
            QCOMPARE(fs::path(lib.find_kv_cache("m", {1}, "{}")->path), (root / "LK/kv/ctx.slkv").lexically_normal());
        }
        fs::current_path(root);
        fs::copy(root / "LK", root / "copy", fs::copy_options::recursive);
        {
            Library lib = Library::open((root / "copy").string());
            QCOMPARE(fs::path(lib.find_kv_cache("m", {1}, "{}")->path), (root / "copy/kv/ctx.slkv").lexically_normal());
            lib.remove_document(1);  // removes the copy's file, not the original's
            QVERIFY(!fs::exists(root / "copy/kv/ctx.slkv"));
            QVERIFY(fs::exists(root / "LK/kv/ctx.slkv"));
        }
        fs::current_path(old_cwd);
    }

    void abandoned_rows_of_dead_processes() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const doc::Document d = test::synthetic_document(10, 6, "/docs/crash.mp4");
        { Library lib = Library::open(dir); }
        const pid_t child = ::fork();
        QVERIFY(child >= 0);
        if (child == 0) {
            try {
                Library lib = Library::open(dir);
                const DocId id = lib.begin_document(file_info(d.path), d.id);
                lib.add_units(id, {d.units[0], d.units[1]});
            } catch (...) {
                ::_exit(3);
            }
            ::_exit(0);  // no finish, no cleanup
        }
        int status = 0;
        QCOMPARE(::waitpid(child, &status, 0), child);
        QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        Library lib = Library::open(dir);
        QVERIFY(lib.list_documents().empty());
        const auto all = lib.list_documents(true);
        QCOMPARE(all.size(), size_t{1});
        QCOMPARE(all[0].state, DocumentState::Ingesting);
        QVERIFY(!lib.find_by_path(d.path));
        QVERIFY(!lib.find_by_hash(d.id));
        // A live writer's row (this process) is kept.
        const DocId mine = lib.begin_document(file_info("/docs/live.mp4"), "live");
        QCOMPARE(lib.remove_abandoned(), 1);
        QVERIFY(lib.info(mine));
        QCOMPARE(test::count(lib, "SELECT count(*) FROM units"), int64_t{0});
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
    }

    // WAL: readers in other connections never see a half-written document, keep their snapshot
    // during a read transaction, and do not block the writer.
    void concurrent_reader_while_writer_commits() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Library writer = Library::open(dir);
        constexpr int kDocs = 12;
        std::vector<doc::Document> docs;
        for (int i = 0; i < kDocs; ++i)
            docs.push_back(test::synthetic_document(5 + i % 7, i, "/docs/" + std::to_string(i) + ".mp4"));

        // Snapshot isolation first.
        Library reader = Library::open(dir);
        writer.store_document(docs[0], file_info(docs[0].path));
        QCOMPARE(sqlite3_exec(reader.handle(), "BEGIN", nullptr, nullptr, nullptr), SQLITE_OK);
        QCOMPARE(test::count(reader, "SELECT count(*) FROM documents"), int64_t{1});
        writer.store_document(docs[1], file_info(docs[1].path), 2);  // commits while the reader reads
        QCOMPARE(test::count(reader, "SELECT count(*) FROM documents"), int64_t{1});
        QCOMPARE(sqlite3_exec(reader.handle(), "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
        QCOMPARE(test::count(reader, "SELECT count(*) FROM documents"), int64_t{2});
        // data_version tells the reader that someone else committed.
        const int64_t version = reader.data_version();
        QCOMPARE(reader.data_version(), version);
        writer.add_chat({0, "q", "a", "[]", "{}", 0});
        QVERIFY(reader.data_version() != version);

        // Then a reader thread polling while the writer stores the rest in small batches.
        std::atomic<bool> done{false};
        std::atomic<int> loads{0}, errors{0};
        std::string first_error;
        std::thread t([&] {
            try {
                Library r = Library::open(dir);
                while (!done.load()) {
                    for (const auto& info : r.list_documents()) {
                        if (info.state != DocumentState::Ready) {
                            ++errors;
                            continue;
                        }
                        const doc::Document got = r.load_document(info.id);
                        const int which = std::stoi(got.metadata.at("seed"));
                        if (got.units.size() != docs[static_cast<size_t>(which)].units.size() ||
                            static_cast<int>(got.units.size()) != info.unit_count ||
                            got.units.back().blocks.back().text != docs[static_cast<size_t>(which)].units.back().blocks.back().text)
                            ++errors;
                        ++loads;
                    }
                }
            } catch (const std::exception& e) {
                first_error = e.what();
                ++errors;
            }
        });
        for (int i = 2; i < kDocs; ++i) writer.store_document(docs[static_cast<size_t>(i)], file_info(docs[static_cast<size_t>(i)].path), 2);
        // Let the reader see the final state at least once.
        const int seen = loads.load();
        while (loads.load() < seen + kDocs && errors.load() == 0) std::this_thread::yield();
        done = true;
        t.join();
        QVERIFY2(errors.load() == 0, first_error.c_str());
        QVERIFY(loads.load() > 0);
        QCOMPARE(writer.list_documents().size(), size_t{kDocs});
    }
};

QTEST_GUILESS_MAIN(TestLibrary)
#include "tst_library.moc"
