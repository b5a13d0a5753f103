// `sightline-cli --version` names every library the product links and the CUDA state.
#include <QProcess>
#include <QTest>

#include "kernels/cuda/cuda_device.h"
#include "sightline/build_config.h"

class TstCliVersion : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void versionListsLibraries();
    void unknownCommandFails();
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

QTEST_GUILESS_MAIN(TstCliVersion)
#include "tst_cli_version.moc"
