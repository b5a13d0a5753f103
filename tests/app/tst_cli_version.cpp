// `sightline-cli --version` names every library the product links and the CUDA state; the command
// line behaves as command lines do (--help everywhere, options before the command, `--`).
#include <QProcess>
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

QTEST_GUILESS_MAIN(TstCliVersion)
#include "tst_cli_version.moc"
