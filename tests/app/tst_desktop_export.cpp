// File → Export writes the chat as a report in each format, every citation with its locator:
// Markdown, self-contained HTML (the cited page embedded as an image) and PDF; an unwritable
// path gives a readable error naming it.
#include <QFile>
#include <QSignalSpy>
#include <QTest>

#include "app/desktop/chat_pane.h"
#include "app/desktop/report_export.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopExport : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase() { window_.reset(); }
    void writesReport_data();
    void writesReport();
    void unwritablePathIsAnError();

private:
    QTemporaryDir dir_;
    std::unique_ptr<MainWindow> window_;
    sl::Citation cite_;
};

void TstDesktopExport::initTestCase() {
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    const QString path = QString::fromStdString(pdf.string());
    window_ = sl::test::make_window(dir_);
    window_->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), path), ItemState::Ready, 300000);
    const auto d = sl::test::document_of(window_->library(), path);
    QVERIFY(d);
    // A core answer citing two places of R-intro.pdf with their regions; the second sentence's
    // support is weak, and a third citation was read but backs no sentence.
    sl::desktop::ChatAnswer a;
    a.answer.question = "How do I fit a linear regression?";
    sl::test::add_sentence(a.answer, "Use lm() to fit the model.", {sl::test::support(0, 0.5, false, 0.66)});
    sl::test::add_sentence(a.answer, "summary() shows the coefficients.", {sl::test::support(1, 0.1, true)});
    a.answer.citations = {sl::test::block_citation(*d, "fitted.model <- lm(", 1, 1), sl::test::block_citation(*d, "coef(", 2, 1),
                          sl::test::block_citation(*d, "anova(", 3, 1)};
    for (const auto& c : a.answer.citations) QVERIFY2(c.number > 0, "no block with the words in R-intro.pdf");
    a.method = "scripted for the export test";
    a.model = "none";
    a.read_summary = "3 units ranked best for the question";
    window_->chat()->addAnswer(a);
    cite_ = a.answer.citations[0];
}

void TstDesktopExport::writesReport_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("markdown") << QStringLiteral("report.md");
    QTest::newRow("html") << QStringLiteral("report.html");
    QTest::newRow("pdf") << QStringLiteral("report.pdf");
}

void TstDesktopExport::writesReport() {
    QFETCH(QString, name);
    const QString path = dir_.filePath(name);
    QSignalSpy written(window_.get(), &MainWindow::reportWritten);
    window_->exportReport(path);
    QTRY_COMPARE_WITH_TIMEOUT(written.size(), 1, 60000);
    QCOMPARE(written[0][0].toString(), path);
    QVERIFY2(written[0][1].toString().isEmpty(), qPrintable(written[0][1].toString()));
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    qInfo("%s: %lld bytes", qPrintable(name), static_cast<long long>(bytes.size()));
    const QByteArray locator = QByteArray::fromStdString(cite_.locator);
    switch (report_format_for(path)) {
        case ReportFormat::Markdown:
            QVERIFY(bytes.startsWith("# Sightline report"));
            QVERIFY(bytes.contains("## How do I fit a linear regression?"));
            QVERIFY(bytes.contains("1. **" + locator + "**"));
            QVERIFY(bytes.contains("(region "));
            QVERIFY(bytes.contains("Use lm() to fit the model [1]. summary() shows the coefficients [2?]."));
            QVERIFY(bytes.contains("   - backs \xe2\x80\x9cUse lm() to fit the model.\xe2\x80\x9d \xe2\x80\x94 word overlap 50%, meaning 0.66\n"));
            QVERIFY(bytes.contains("\xe2\x9a\xa0 weak: its text backs the sentence poorly (word overlap 10%)"));
            QVERIFY(bytes.contains("_read, not cited by any sentence_"));
            QVERIFY(bytes.contains("_Read: 3 units ranked best for the question._"));
            break;
        case ReportFormat::Html:
            QVERIFY(bytes.startsWith("<!DOCTYPE html>"));
            QVERIFY(bytes.contains(locator));
            QVERIFY(bytes.contains("data:image/png;base64,"));  // the cited page, embedded
            QVERIFY(bytes.contains("href='#c0-1'"));
            QVERIFY(bytes.contains("href='#c0-3'"));
            QVERIFY(!bytes.contains("cite:"));
            QVERIFY(bytes.contains("read, not cited by any sentence"));
            break;
        case ReportFormat::Pdf: {
            QVERIFY(bytes.startsWith("%PDF-"));
            QVERIFY(bytes.size() > 5000);
            QVERIFY(bytes.trimmed().endsWith("%%EOF"));
            break;
        }
    }
}

void TstDesktopExport::unwritablePathIsAnError() {
    const QString path = dir_.filePath(QStringLiteral("no/such/folder/report.md"));
    QSignalSpy written(window_.get(), &MainWindow::reportWritten);
    window_->exportReport(path);
    QTRY_COMPARE_WITH_TIMEOUT(written.size(), 1, 30000);
    const QString error = written[0][1].toString();
    qInfo("error shown: %s", qPrintable(error));
    QVERIFY(error.contains(path));
}

QTEST_MAIN(TstDesktopExport)
#include "tst_desktop_export.moc"
