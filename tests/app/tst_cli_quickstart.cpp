// The README's main job end to end: `sightline-cli quickstart` reads the three sample files, answers
// with the default model, names the pages it read and writes a report.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "core/util/assets.h"
#include "tests/common/test_support.h"

class TstCliQuickstart : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void answersWithSourcesAndReport();
};

void TstCliQuickstart::answersWithSourcesAndReport() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    QTemporaryDir dir;
    const QString report = dir.filePath(QStringLiteral("report.md"));
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH),
            {QStringLiteral("quickstart"), QStringLiteral("--question"),
             QStringLiteral("How do I fit a linear regression model and look at its coefficients?"),
             QStringLiteral("--report"), report});
    QVERIFY(p.waitForFinished(600000));
    const QByteArray out = p.readAllStandardOutput();
    const QByteArray err = p.readAllStandardError();
    QVERIFY2(p.exitCode() == 0, (out + err).constData());
    for (const char* want : {"R-intro.pdf ", "pandoc-reference.pptx ", "vtest.avi ", "Answer: ", "[1] R-intro.pdf p. "})
        QVERIFY2(out.contains(want), qPrintable(QStringLiteral("missing '%1' in:\n%2").arg(QLatin1String(want), QString::fromUtf8(out))));
    // The pages about statistical models (chapter 11 of R-intro) rank first for this question.
    QVERIFY2(out.contains("Chapter 11: Statistical models in R"), out.constData());
    QFile f(report);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray md = f.readAll();
    QVERIFY(md.startsWith("# Sightline report"));
    QVERIFY(md.contains("## Sources read"));
    QVERIFY(md.contains("R-intro.pdf p. "));
}

QTEST_GUILESS_MAIN(TstCliQuickstart)
#include "tst_cli_quickstart.moc"
