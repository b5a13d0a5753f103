// File → Disk Use…: the library's sizes (database, saved contexts, search index) measured as the
// files are, and the saved contexts and search index cleared (records and files), the documents
// kept.
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "app/desktop/disk_usage.h"
#include "core/library/library.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;
namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& p, size_t n) {
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    const std::string chunk(n, 'x');
    f.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
}

// A saved context's record and a file of `bytes` under kv/.
void add_context(sl::Library& lib, const char* name, size_t bytes) {
    const fs::path f = lib.kv_dir() / name;
    write_bytes(f, bytes);
    sl::KvCacheRecord r;
    r.path = f.string();
    r.model_fingerprint.assign(name);
    r.n_tokens = r.total_tokens = 10;
    lib.save_kv_cache(r);
}

}  // namespace

class TstDesktopDisk : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void measuresAndClears() {
        QTemporaryDir tmp;
        const fs::path dir = tmp.filePath(QStringLiteral("library")).toStdString();
        {
            sl::Library lib = sl::Library::open(dir);
            add_context(lib, "ctx0.slkv", 1000);
            add_context(lib, "ctx1.slkv", 2000);
            add_context(lib, "ctx2.slkv", 3000);
            QCOMPARE(lib.list_kv_caches().size(), size_t{3});
            write_bytes(lib.kv_dir() / "left-by-a-crash.tmp", 500);
        }
        write_bytes(dir / "embed" / "minilm" / "a.bin", 4096);
        write_bytes(dir / "embed" / "b.bin", 100);

        const DiskUsage u = measure_disk_usage(dir);
        QVERIFY2(u.error.isEmpty(), qPrintable(u.error));
        QCOMPARE(u.contexts, qint64{6500});
        QCOMPARE(u.context_files, 4);
        QCOMPARE(u.embeddings, qint64{4196});
        QCOMPARE(u.embedding_files, 2);
        QVERIFY(u.database > 0);
        QCOMPARE(u.total(), u.database + 6500 + 4196);

        // Through the dialog, as the buttons do after their confirmation.
        DiskDialog dlg(dir, qint64{2} << 30, nullptr);
        QTRY_COMPARE(dlg.usage().context_files, 4);
        dlg.clearContexts();
        QTRY_COMPARE_WITH_TIMEOUT(dlg.usage().context_files, 0, 10000);
        QCOMPARE(dlg.usage().embedding_files, 2);  // untouched
        dlg.clearIndex();
        QTRY_COMPARE_WITH_TIMEOUT(dlg.usage().embedding_files, 0, 10000);
        {
            sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
            QVERIFY(lib.list_kv_caches().empty());
        }
        QVERIFY(fs::exists(dir / "library.sqlite"));
        QVERIFY(fs::exists(dir / "embed"));
    }

    void sizesReadable() {
        QCOMPARE(human_size(0), QStringLiteral("0 bytes"));
        QVERIFY(human_size(qint64{3} << 30).startsWith(QStringLiteral("3.0 GiB")) ||
                human_size(qint64{3} << 30).startsWith(QStringLiteral("3.0 GB")));
        // A library folder that does not exist measures as empty, without an error.
        const DiskUsage none = measure_disk_usage("/nonexistent/sightline-library");
        QCOMPARE(none.total(), qint64{0});
        QVERIFY(none.error.isEmpty());
    }
};

QTEST_MAIN(TstDesktopDisk)
#include "tst_desktop_disk.moc"
