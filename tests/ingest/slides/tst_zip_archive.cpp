// The safe zip layer: listing and reading, unsafe names, the caps (per read, total, ratio) counted
// on the bytes actually inflated, a real 1 GiB zip bomb, lying headers, truncated and foreign
// files.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>
#include <sys/resource.h>

#include "ingest/ingest_error.h"
#include "ingest/slides/zip_archive.h"
#include "tests/common/test_support.h"
#include "tests/ingest/slides/pptx_fixture.h"
#include "tests/ingest/slides/zip_bomb.h"

using sl::ingest::IngestError;
using sl::ingest::IngestErrorKind;
using sl::ingest::ZipArchive;
using sl::ingest::ZipLimits;
using sl::test::pptx::make_zip;
using sl::test::pptx::ZipItem;

Q_DECLARE_METATYPE(IngestErrorKind)

class TstZipArchive : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void listsAndReads();
    void readPrefix();
    void missingEntry();
    void safeNames_data();
    void safeNames();
    void unsafeEntriesSkipped();
    void perReadCap();
    void totalCapCountsEveryRead();
    void gigabyteBombStopsEarly();
    void lyingHeaderCounted();
    void damaged_data();
    void damaged();
    void openFile();
};

namespace {

std::span<const uint8_t> span_of(const QByteArray& b) {
    return {reinterpret_cast<const uint8_t*>(b.constData()), static_cast<size_t>(b.size())};
}

QByteArray pattern(int n) {
    QByteArray b;
    b.reserve(n);
    for (int i = 0; i < n; ++i) b.append(static_cast<char>('a' + (i * 7 + i / 13) % 26));
    return b;
}

long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

IngestErrorKind kind_of(const std::function<void()>& f, std::string* what = nullptr) {
    try {
        f();
    } catch (const IngestError& e) {
        if (what) *what = e.what();
        return e.kind();
    }
    return static_cast<IngestErrorKind>(-1);
}

}  // namespace

void TstZipArchive::listsAndReads() {
    const QByteArray big = pattern(300000);
    const QByteArray zip = make_zip({{"a.txt", "hello", false}, {"dir/b.xml", big, true}});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    QCOMPARE(z.entries().size(), size_t{2});
    QCOMPARE(QString::fromStdString(z.entries()[1].name), QStringLiteral("dir/b.xml"));
    QVERIFY(z.contains("a.txt"));
    QVERIFY(!z.contains("b.xml"));
    QCOMPARE(z.read("a.txt", 100), QByteArray("hello"));
    QCOMPARE(z.read("dir/b.xml", 1 << 20), big);
    QCOMPARE(z.total_inflated(), int64_t{5 + 300000});
}

void TstZipArchive::readPrefix() {
    const QByteArray big = pattern(200000);
    const QByteArray zip = make_zip({{"b", big, true}});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    QCOMPARE(z.read_prefix("b", 1000), big.left(1000));
    QCOMPARE(z.read_prefix("b", 1 << 20), big);
}

void TstZipArchive::missingEntry() {
    const QByteArray zip = make_zip({{"a", "x", true}});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    std::string what;
    QCOMPARE(kind_of([&] { z.read("nope.xml", 10); }, &what), IngestErrorKind::Corrupt);
    QVERIFY2(what.find("t.zip") == 0 && what.find("nope.xml") != std::string::npos, what.c_str());
}

void TstZipArchive::safeNames_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("safe");
    QTest::newRow("plain") << "ppt/slides/slide1.xml" << true;
    QTest::newRow("dot") << "./ppt/x.xml" << true;
    QTest::newRow("dots in name") << "ppt/a..b.xml" << true;
    QTest::newRow("dir") << "ppt/media/" << true;
    QTest::newRow("parent") << "../../evil" << false;
    QTest::newRow("inner parent") << "ppt/../../evil" << false;
    QTest::newRow("trailing parent") << "ppt/.." << false;
    QTest::newRow("absolute") << "/abs/evil" << false;
    QTest::newRow("backslash") << "..\\evil" << false;
    QTest::newRow("drive") << "C:/evil" << false;
    QTest::newRow("empty") << "" << false;
}

void TstZipArchive::safeNames() {
    QFETCH(QString, name);
    QFETCH(bool, safe);
    QCOMPARE(ZipArchive::is_safe_name(name.toStdString()), safe);
}

void TstZipArchive::unsafeEntriesSkipped() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const std::filesystem::path cwd = std::filesystem::current_path();
    std::filesystem::current_path(tmp.path().toStdString() + "/");
    std::filesystem::create_directories("a/b");
    std::filesystem::current_path("a/b");
    const QByteArray zip = make_zip({{"../../evil", "pwned", true},
                                     {"/abs/evil", "pwned", true},
                                     {"..\\evil", "pwned", false},
                                     {"ok.txt", "fine", true}});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    QCOMPARE(z.entries().size(), size_t{1});
    QCOMPARE(z.unsafe_names().size(), size_t{3});
    QCOMPARE(z.read("ok.txt", 10), QByteArray("fine"));
    std::string what;
    QCOMPARE(kind_of([&] { z.read("../../evil", 10); }, &what), IngestErrorKind::Corrupt);
    QVERIFY2(what.find("unsafe") != std::string::npos, what.c_str());
    QCOMPARE(kind_of([&] { z.read("/abs/evil", 10); }), IngestErrorKind::Corrupt);
    std::filesystem::current_path(cwd);
    // Nothing was written anywhere near.
    QVERIFY(!std::filesystem::exists(tmp.path().toStdString() + "/evil"));
    QVERIFY(!std::filesystem::exists("/abs/evil"));
}

