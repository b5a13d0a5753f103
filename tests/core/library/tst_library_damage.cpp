// A library that is not there, damaged or half-written: opening modes (a mistyped folder is an
// error, not a new library), the schema and foreign-key checks `library check` reports, refusal to
// write into a damaged library, an empty database file, and the kind a failed add is listed with.
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

#include <fstream>

#include "core/library/library.h"
#include "core/util/error.h"
#include "tests/core/library/library_test_util.h"

using namespace sl;
namespace fs = std::filesystem;

namespace {

void raw_exec(const fs::path& db_file, const char* sql) {
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(db_file.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    QVERIFY2(rc == SQLITE_OK, err ? err : "?");
    sqlite3_close(db);
}

// A library in `dir` with one stored document.
void make_library(const fs::path& dir) {
    Library lib = Library::open(dir);
    const DocId id = lib.begin_document({(dir / "a.pdf").string(), 10, 1, "{}"}, "sha-a");
    lib.write_document(id, test::synthetic_document(3, 1, (dir / "a.pdf").string()));
}

template <class F>
QString error_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

}  // namespace

class TstLibraryDamage : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void existingNeedsALibrary() {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "typo";
        for (LibraryOpen mode : {LibraryOpen::Existing, LibraryOpen::Inspect}) {
            const QString e = error_of([&] { Library::open(dir, mode); });
            QVERIFY2(e.contains(QStringLiteral("no library here")) && e.contains(QString::fromStdString(dir.string())), qPrintable(e));
            QVERIFY(!fs::exists(dir));  // nothing created
        }
        make_library(dir);
        Library lib = Library::open(dir, LibraryOpen::Existing);
        QVERIFY(!lib.read_only());
        QCOMPARE(lib.list_documents().size(), size_t{1});
        QVERIFY(lib.check().empty());
        Library inspect = Library::open(dir, LibraryOpen::Inspect);
        QVERIFY(inspect.read_only());
        QCOMPARE(inspect.list_documents().size(), size_t{1});
        QVERIFY(inspect.check().empty());
    }

