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
    Citation cite_;
};

void TstDesktopExport::initTestCase() {
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    const QString path = QString::fromStdString(pdf.string());
    window_ = sl::test::make_window(dir_);
    window_->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), path), ItemState::Ready, 300000);
    const auto d = sl::test::document_of(window_->library(), path);
    QVERIFY(d);
    auto ranked = rank_sources("fit a linear regression model lm coefficients", {d}, 2);
    QCOMPARE(ranked.size(), size_t{2});
    Answer a;
    a.question = "How do I fit a linear regression?";
    a.text = "Use lm() to fit the model [1]; summary() shows the coefficients [2].";
    a.citations = ranked;
    verify_citations(a.text, a.citations);
    a.method = "scripted for the export test";
    a.model = "none";
    window_->chat()->addAnswer(a);
    cite_ = ranked[0];
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
            break;
        case ReportFormat::Html:
            QVERIFY(bytes.startsWith("<!DOCTYPE html>"));
            QVERIFY(bytes.contains(locator));
            QVERIFY(bytes.contains("data:image/png;base64,"));  // the cited page, embedded
            QVERIFY(bytes.contains("href='#c0-1'"));
            QVERIFY(!bytes.contains("cite:"));
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
