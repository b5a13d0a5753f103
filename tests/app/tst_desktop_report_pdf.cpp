// File → Export as PDF lays the report out as the HTML report reads: a short chat with cited
// slides takes a few pages, none left nearly empty, and the cited pictures are drawn large and
// centred with their captions below.
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include "app/desktop/report_export.h"
#include "ingest/pdf/pdf_render.h"
#include "tests/app/tst_desktop_support.h"

using namespace sl::desktop;

namespace {

std::shared_ptr<const sl::doc::Document> deck(int n) {
    auto d = std::make_shared<sl::doc::Document>();
    d->id = "deck" + std::to_string(n);
    d->path = "/nonexistent/deck" + std::to_string(n) + ".pptx";
    d->kind = sl::doc::DocumentKind::Slides;
    for (int i = 0; i < 3; ++i) {
        sl::doc::Unit u;
        u.kind = sl::doc::UnitKind::Slide;
        u.index = i;
        u.width = 720;
        u.height = 405;
        sl::doc::Block title;
        title.role = sl::doc::BlockRole::Title;
        title.text = "Quarterly results " + std::to_string(i + 1);
        title.bbox = sl::doc::BBox{0.05f, 0.05f, 0.95f, 0.2f};
        sl::doc::Block body;
        body.text = "Revenue grew in every region; the coefficients of the model are stable.";
        body.bbox = sl::doc::BBox{0.05f, 0.3f, 0.95f, 0.8f};
        u.blocks = {title, body};
        d->units.push_back(std::move(u));
    }
    return d;
}

}  // namespace

class TstDesktopReportPdf : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void shortReportFewFullPages();
};

void TstDesktopReportPdf::shortReportFewFullPages() {
    QTemporaryDir dir;
    ReportInput in;
    for (int k = 0; k < 2; ++k) {
        const auto d = deck(k);
        in.documents.push_back(d);
        ChatAnswer a;
        a.answer.question = "How did the quarter go?";
        for (int i = 0; i < 3; ++i) {
            sl::Citation c;
            c.number = i + 1;
            c.kind = d->kind;
            c.path = d->path;
            c.locator = "deck" + std::to_string(k) + ".pptx slide " + std::to_string(i + 1);
            c.ref = sl::doc::SourceRef{d->id, i, sl::doc::BBox{0.05f, 0.3f, 0.95f, 0.8f}, std::nullopt};
            c.snippet = "Revenue grew in every region";
            a.answer.citations.push_back(c);
            sl::test::add_sentence(a.answer, "Revenue grew in every region, and the coefficients are stable.",
                                   {sl::test::support(i, 0.6)});
        }
        a.finished = true;
        in.answers.push_back(a);
    }
    const QString path = dir.filePath(QStringLiteral("report.pdf"));
    write_report(path, ReportFormat::Pdf, in);
    if (const QString shots = qEnvironmentVariable("SIGHTLINE_SCREENSHOT_DIR"); !shots.isEmpty())
        QFile::copy(path, shots + QStringLiteral("/report.pdf"));
    sl::ingest::PdfPageRenderer pdf(path.toStdString());
    const int pages = pdf.page_count();
    qInfo("%d pages", pages);
    QVERIFY2(pages >= 1 && pages <= 4, qPrintable(QStringLiteral("%1 pages for two short answers").arg(pages)));
    for (int p = 0; p < pages; ++p) {
        const QImage img = pdf.render(p, 40);
        QVERIFY(!img.isNull());
        // Ink (the slides' pale colours too) on at least 1% of the page, and in its lower half unless it is the last page.
        qint64 ink = 0, low = 0;
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x)
                if (qGray(img.pixel(x, y)) < 230) ++ink, low += y > img.height() / 2;
        const double share = double(ink) / (double(img.width()) * img.height());
        qInfo("page %d: %.1f%% ink, %lld px in the lower half", p + 1, share * 100, static_cast<long long>(low));
        if (p + 1 < pages) {  // the last page holds what is left
            QVERIFY2(share > 0.01, qPrintable(QStringLiteral("page %1 is nearly empty").arg(p + 1)));
            QVERIFY2(low > 0, qPrintable(QStringLiteral("page %1 ends half empty").arg(p + 1)));
        }
    }
    // The cited slides are drawn large, not as a thumbnail in a corner.
    const QImage first = pdf.render(0, 40);
    // The cited region is outlined in pale yellow on the picture: measure that box.
    int widest = 0, centre = 0;
    for (int y = 0; y < first.height(); ++y) {
        int left = -1, right = -1;
        for (int x = 0; x < first.width(); ++x) {
            const QRgb c = first.pixel(x, y);
            if (qRed(c) > 220 && qGreen(c) > 190 && qBlue(c) < 200) right = x, left = left < 0 ? x : left;
        }
        if (left >= 0 && right - left > widest) widest = right - left, centre = (left + right) / 2;
    }
    qInfo("widest cited region: %d of %d px, centred at %d", widest, first.width(), centre);
    QVERIFY2(widest > first.width() / 3, "the cited pictures are small");
    // ... and centred on the page, as the HTML report's figures read (not in the top left corner).
    QVERIFY2(std::abs(centre - first.width() / 2) < first.width() / 20, "the cited pictures are not centred");
}

QTEST_MAIN(TstDesktopReportPdf)
#include "tst_desktop_report_pdf.moc"