    // A dropped table: every writer and reader refuses it by name; check lists it.
    void droppedTableRefused() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        make_library(dir);
        raw_exec(dir / "library.sqlite", "PRAGMA foreign_keys = OFF; DROP TABLE visuals;");
        for (LibraryOpen mode : {LibraryOpen::Create, LibraryOpen::Existing}) {
            const QString e = error_of([&] { Library::open(dir, mode); });
            QVERIFY2(e.contains(QStringLiteral("damaged")) && e.contains(QStringLiteral("table visuals is missing")), qPrintable(e));
        }
        Library lib = Library::open(dir, LibraryOpen::Inspect);
        const auto problems = lib.check();
        QVERIFY(!problems.empty());
        QVERIFY2(problems.back() == "table visuals is missing", problems.back().c_str());
    }

    void droppedColumnFound() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        make_library(dir);
        raw_exec(dir / "library.sqlite", "ALTER TABLE documents DROP COLUMN error;");
        const QString e = error_of([&] { Library::open(dir, LibraryOpen::Existing); });
        QVERIFY2(e.contains(QStringLiteral("column documents.error is missing")), qPrintable(e));
    }

    // Rows whose parent is gone (written with foreign keys off): `check` names them.
    void orphanRowsFound() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        make_library(dir);
        raw_exec(dir / "library.sqlite", "PRAGMA foreign_keys = OFF; DELETE FROM documents;");
        Library lib = Library::open(dir, LibraryOpen::Inspect);
        const auto problems = lib.check();
        QVERIFY(!problems.empty());
        bool orphan = false;
        for (const auto& p : problems) orphan = orphan || p.find("points to a missing row of documents") != std::string::npos;
        QVERIFY2(orphan, problems.front().c_str());
    }

    void emptyDatabaseFile() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::ofstream(dir / "library.sqlite").close();
        for (LibraryOpen mode : {LibraryOpen::Create, LibraryOpen::Existing}) {
            const QString e = error_of([&] { Library::open(dir, mode); });
            QVERIFY2(e.contains(QStringLiteral("empty (0 bytes)")), qPrintable(e));
        }
        QCOMPARE(fs::file_size(dir / "library.sqlite"), uintmax_t{0});  // not turned into a new library
        Library lib = Library::open(dir, LibraryOpen::Inspect);
        const auto problems = lib.check();
        QVERIFY(!problems.empty());
        QCOMPARE(problems.front(), std::string("the database file is empty (0 bytes)"));
    }

    // A failed add is listed with the kind its name says, not as a PDF.
    void failedAddKeepsItsKind() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        Library lib = Library::open(dir);
        const struct {
            const char* name;
            doc::DocumentKind kind;
        } cases[] = {{"talk.MKV", doc::DocumentKind::Video}, {"deck.pptx", doc::DocumentKind::Slides},
                     {"scan.jpeg", doc::DocumentKind::Image}, {"a.b/noext", doc::DocumentKind::Pdf}};
        for (const auto& c : cases) {
            const DocId id = lib.begin_document({(dir / c.name).string(), 1, 1, "{}"}, std::string("sha-") + c.name);
            lib.fail_document(id, "damaged");
            const auto info = lib.info(id);
            QVERIFY(info);
            QVERIFY2(info->kind == c.kind, c.name);
        }
    }
    // A unit count or unit numbers that do not match the stored units (damage, hand edits) are
    // refused as FormatError, not std::out_of_range from load_unit or a huge reservation.
    void damagedUnitsRefused() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        make_library(dir);
        const DocId id = Library::open(dir).list_documents().at(0).id;
        struct Damage {
            const char* sql;
            int unit;  // a unit load_unit must refuse; -1: none
        };
        const Damage damage[] = {{"UPDATE documents SET unit_count = 5;", 4},
                                 {"UPDATE documents SET unit_count = 2147483647;", 1000},
                                 {"UPDATE documents SET unit_count = -1;", -1},
                                 {"UPDATE units SET idx = idx + 10;", 0}};
        for (const Damage& dmg : damage) {
            QTemporaryDir copy;
            const fs::path d2 = copy.path().toStdString();
            make_library(d2);
            raw_exec(d2 / "library.sqlite", dmg.sql);
            Library lib = Library::open(d2, LibraryOpen::Existing);
            const DocId did = lib.list_documents().at(0).id;
            QVERIFY_THROWS_EXCEPTION(FormatError, lib.load_document(did));
            if (dmg.unit >= 0) QVERIFY_THROWS_EXCEPTION(FormatError, lib.load_unit(did, dmg.unit));
            const QString e = error_of([&] { lib.load_document(did); });
            QVERIFY2(e.contains(QStringLiteral("damaged")), qPrintable(e));
        }
        Library lib = Library::open(dir, LibraryOpen::Existing);
        QCOMPARE(lib.load_document(id).units.size(), size_t{3});  // the undamaged one still reads
        QCOMPARE(lib.load_unit(id, 2).index, 2);
    }

    // Id lists (kv_caches.documents, reports.chats) that are not decimal ids joined by ',' are
    // refused as FormatError naming the database, not std::stoll's exceptions or a misread prefix.
    void damagedIdListsRefused() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        make_library(dir);
        {
            Library lib = Library::open(dir);
            const DocId id = lib.list_documents().at(0).id;
            lib.save_kv_cache({0, (lib.kv_dir() / "1.kv").string(), "model", {id}, 1, 2, "{}",
                               KvCacheState::Partial, 0});
            lib.add_report({0, (dir / "r.md").string(), "md", {}, 0});
            QCOMPARE(lib.list_kv_caches().at(0).documents, std::vector<DocId>{id});
            QVERIFY(lib.list_reports().at(0).chats.empty());
        }
        const char* damaged[] = {"-", "1-2", "--3", "+4", "99999999999999999999", "1,,2",
                                 "1,",  ",",   "x",   " 1", "1 ",                   "0x10"};
        for (const char* bad : damaged) {
            const QByteArray value(bad);
            const QByteArray sql = "UPDATE kv_caches SET documents = '" + value +
                                   "'; UPDATE reports SET chats = '" + value + "';";
            raw_exec(dir / "library.sqlite", sql.constData());
            Library lib = Library::open(dir, LibraryOpen::Existing);
            QVERIFY_THROWS_EXCEPTION(FormatError, lib.list_kv_caches());
            QVERIFY_THROWS_EXCEPTION(FormatError, lib.list_reports());
            const QString e = error_of([&] { lib.list_reports(); });
            QVERIFY2(e.contains(QStringLiteral("malformed id list")) &&
                         e.contains(QStringLiteral("library.sqlite")),
                     qPrintable(e));
        }
    }
};

QTEST_GUILESS_MAIN(TstLibraryDamage)
#include "tst_library_damage.moc"
