// `sightline-cli --version` names every library the product links and the CUDA state; the command
// line behaves as command lines do (--help everywhere, options before the command, `--`).
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "kernels/cuda/cuda_device.h"
#include "sightline/build_config.h"

class TstCliVersion : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void versionListsLibraries();
    void unknownCommandFails();
    void helpOnEveryCommand();
    void optionsBeforeTheCommand();
    void doubleDashEndsOptions();
    void controlCharactersEscaped();
    void notAFileNamed();
    void byteFileNames();
};

namespace {

QByteArray run(const QStringList& args, int* status) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(60000)) return {};
    *status = p.exitCode();
    return p.readAllStandardOutput() + p.readAllStandardError();
}

}  // namespace

void TstCliVersion::versionListsLibraries() {
    int status = -1;
    const QByteArray out = run({QStringLiteral("--version")}, &status);
    QCOMPARE(status, 0);
    QVERIFY2(out.startsWith("Sightline " SIGHTLINE_VERSION), out.constData());
    for (const char* lib : {"Qt ", "Poppler ", "libavformat ", "libavcodec ", "libzip ", "Tesseract ", "SQLite ", "CPU ", "CUDA "}) {
        QVERIFY2(out.contains(QByteArray("\n  ") + lib), qPrintable(QStringLiteral("missing %1 in:\n%2").arg(QLatin1String(lib), QString::fromUtf8(out))));
    }
    // Every library line carries a version number.
    for (const QByteArray& line : out.split('\n')) {
        if (!line.startsWith("  ") || line.startsWith("  CPU") || line.startsWith("  CUDA")) continue;
        QVERIFY2(line.contains('.'), line.constData());
    }
    if (sl::cuda::compiled_with_cuda()) {
        QVERIFY(out.contains("CUDA          compiled in"));
        QVERIFY(out.contains(sl::cuda::probe().usable ? "device usable" : "device not usable"));
    } else {
        QVERIFY(out.contains("built without CUDA"));
    }
}

void TstCliVersion::unknownCommandFails() {
    int status = -1;
    const QByteArray out = run({QStringLiteral("no-such-command")}, &status);
    QCOMPARE(status, 2);
    QVERIFY(out.contains("unknown command 'no-such-command'"));
}

// `COMMAND --help`, `COMMAND -h` and `help COMMAND` print the command's usage on stdout and exit 0,
// for every command the overview lists, without doing the command's work.
void TstCliVersion::helpOnEveryCommand() {
    int status = -1;
    const QByteArray overview = run({QStringLiteral("--help")}, &status);
    QCOMPARE(status, 0);
    QStringList names;
    bool in_list = false;
    for (const QByteArray& line : overview.split('\n')) {
        if (line.startsWith("commands:")) in_list = true;
        else if (in_list && line.startsWith("  ")) names << QString::fromUtf8(line.trimmed().split(' ').front());
    }
    QVERIFY2(names.size() >= 10, overview.constData());
    for (const QString& name : names) {
        for (const QStringList& args : {QStringList{name, QStringLiteral("--help")}, QStringList{name, QStringLiteral("-h")},
                                        QStringList{QStringLiteral("help"), name}}) {
            QProcess p;
            p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
            QVERIFY(p.waitForFinished(60000));
            const QByteArray out = p.readAllStandardOutput();
            QVERIFY2(p.exitCode() == 0, qPrintable(args.join(QLatin1Char(' '))));
            QVERIFY2(out.startsWith("usage: sightline-cli " + name.toUtf8()), qPrintable(args.join(QLatin1Char(' ')) + QLatin1String(": ") + QString::fromUtf8(out)));
        }
    }
    run({QStringLiteral("help"), QStringLiteral("no-such-command")}, &status);
    QCOMPARE(status, 2);
}

// `sightline-cli --library DIR library path` is `sightline-cli library path --library DIR`.
void TstCliVersion::optionsBeforeTheCommand() {
    int status = -1;
    const QByteArray out = run({QStringLiteral("--library"), QStringLiteral("/tmp/sightline-some-library"), QStringLiteral("library"),
                                QStringLiteral("path")}, &status);
    QCOMPARE(status, 0);
    QCOMPARE(out.trimmed(), QByteArray("/tmp/sightline-some-library"));
}

