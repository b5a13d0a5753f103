// DOCX, Markdown, HTML and EPUB end to end through the CLI: `sightline-cli add FOLDER` reads them
// (one line per file, the sections counted) and says on stderr what it skipped and why; `ask`
// with the default model cites the DOCX by section ("survey.docx §2 Results").
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "core/util/assets.h"
#include "tests/common/test_support.h"
#include "tests/ingest/docx/docx_fixture.h"
#include "tests/ingest/text/epub_fixture.h"

class TstCliTextFormats : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void addFolderThenAskCitesSection();
};

namespace {

struct Run {
    int exit_code = -1;
    QString out, err;
};

Run cli(const QStringList& args) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(600000)) return {};
    return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

bool write(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

}  // namespace

void TstCliTextFormats::addFolderThenAskCitesSection() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    using namespace sl::test::docx;
    QTemporaryDir dir;
    const QString docs = dir.filePath(QStringLiteral("docs"));
    QVERIFY(QDir().mkpath(docs));
    QVERIFY(write(docs + QStringLiteral("/survey.docx"),
                  make_docx(para("Lighthouse survey", "Titel") + para("This report describes the old lighthouse.") +
                            para("Results", "berschrift1") +
                            para("The lighthouse keeper counted 317 gulls on the north rock in May.") +
                            para("Costs", "berschrift1") + para("The repairs cost 4,200 euros."))));
    QVERIFY(write(docs + QStringLiteral("/notes.md"), "# Notes\n\nThe boat leaves at nine.\n"));
    QVERIFY(write(docs + QStringLiteral("/page.html"), "<h1>Visitors</h1><p>Open on Sundays.</p>"));
    QVERIFY(write(docs + QStringLiteral("/book.epub"),
                  sl::test::epub::make_epub("Log", {{"a.xhtml", sl::test::epub::xhtml("A", "<h1>Day one</h1><p>Fog.</p>")}},
                                            {0})));
    QVERIFY(write(docs + QStringLiteral("/photo.xyz"), "?"));
    const QString lib = dir.filePath(QStringLiteral("library"));

    Run r = cli({QStringLiteral("add"), docs, QStringLiteral("--library"), lib});
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + r.err));
    for (const char* want : {"added book.epub: 1 section", "added notes.md: 1 section", "added page.html: 1 section",
                             "added survey.docx: 3 sections"})
        QVERIFY2(r.out.contains(QLatin1String(want)), qPrintable(r.out));
    QVERIFY2(r.err.contains(QStringLiteral("skipped docs/photo.xyz: not a format Sightline reads (.xyz)")),
             qPrintable(r.err));

    r = cli({QStringLiteral("ask"), QStringLiteral("How many gulls did the lighthouse keeper count?"),
             QStringLiteral("--library"), lib, QStringLiteral("--ctx"), QStringLiteral("2048"), QStringLiteral("--effort"),
             QStringLiteral("low")});
    qInfo("%s", qPrintable(r.out));
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + r.err));
    const qsizetype sources = r.out.indexOf(QStringLiteral("Sources:\n["));
    QVERIFY2(sources >= 0, qPrintable(r.out));
    QVERIFY2(r.out.indexOf(QStringLiteral("survey.docx §2 Results"), sources) > 0, qPrintable(r.out));
}

QTEST_GUILESS_MAIN(TstCliTextFormats)
#include "tst_cli_text_formats.moc"
