// The README's main job end to end: `sightline-cli quickstart` adds the three sample files to a
// library, asks the default model a question in one long context with MSA attention, prints the
// answer with citations from the engine's selections, and writes the report as Markdown, HTML and
// PDF. A second run finds the files unchanged and does not prefill again (measured from its output).
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

namespace {

struct Run {
    int exit_code = -1;
    QByteArray out;
};

Run quickstart(const QTemporaryDir& dir, const QString& question) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH),
            {QStringLiteral("quickstart"), QStringLiteral("--question"), question, QStringLiteral("--library"),
             dir.filePath(QStringLiteral("library")), QStringLiteral("--report"), dir.filePath(QStringLiteral("report.md"))});
    if (!p.waitForFinished(900000)) return {};
    return {p.exitCode(), p.readAllStandardOutput() + p.readAllStandardError()};
}

QByteArray read_file(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

void TstCliQuickstart::answersWithSourcesAndReport() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    QTemporaryDir dir;
    const QString question = QStringLiteral("How do I fit a linear regression model and look at its coefficients?");
    const Run first = quickstart(dir, question);
    QVERIFY2(first.exit_code == 0, first.out.constData());
    for (const char* want : {"added R-intro.pdf: 113 pages", "added pandoc-reference.pptx: 4 slides", "added vtest.avi",
                             "Context plan:", "context tokens prefilled", "Answer with citations:", "Device: CPU: ", "Sources:\n[1] R-intro.pdf p. "})
        QVERIFY2(first.out.contains(want), qPrintable(QStringLiteral("missing '%1' in:\n%2").arg(QLatin1String(want), QString::fromUtf8(first.out))));
    QVERIFY2(first.out.contains("[1]") || first.out.contains("[1?]"), first.out.constData());

    const QByteArray md = read_file(dir.filePath(QStringLiteral("report.md")));
    QVERIFY(md.startsWith("# Sightline report"));
    QVERIFY(md.contains(question.toUtf8()));
    QVERIFY(md.contains("R-intro.pdf p. "));
    const QByteArray html = read_file(dir.filePath(QStringLiteral("report.html")));
    QVERIFY(html.contains("<html"));
    QVERIFY(html.contains("R-intro.pdf p. "));
    QVERIFY(html.contains("data:image/"));  // the cited pages, embedded
    QVERIFY(read_file(dir.filePath(QStringLiteral("report.pdf"))).startsWith("%PDF"));

    // Again, same question: nothing re-read, the saved context restored instead of prefilled.
    const Run second = quickstart(dir, question);
    QVERIFY2(second.exit_code == 0, second.out.constData());
    QVERIFY2(second.out.contains("unchanged R-intro.pdf"), second.out.constData());
    QVERIFY2(second.out.contains("context tokens restored"), second.out.constData());
    QVERIFY2(!second.out.contains("context tokens prefilled"), second.out.constData());
}

QTEST_GUILESS_MAIN(TstCliQuickstart)
#include "tst_cli_quickstart.moc"