// After `--`, an argument that starts with a dash is a file, not an option.
void TstCliVersion::doubleDashEndsOptions() {
    int status = -1;
    QByteArray out = run({QStringLiteral("ingest"), QStringLiteral("--"), QStringLiteral("--no-such-file.pdf")}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(out.contains("--no-such-file.pdf") && !out.contains("unknown option"), out.constData());
    out = run({QStringLiteral("ingest"), QStringLiteral("--no-such-file.pdf")}, &status);
    QCOMPARE(status, 2);
    QVERIFY2(out.contains("unknown option"), out.constData());
}

// A file name with an escape sequence reaches the terminal as text, not as a command.
void TstCliVersion::controlCharactersEscaped() {
    int status = -1;
    const QByteArray out = run({QStringLiteral("ingest"), QString::fromUtf8("\x1b[2Jgone\xc2\x9b" "31m.pdf")}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(!out.contains('\x1b') && !out.contains("\xc2\x9b"), out.toHex().constData());
    QVERIFY2(out.contains("\\x1b[2Jgone\\x9b31m.pdf"), out.constData());
}

// A folder or a device given to ingest is named as what it is, not as missing.
void TstCliVersion::notAFileNamed() {
    int status = -1;
    QByteArray out = run({QStringLiteral("ingest"), QStringLiteral("/dev/null")}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(out.contains("/dev/null: a device, not a file"), out.constData());
    out = run({QStringLiteral("ingest"), QStringLiteral("/tmp")}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(out.contains("/tmp: a folder, not a file"), out.constData());
}

// File names that are not UTF-8 (Latin-1 "r\xe9sum\xe9") are read, and printed escaped. QProcess
// cannot pass such bytes, so a shell makes the names and runs the CLI.
void TstCliVersion::byteFileNames() {
    QTemporaryDir dir;
    // A 4x4 24-bit BMP (54-byte header, rows of 12 bytes).
    auto le = [](uint32_t v, int n) {
        QByteArray b(n, '\0');
        for (int i = 0; i < n; ++i) b[i] = static_cast<char>(v >> (8 * i));
        return b;
    };
    const QByteArray bmp = "BM" + le(54 + 48, 4) + le(0, 4) + le(54, 4) + le(40, 4) + le(4, 4) + le(4, 4) +
                           le(1, 2) + le(24, 2) + le(0, 4) + le(48, 4) + le(2835, 4) + le(2835, 4) +
                           le(0, 4) + le(0, 4) + QByteArray(48, '\x60');
    QFile b(dir.filePath(QStringLiteral("plain.png")));
    QVERIFY(b.open(QIODevice::WriteOnly) && b.write(bmp) == bmp.size());
    b.close();
    const QByteArray pdf =
        "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        "2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
        "3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 100]/Contents 4 0 R"
        "/Resources<</Font<</F1 5 0 R>>>>>>endobj\n"
        "4 0 obj<</Length 44>>stream\nBT /F1 12 Tf 20 50 Td (Bonjour le monde) Tj ET\nendstream endobj\n"
        "5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj\n"
        "trailer<</Root 1 0 R>>\n%%EOF\n";
    QFile f(dir.filePath(QStringLiteral("plain.pdf")));
    QVERIFY(f.open(QIODevice::WriteOnly) && f.write(pdf) == pdf.size());
    f.close();
    const QString script = QStringLiteral(
        "cd \"$1\" && img=$(printf 'r\\351sum\\351.bmp') && doc=$(printf 'r\\351sum\\351.pdf') && "
        "mv plain.png \"$img\" && mv plain.pdf \"$doc\" && { \"$2\" ingest --no-ocr \"$img\" \"$doc\"; s=$?; "
        "rm -f \"$img\" \"$doc\"; exit $s; }");  // Qt could not remove such names
    QProcess p;
    p.start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), script, QStringLiteral("sh"), dir.path(),
                                         QStringLiteral(SIGHTLINE_CLI_PATH)});
    QVERIFY(p.waitForFinished(60000));
    const QByteArray out = p.readAllStandardOutput() + p.readAllStandardError();
    QVERIFY2(p.exitCode() == 0, out.constData());
    QVERIFY2(out.contains("r\\xe9sum\\xe9.bmp: image, 1 image"), out.constData());
    QVERIFY2(out.contains("r\\xe9sum\\xe9.pdf: pdf, 1 page"), out.constData());
    QVERIFY2(!out.contains("\xe9"), out.toHex().constData());  // no raw byte reaches the terminal
    qInfo("%s", out.constData());
}

QTEST_GUILESS_MAIN(TstCliVersion)
#include "tst_cli_version.moc"
