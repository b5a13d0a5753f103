// The library with real ingest: the samples round-trip through the store; the add flow
// (added / unchanged / duplicate / moved / replaced / failed); `sightline-cli add` and
// `sightline-cli library`; and SIGKILL of `sightline-cli add` in the middle of an ingest.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "core/library/library.h"
#include "core/util/sha256.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"
#include "tests/core/library/library_test_util.h"

using namespace sl;
namespace fs = std::filesystem;

namespace {

ingest::IngestOptions fast_options() {
    ingest::IngestOptions o;
    o.ocr = false;
    o.transcribe = false;
    return o;
}

doc::Document read_fast(const std::string& path) {
    ingest::IngestContext ctx(fast_options());
    return ingest::read_document(path, ctx);
}

void copy_over(const fs::path& from, const fs::path& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

struct Cli {
    int exit_code = -1;
    QString out, err;
};

Cli run_cli(const QStringList& args, int timeout_ms = 600000) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    Cli r;
    if (!p.waitForStarted(30000) || !p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        return r;
    }
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace

class TestLibraryIngest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void samples_round_trip_data() {
        QTest::addColumn<QString>("sample");
        QTest::newRow("pdf") << QStringLiteral("samples/pdf/R-intro.pdf");
        QTest::newRow("pptx") << QStringLiteral("samples/pptx/pandoc-reference.pptx");
        QTest::newRow("video") << QStringLiteral("samples/video/vtest.avi");
    }
    void samples_round_trip() {
        QFETCH(QString, sample);
        REQUIRE_ASSET(path, sample.toStdString());
        const doc::Document d = read_fast(path.string());
        QVERIFY(!d.units.empty());
        QTemporaryDir tmp;
        Library lib = Library::open(tmp.path().toStdString());
        Library::FileInfo file;
        file.path = d.path;
        file.size_bytes = static_cast<int64_t>(fs::file_size(path));
        QElapsedTimer t;
        t.start();
        const DocId id = lib.store_document(d, file, 16);
        const qint64 store_ms = t.restart();
        const doc::Document back = lib.load_document(id);
        const qint64 load_ms = t.elapsed();
        QCOMPARE(lib.info(id)->unit_count, static_cast<int>(d.units.size()));
        QVERIFY(test::same_document(back, d));
        // Timings are reported, not asserted.
        qInfo("%s: %zu units, %zu blocks, %zu visuals round-trip; store %lld ms, load %lld ms", qPrintable(sample),
              d.units.size(), d.block_count(), d.visual_count(), static_cast<long long>(store_ms),
              static_cast<long long>(load_ms));
    }

    void add_flow() {
        REQUIRE_ASSET(hello, "samples/pdf/helloworld.pdf");
        REQUIRE_ASSET(intro, "samples/pdf/R-intro.pdf");
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        Library lib = Library::open(root / "lib");
        int reads = 0;
        auto read = [&](const std::string& p) {
            ++reads;
            return read_fast(p);
        };
        const fs::path a = root / "a.pdf";
        copy_over(hello, a);
        AddResult r = add_file(lib, a.string(), read);
        QCOMPARE(r.status, AddStatus::Added);
        QCOMPARE(reads, 1);
        QCOMPARE(r.info.state, DocumentState::Ready);
        QCOMPARE(r.info.path, a.string());
        QCOMPARE(r.info.sha256, sha256_file_hex(hello));
        QCOMPARE(r.info.unit_count, 1);
        const DocId first = r.id;

        // Unchanged: same bytes at the same path; nothing is read.
        r = add_file(lib, a.string(), read);
        QCOMPARE(r.status, AddStatus::Unchanged);
        QCOMPARE(r.id, first);
        QCOMPARE(reads, 1);

        // Duplicate: same bytes at another path that exists.
        const fs::path b = root / "b.pdf";
        copy_over(hello, b);
        r = add_file(lib, b.string(), read);
        QCOMPARE(r.status, AddStatus::Duplicate);
        QVERIFY2(QString::fromStdString(r.message).contains(QString::fromStdString(a.string())), r.message.c_str());
        QCOMPARE(reads, 1);

        // Moved: the original path is gone; the document follows the file without a re-read.
        const fs::path c = root / "c.pdf";
        fs::rename(a, c);
        fs::remove(b);
        r = add_file(lib, c.string(), read);
        QCOMPARE(r.status, AddStatus::Unchanged);
        QCOMPARE(r.id, first);
        QCOMPARE(r.info.path, c.string());
        QCOMPARE(reads, 1);

        // Changed: other bytes at the same path are re-read and replace the old version.
        copy_over(intro, c);
        r = add_file(lib, c.string(), read);
        QCOMPARE(r.status, AddStatus::Replaced);
        QCOMPARE(reads, 2);
        QVERIFY(r.id != first);
        QVERIFY(!lib.info(first));
        QCOMPARE(r.info.sha256, sha256_file_hex(intro));
        QCOMPARE(r.info.unit_count, 113);
        QCOMPARE(lib.list_documents().size(), size_t{1});

        // --force re-reads unchanged files.
        AddOptions force;
        force.force = true;
        r = add_file(lib, c.string(), read, force);
        QCOMPARE(r.status, AddStatus::Replaced);
        QCOMPARE(reads, 3);

        // Failed: a truncated PDF is recorded as failed with the reader's reason; the library is fine.
        const fs::path broken = root / "broken.pdf";
        {
            std::ifstream in(hello, std::ios::binary);
            std::string head(300, '\0');
            in.read(head.data(), 300);
            std::ofstream(broken, std::ios::binary).write(head.data(), 300);
        }
        r = add_file(lib, broken.string(), read);
        QCOMPARE(r.status, AddStatus::Failed);
        QVERIFY2(QString::fromStdString(r.message).contains(QStringLiteral("broken.pdf")), r.message.c_str());
        QCOMPARE(lib.info(r.id)->state, DocumentState::Failed);
        QCOMPARE(lib.info(r.id)->error, r.message);
        // Trying again replaces the failure record instead of piling them up.
        r = add_file(lib, broken.string(), read);
        QCOMPARE(r.status, AddStatus::Failed);
        QCOMPARE(lib.list_documents().size(), size_t{2});

        // A missing file fails without touching the library.
        r = add_file(lib, (root / "nope.pdf").string(), read);
        QCOMPARE(r.status, AddStatus::Failed);
        QCOMPARE(r.id, DocId{0});
        QVERIFY2(QString::fromStdString(r.message).contains(QStringLiteral("nope.pdf")), r.message.c_str());
        QCOMPARE(lib.list_documents().size(), size_t{2});
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
    }

    void cli_add_and_library() {
        REQUIRE_ASSET(hello, "samples/pdf/helloworld.pdf");
        REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
        REQUIRE_ASSET(video, "samples/video/vtest.avi");
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const QString lib_dir = QString::fromStdString((root / "lib").string());
        const fs::path broken = root / "broken.pdf";
        std::ofstream(broken, std::ios::binary) << "%PDF-1.7\nthis is not really a PDF\n";
        const QStringList fast = {QStringLiteral("--no-ocr"), QStringLiteral("--no-transcribe")};
        const QStringList files = {QString::fromStdString(hello.string()), QString::fromStdString(deck.string()),
                                   QString::fromStdString(video.string())};

        Cli r = run_cli(QStringList{QStringLiteral("add"), QStringLiteral("--library"), lib_dir} + fast + files +
                        QStringList{QString::fromStdString(broken.string())});
        QVERIFY2(r.exit_code == 1, qPrintable(r.err));  // one file failed
        const QStringList lines = r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 4);
        QVERIFY2(lines[0].startsWith(QStringLiteral("added helloworld.pdf: 1 page ")), qPrintable(lines[0]));
        QVERIFY2(lines[1].startsWith(QStringLiteral("added pandoc-reference.pptx: 4 slides ")), qPrintable(lines[1]));
        QVERIFY2(lines[2].startsWith(QStringLiteral("added vtest.avi: ")) && lines[2].contains(QStringLiteral(" segment")),
                 qPrintable(lines[2]));
        QVERIFY2(lines[3].startsWith(QStringLiteral("failed broken.pdf: ")), qPrintable(lines[3]));
        // Progress went to stderr as plain lines (not a terminal).
        QVERIFY2(r.err.contains(QStringLiteral("helloworld.pdf: 0% ")), qPrintable(r.err));
        QVERIFY(!r.err.contains(QLatin1Char('\r')));

        // Again: unchanged, nothing re-read, exit 0.
        QElapsedTimer t;
        t.start();
        r = run_cli(QStringList{QStringLiteral("add"), QStringLiteral("--library"), lib_dir} + fast + files);
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QCOMPARE(r.out, QStringLiteral("unchanged helloworld.pdf\nunchanged pandoc-reference.pptx\nunchanged vtest.avi\n"));
        qInfo("re-add of 3 unchanged files: %lld ms (process included)", static_cast<long long>(t.elapsed()));

        // A folder: supported files below it, others skipped.
        const fs::path folder = root / "folder" / "sub";
        fs::create_directories(folder);
        copy_over(deck, folder / "copy.pptx");
        std::ofstream(root / "folder" / "notes.xyz") << "not a document";
        r = run_cli(QStringList{QStringLiteral("add"), QStringLiteral("--library"), lib_dir} + fast +
                    QStringList{QString::fromStdString((root / "folder").string())});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY2(r.out.startsWith(QStringLiteral("duplicate copy.pptx (same content as ")), qPrintable(r.out));
        QCOMPARE(r.out.count(QLatin1Char('\n')), 1);
        // The folder says what it left out, and why (on stderr).
        QVERIFY2(r.err.contains(QStringLiteral("skipped folder/notes.xyz: not a format Sightline reads (.xyz)")),
                 qPrintable(r.err));

        r = run_cli({QStringLiteral("library"), QStringLiteral("list"), QStringLiteral("--library"), lib_dir});
        QCOMPARE(r.exit_code, 0);
        QCOMPARE(r.out.count(QStringLiteral(" ready ")), 3);
        QCOMPARE(r.out.count(QStringLiteral(" failed ")), 1);
        QVERIFY(r.out.contains(QStringLiteral("4 documents in ")));
        r = run_cli({QStringLiteral("library"), QStringLiteral("remove"), QString::fromStdString(deck.string()),
                     QStringLiteral("--library"), lib_dir});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        r = run_cli({QStringLiteral("library"), QStringLiteral("check"), QStringLiteral("--library"), lib_dir});
        QVERIFY2(r.exit_code == 0 && r.out.contains(QStringLiteral("schema version 2, ok")), qPrintable(r.out + r.err));
        Library lib = Library::open(lib_dir.toStdString());
        QCOMPARE(lib.list_documents().size(), size_t{3});

        // A corrupt library is named in the error.
        const fs::path bad = root / "badlib";
        fs::create_directories(bad);
        std::ofstream(bad / "library.sqlite") << std::string(8192, 'x');
        r = run_cli({QStringLiteral("library"), QStringLiteral("list"), QStringLiteral("--library"),
                     QString::fromStdString(bad.string())});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains(QString::fromStdString((bad / "library.sqlite").string())), qPrintable(r.err));
    }

    // Ctrl-C (SIGINT) while a big PDF is being read: that file is cancelled, not recorded as failed;
    // what was added before stays; exit status 130.
    void cli_ctrl_c_cancels() {
        REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
        REQUIRE_ASSET(refman, "samples/pdf/refman.pdf");
        QTemporaryDir tmp;
        const QString lib_dir = tmp.path() + QStringLiteral("/lib");
        QProcess p;
        p.start(QStringLiteral(SIGHTLINE_CLI_PATH),
                {QStringLiteral("add"), QStringLiteral("--library"), lib_dir, QStringLiteral("--no-ocr"),
                 QString::fromStdString(deck.string()), QString::fromStdString(refman.string())});
        QVERIFY(p.waitForStarted(30000));
        QByteArray out;
        QElapsedTimer t;
        t.start();
        while (!out.contains("added pandoc-reference.pptx") && t.elapsed() < 120000) {
            if (!p.waitForReadyRead(1000) && p.state() == QProcess::NotRunning) break;
            out += p.readAllStandardOutput();
        }
        QVERIFY2(out.contains("added pandoc-reference.pptx"), out.constData());
        QCOMPARE(::kill(static_cast<pid_t>(p.processId()), SIGINT), 0);
        QVERIFY(p.waitForFinished(120000));
        out += p.readAllStandardOutput();
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        QVERIFY2(out.endsWith("cancelled refman.pdf\n"), out.constData());
        Library lib = Library::open(lib_dir.toStdString());
        QCOMPARE(lib.list_documents(true).size(), size_t{1});
        QCOMPARE(lib.list_documents()[0].state, DocumentState::Ready);
    }

    // `sightline-cli add` on real samples, killed with SIGKILL (a) at a random moment after it has
    // committed at least one document, (b) as soon as a second connection sees a document with
    // units written but not finished (one unit per transaction, so that the kill lands mid-document).
    // Then: everything it reported as added is there, complete and equal to a fresh read; no
    // incomplete document is visible as ready; integrity and foreign keys check out; a second run
    // finishes the rest without re-reading what was committed.
    void kill9_during_add_data() {
        QTest::addColumn<bool>("mid_document");
        QTest::newRow("random moment after the first commit") << false;
        QTest::newRow("in the middle of a document's units") << true;
    }
    void kill9_during_add() {
        QFETCH(bool, mid_document);
        REQUIRE_ASSET(hello, "samples/pdf/helloworld.pdf");
        REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
        REQUIRE_ASSET(intro, "samples/pdf/R-intro.pdf");
        REQUIRE_ASSET(video, "samples/video/vtest.avi");
        QTemporaryDir tmp;
        QString lib_dir = tmp.path() + QStringLiteral("/lib");
        auto args_for = [&](const QString& dir) {
            return QStringList{QStringLiteral("add"), QStringLiteral("--library"), dir, QStringLiteral("--no-ocr"),
                               QStringLiteral("--no-transcribe"), QStringLiteral("--batch"),
                               mid_document ? QStringLiteral("1") : QStringLiteral("4"),
                               QString::fromStdString(hello.string()), QString::fromStdString(deck.string()),
                               QString::fromStdString(intro.string()), QString::fromStdString(video.string())};
        };
        QStringList args = args_for(lib_dir);
        QProcess p;
        p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
        QVERIFY(p.waitForStarted(30000));
        QByteArray out;
        QElapsedTimer t;
        t.start();
        int delay_ms = 0;
        int64_t units_at_kill = -1;
        if (!mid_document) {
            while (!out.contains("added ") && t.elapsed() < 300000) {
                if (!p.waitForReadyRead(1000) && p.state() == QProcess::NotRunning) break;
                out += p.readAllStandardOutput();
            }
            QVERIFY2(out.contains("added "), out.constData());
            delay_ms = static_cast<int>(test::rng()() % 2500);
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        } else {
            for (int attempt = 1;; ++attempt) {
                // Poll through our own connection: R-intro.pdf (113 units, one commit each with --batch 1)
                // in state ingesting with some units. A 3- or 4-unit document could be finished between
                // the poll and the kill on a loaded machine (seen once under load), R-intro.pdf not.
                // Our connection opens once the CLI has committed pandoc-reference.pptx, the file before
                // R-intro.pdf: opening it while the CLI was still creating the library raced with the
                // CLI's own setup (seen once in a clean-clone CI run: the CLI ended before R-intro.pdf).
                while (!out.contains("added pandoc-reference.pptx") && t.elapsed() < 300000) {
                    if (!p.waitForReadyRead(1000) && p.state() == QProcess::NotRunning) break;
                    out += p.readAllStandardOutput();
                }
                QVERIFY2(out.contains("added pandoc-reference.pptx"),
                         (out + p.readAllStandardError()).constData());
                Library watch = Library::open(lib_dir.toStdString());
                // (waitForFinished also lets QProcess notice the child's exit.)
                while (t.elapsed() < 300000) {
                    units_at_kill = test::count(
                        watch, "SELECT count(*) FROM units u JOIN documents d ON u.document = d.id "
                               "WHERE d.state = 'ingesting' AND d.path LIKE '%R-intro.pdf'");
                    if (units_at_kill > 0 || p.waitForFinished(2)) break;
                }
                if (units_at_kill > 0 || attempt == 3) break;
                // The CLI ended before a poll saw R-intro.pdf mid-write (seen once, in a clean-clone
                // CI run under load): again, in a fresh library, at most 3 times.
                qInfo("attempt %d: the CLI ended before R-intro.pdf was seen mid-write; it said:\n%s", attempt,
                      (out + p.readAllStandardOutput() + p.readAllStandardError()).constData());
                p.waitForFinished(30000);
                lib_dir = tmp.path() + QStringLiteral("/lib") + QString::number(attempt + 1);
                args = args_for(lib_dir);
                out.clear();
                p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
                QVERIFY(p.waitForStarted(30000));
            }
            QVERIFY2(units_at_kill > 0, (QByteArray("never saw R-intro.pdf mid-write; the CLI said:\n") + out +
                                         p.readAllStandardOutput() + p.readAllStandardError())
                                            .constData());
        }
        const bool finished_first = p.waitForFinished(0);
        p.kill();  // SIGKILL
        p.waitForFinished(30000);
        out += p.readAllStandardOutput();
        const QStringList reported = QString::fromUtf8(out).split(QLatin1Char('\n'), Qt::SkipEmptyParts);

        Library lib = Library::open(lib_dir.toStdString());
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
        QCOMPARE(test::count(lib, "SELECT count(*) FROM pragma_foreign_key_check"), int64_t{0});
        const auto all = lib.list_documents(true);
        int ingesting = 0;
        int64_t ingesting_units = 0;
        for (const auto& d : all) {
            if (d.state == DocumentState::Ingesting) {
                ++ingesting;
                ingesting_units = test::count(lib, ("SELECT count(*) FROM units WHERE document = " + std::to_string(d.id)).c_str());
                QVERIFY(!lib.find_by_path(d.path));  // the half document is not visible as ready
            }
        }
        QVERIFY(ingesting <= 1);
        if (mid_document) QCOMPARE(ingesting, 1);
        qInfo("killed %s%s: %zu ready, %d ingesting (%lld units written)",
              mid_document ? "mid-document" : qPrintable(QStringLiteral("%1 ms after the first commit").arg(delay_ms)),
              finished_first ? " (already finished)" : "", lib.list_documents().size(), ingesting,
              static_cast<long long>(ingesting_units));
        // Every reported file is ready and equals a fresh read; nothing else is visible as ready.
        std::map<std::string, DocId> ready;
        for (const auto& d : lib.list_documents()) {
            QCOMPARE(d.state, DocumentState::Ready);
            ready[fs::path(d.path).filename().string()] = d.id;
        }
        for (const QString& line : reported) {
            QVERIFY2(line.startsWith(QStringLiteral("added ")), qPrintable(line));
            const std::string name = line.mid(6, line.indexOf(QLatin1Char(':')) - 6).toStdString();
            QVERIFY2(ready.count(name), name.c_str());
        }
        for (const auto& [name, id] : ready) {
            const auto info = lib.info(id);
            const doc::Document stored = lib.load_document(id);
            QCOMPARE(static_cast<int>(stored.units.size()), info->unit_count);
            QVERIFY2(test::same_document(stored, read_fast(info->path)), name.c_str());
        }
        // The abandoned row goes on the next add; committed documents are not re-read.
        const Cli rest = run_cli(args);
        QVERIFY2(rest.exit_code == 0, qPrintable(rest.err));
        for (const auto& [name, id] : ready) {
            QVERIFY2(rest.out.contains(QStringLiteral("unchanged ") + QString::fromStdString(name)), qPrintable(rest.out));
            QVERIFY(lib.info(id));
        }
        QCOMPARE(rest.out.count(QStringLiteral("added ")), 4 - static_cast<int>(ready.size()));
        QCOMPARE(lib.list_documents().size(), size_t{4});
        QCOMPARE(lib.list_documents(true).size(), size_t{4});
        QCOMPARE(QString::fromStdString(lib.integrity_check()), QStringLiteral("ok"));
    }
};

QTEST_GUILESS_MAIN(TestLibraryIngest)
#include "tst_library_ingest.moc"