void TstZipArchive::perReadCap() {
    const QByteArray zip = make_zip({{"big", pattern(100000), true}});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    std::string what;
    QCOMPARE(kind_of([&] { z.read("big", 1000); }, &what), IngestErrorKind::TooLarge);
    QVERIFY2(what.find("big") != std::string::npos, what.c_str());
}

void TstZipArchive::totalCapCountsEveryRead() {
    const QByteArray zip = make_zip({{"a", pattern(100000), true}});
    ZipLimits limits;
    limits.max_total_bytes = 250000;
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", limits);
    z.read("a", 1 << 20);
    z.read("a", 1 << 20);  // the same entry again counts again
    QCOMPARE(kind_of([&] { z.read("a", 1 << 20); }), IngestErrorKind::TooLarge);
}

void TstZipArchive::gigabyteBombStopsEarly() {
    // 1 GiB of zeros in about 1 MiB, named like a slide.
    const ZipItem bomb = sl::test::pptx::zeros_bomb("ppt/slides/slide1.xml", 1024);
    QVERIFY(bomb.raw->size() < (2 << 20));
    const QByteArray zip = make_zip({bomb});
    const long rss_before = peak_rss_kib();
    QElapsedTimer t;
    t.start();
    {  // The ratio cap (200x by default) trips first.
        ZipArchive z = ZipArchive::open_memory(span_of(zip), "bomb.pptx", {});
        std::string what;
        QCOMPARE(kind_of([&] { z.read("ppt/slides/slide1.xml", int64_t{4} << 30); }, &what),
                 IngestErrorKind::TooLarge);
        QVERIFY2(what.find("zip bomb") != std::string::npos, what.c_str());
        QVERIFY(z.total_inflated() < (int64_t{300} << 20));
    }
    {  // With the ratio cap lifted, the total cap trips.
        ZipLimits limits;
        limits.max_ratio = 1e12;
        limits.max_total_bytes = int64_t{64} << 20;
        ZipArchive z = ZipArchive::open_memory(span_of(zip), "bomb.pptx", limits);
        QCOMPARE(kind_of([&] { z.read("ppt/slides/slide1.xml", int64_t{4} << 30); }),
                 IngestErrorKind::TooLarge);
        QVERIFY(z.total_inflated() <= (int64_t{64} << 20) + (64 << 10));
    }
    qInfo("bomb refused in %lld ms; peak RSS %ld -> %ld KiB", static_cast<long long>(t.elapsed()),
          rss_before, peak_rss_kib());
    QVERIFY(peak_rss_kib() - rss_before < 400 * 1024);
}

void TstZipArchive::lyingHeaderCounted() {
    // The headers claim 10 bytes; the data inflates to 5 MiB. The cap counts what inflates.
    const QByteArray real = pattern(5 << 20);
    ZipItem liar;
    liar.name = "liar.xml";
    liar.raw = sl::test::pptx::raw_deflate(real);
    liar.crc = 0;
    liar.size = 10;
    const QByteArray zip = make_zip({liar});
    ZipArchive z = ZipArchive::open_memory(span_of(zip), "t.zip", {});
    QCOMPARE(z.entries()[0].size, uint64_t{10});
    const IngestErrorKind k = kind_of([&] { z.read("liar.xml", 1 << 20); });
    // Either our count trips (TooLarge) or libzip notices the lie first (Corrupt); never 5 MiB.
    QVERIFY(k == IngestErrorKind::TooLarge || k == IngestErrorKind::Corrupt);
    QVERIFY(z.total_inflated() <= (1 << 20) + (64 << 10));
}

void TstZipArchive::damaged_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<IngestErrorKind>("kind");
    const QByteArray good = make_zip({{"a.xml", pattern(5000), true}, {"b.xml", "b", true}});
    QTest::newRow("empty") << QByteArray() << IngestErrorKind::Corrupt;
    QTest::newRow("text") << QByteArray("this is not a zip file at all")
                          << IngestErrorKind::Corrupt;
    QTest::newRow("truncated half") << good.left(good.size() / 2) << IngestErrorKind::Corrupt;
    QTest::newRow("no end record") << good.left(good.size() - 10) << IngestErrorKind::Corrupt;
}

void TstZipArchive::damaged() {
    QFETCH(QByteArray, bytes);
    QFETCH(IngestErrorKind, kind);
    std::string what;
    QCOMPARE(kind_of([&] { ZipArchive::open_memory(span_of(bytes), "bad.pptx", {}); }, &what),
             kind);
    QVERIFY2(what.find("bad.pptx: ") == 0, what.c_str());
}

void TstZipArchive::openFile() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/t.zip";
    const QByteArray zip = make_zip({{"x", "y", true}});
    std::ofstream(path, std::ios::binary).write(zip.constData(), zip.size());
    ZipArchive z = ZipArchive::open_file(path, {});
    QCOMPARE(z.read("x", 10), QByteArray("y"));
    std::string what;
    QCOMPARE(
        kind_of([&] { ZipArchive::open_file(tmp.path().toStdString() + "/none.zip", {}); }, &what),
        IngestErrorKind::Io);
    QVERIFY2(what.find("none.zip") != std::string::npos, what.c_str());
}

QTEST_GUILESS_MAIN(TstZipArchive)
#include "tst_zip_archive.moc"
