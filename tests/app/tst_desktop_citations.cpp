// Citations in the chat open the viewer at the spot: a streamed core answer (sl::Answer) citing a
// page of R-intro.pdf (with a region) and a second of vtest.avi; clicking the chips (real mouse
// clicks) and the transcript's links opens the PDF page with the region highlighted and the video
// at the cited time with a marker on its timeline; a weak support is flagged ("[2?]", the source
// says why); Copy puts the answer with its markers and sources on the clipboard; the effort chosen
// in the status bar reaches the service.
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QLineEdit>
#include <QStatusBar>
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>
#include <QToolButton>

#include "app/desktop/chat_pane.h"
#include "app/desktop/highlight_canvas.h"
#include "app/desktop/pdf_view.h"
#include "app/desktop/viewer_pane.h"
#include "core/document/locator.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopCitations : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase() { window_.reset(); }
    void streamsAnswerWithChips();
    void clickingPdfCitationOpensHighlightedPage();
    void clickingVideoCitationSeeksToTime();
    void transcriptLinkOpensCitation();
    void copyIncludesCitations();
    void effortReachesService();
    void idleSlicesRunBetweenAnswers();

private:
    QTemporaryDir dir_;
    std::unique_ptr<MainWindow> window_;
    QString pdf_, video_;
    sl::Citation page_cite_, video_cite_;
    std::shared_ptr<sl::test::ScriptedAnswerService> service_;
};

void TstDesktopCitations::initTestCase() {
    sl::test::use_ffmpeg_media_backend();
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    REQUIRE_ASSET(avi, "samples/video/vtest.avi");
    pdf_ = QString::fromStdString(pdf.string());
    video_ = QString::fromStdString(avi.string());
    window_ = sl::test::make_window(dir_);
    window_->resize(1400, 900);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QVERIFY(sl::test::drop_files(window_.get(), {pdf_, video_}));
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), pdf_), ItemState::Ready, 300000);
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), video_), ItemState::Ready, 300000);
    const auto rintro = sl::test::document_of(window_->library(), pdf_);
    const auto vtest = sl::test::document_of(window_->library(), video_);
    QVERIFY(rintro && vtest);
    QVERIFY(vtest->duration > 10);

    // A page citation with its region (the block that shows lm()), as ask resolves one.
    page_cite_ = sl::test::block_citation(*rintro, "fitted.model <- lm(", 1, 1);
    QCOMPARE(page_cite_.number, 1);
    QVERIFY(page_cite_.ref.bbox.has_value());
    QVERIFY(page_cite_.ref.unit > 0);
    page_cite_.share = 0.42;
    video_cite_.number = 2;
    video_cite_.kind = sl::doc::DocumentKind::Video;
    video_cite_.ref.document = vtest->id;
    video_cite_.ref.unit = 0;
    video_cite_.ref.time = sl::doc::TimeRange{7.0, 9.0};
    video_cite_.path = vtest->path;
    video_cite_.locator = sl::doc::file_name(*vtest) + " 00:00:07";
    video_cite_.snippet = "people walking";

    sl::desktop::ChatAnswer a;
    sl::test::add_sentence(a.answer, "Use lm() to fit a linear model and summary() or coef() for its coefficients.",
                           {sl::test::support(0, 0.62, false, 0.71)});
    sl::test::add_sentence(a.answer, "The video shows people walking.", {sl::test::support(1, 0.07, true)});
    a.answer.citations = {page_cite_, video_cite_};
    a.method = "scripted";
    service_ = std::make_shared<sl::test::ScriptedAnswerService>(a);
    window_->chat()->setService(service_);
}

void TstDesktopCitations::streamsAnswerWithChips() {
    ChatPane* chat = window_->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    QSignalSpy changed(chat->transcript(), &QTextBrowser::textChanged);
    chat->questionEdit()->setText(QStringLiteral("How do I fit a linear regression?"));
    QTest::keyClick(chat->questionEdit(), Qt::Key_Return);
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 30000);
    QVERIFY2(changed.size() > 3, "the answer arrives in pieces, not at once");
    QCOMPARE(chat->answers().size(), size_t{1});
    QCOMPARE(chat->answers()[0].answer.question, std::string("How do I fit a linear regression?"));
    const QString html = chat->transcript()->toHtml();
    QVERIFY(html.contains(QStringLiteral("cite:0:1")));
    QVERIFY(html.contains(QStringLiteral("cite:0:2")));
    const QString text = chat->transcript()->toPlainText();
    qInfo("%s", qPrintable(text));
    QVERIFY(text.contains(QStringLiteral("for its coefficients [1]. The video shows people walking [2?].")));
    QVERIFY(text.contains(QStringLiteral("weak: its text backs the sentence poorly (word overlap 7%)")));
    QVERIFY(text.contains(QStringLiteral("backs \u201cUse lm() to fit")));
    QVERIFY(text.contains(QStringLiteral("word overlap 62%, meaning 0.71")));
    auto* chip1 = chat->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip1"));
    auto* chip2 = chat->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip2"));
    QVERIFY(chip1 && chip2);
    QVERIFY(chip1->isVisible());
    QVERIFY(chip1->text().contains(QStringLiteral("R-intro.pdf p. ")));
    QVERIFY(!chip1->accessibleName().contains(QStringLiteral("weak")));
    QVERIFY(chip2->accessibleName().contains(QStringLiteral("(weak)")));  // flagged, not dropped
    QVERIFY(!chip2->icon().isNull());
    QVERIFY(chip1->toolTip().contains(QStringLiteral("Backs \u201cUse lm()")));
    QVERIFY(chip2->toolTip().startsWith(QStringLiteral("Weak: its text backs the sentence poorly")));
}

void TstDesktopCitations::clickingPdfCitationOpensHighlightedPage() {
    auto* chip1 = window_->chat()->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip1"));
    QVERIFY(chip1);
    PdfView* pdf = window_->viewer()->pdfView();
    QSignalSpy shown(pdf, &PdfView::pageShown);
    QTest::mouseClick(chip1, Qt::LeftButton);
    QCOMPARE(window_->viewer()->mode(), ViewerPane::Mode::Pdf);
    QTRY_VERIFY_WITH_TIMEOUT(pdf->rendered(), 30000);
    QCOMPARE(pdf->currentPage(), page_cite_.ref.unit);
    QCOMPARE(shown.last().at(0).toInt(), page_cite_.ref.unit);
    QVERIFY(pdf->highlight().has_value());
    QCOMPARE(pdf->highlight()->y0, page_cite_.ref.bbox->y0);
    const QRect h = pdf->canvas()->highlightRect();
    QVERIFY(!h.isEmpty());
    QVERIFY(pdf->canvas()->rect().contains(h.center()));
    QVERIFY(window_->viewer()->caption().contains(QStringLiteral("R-intro.pdf p. ")));
    // The rendered page has ink inside the highlighted region (the cited text is there).
    const QImage img = pdf->canvas()->image();
    const QRect r = img.rect();
    const sl::doc::BBox& b = *page_cite_.ref.bbox;
    int dark = 0;
    for (int y = static_cast<int>(b.y0 * r.height()); y < static_cast<int>(b.y1 * r.height()); ++y)
        for (int x = static_cast<int>(b.x0 * r.width()); x < static_cast<int>(b.x1 * r.width()); ++x)
            dark += qGray(img.pixel(x, y)) < 128;
    QVERIFY2(dark > 50, "no text under the highlighted region");
}

void TstDesktopCitations::clickingVideoCitationSeeksToTime() {
    auto* chip2 = window_->chat()->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip2"));
    QVERIFY(chip2);
    VideoView* video = window_->viewer()->videoView();
    QTest::mouseClick(chip2, Qt::LeftButton);
    QCOMPARE(window_->viewer()->mode(), ViewerPane::Mode::Video);
    QTRY_VERIFY_WITH_TIMEOUT(video->shownFrameTime() >= 0, 30000);
    qInfo("frame shown at %.3f s for a citation at %.3f s", video->shownFrameTime(), video_cite_.ref.time->t0);
    QVERIFY(std::abs(video->shownFrameTime() - video_cite_.ref.time->t0) < 1.0);
    QVERIFY(!video->canvas()->image().isNull());
    QTRY_VERIFY_WITH_TIMEOUT(!video->playing(), 10000);  // paused on the cited frame
    QCOMPARE(video->timeline()->markers().size(), size_t{1});
    QCOMPARE(video->timeline()->markers()[0].seconds, 7.0);
    QVERIFY(window_->viewer()->caption().contains(QStringLiteral("00:00:07")));
}

void TstDesktopCitations::transcriptLinkOpensCitation() {
    window_->viewer()->clear();
    QSignalSpy activated(window_->chat(), &ChatPane::citationActivated);
    Q_EMIT window_->chat()->transcript()->anchorClicked(QUrl(QStringLiteral("cite:0:1")));
    QCOMPARE(activated.size(), 1);
    QCOMPARE(window_->viewer()->mode(), ViewerPane::Mode::Pdf);
    QTRY_VERIFY_WITH_TIMEOUT(window_->viewer()->pdfView()->rendered(), 30000);
    QCOMPARE(window_->viewer()->pdfView()->currentPage(), page_cite_.ref.unit);
    Q_EMIT window_->chat()->transcript()->anchorClicked(QUrl(QStringLiteral("cite:0:9")));  // no such citation
    QCOMPARE(activated.size(), 1);
}

void TstDesktopCitations::copyIncludesCitations() {
    QApplication::clipboard()->clear();
    window_->chat()->copyAnswer();
    const QString text = QApplication::clipboard()->text();
    qInfo("%s", qPrintable(text));
    QVERIFY(text.startsWith(QStringLiteral("Use lm() to fit")));
    QVERIFY(text.contains(QStringLiteral("coefficients [1]. The video shows people walking [2?].")));
    QVERIFY(text.contains(QStringLiteral("[1] ") + QString::fromStdString(page_cite_.locator) + QStringLiteral(" \u2014 \u201c")));
    QVERIFY(text.contains(QStringLiteral("[2] vtest.avi 00:00:07 (weak: its text backs")));
}

void TstDesktopCitations::effortReachesService() {
    auto* effort = window_->statusBar()->findChild<QComboBox*>();
    QVERIFY(effort);
    effort->setCurrentIndex(effort->findData(QStringLiteral("high")));
    QVERIFY(effort->itemData(effort->currentIndex(), Qt::ToolTipRole).toString().contains(QStringLiteral("top-k 32")));
    QSignalSpy finished(window_->chat(), &ChatPane::answerFinished);
    window_->chat()->ask(QStringLiteral("Again, at high effort?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 30000);
    QCOMPARE(service_->last_effort.load(), sl::Effort::High);
    effort->setCurrentIndex(effort->findData(QStringLiteral("low")));
    window_->chat()->ask(QStringLiteral("And at low effort?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 2, 30000);
    QCOMPARE(service_->last_effort.load(), sl::Effort::Low);
}

// After an answer the service's idle slices run on the answer worker until it has none (the app
// brings a GPU session's context onto the device then); a question stops them and is answered.
void TstDesktopCitations::idleSlicesRunBetweenAnswers() {
    ChatPane* chat = window_->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    service_->idle_script.calls = 0;
    service_->idle_script.slices = 5;
    chat->ask(QStringLiteral("A question, then idle time?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 30000);
    QTRY_COMPARE_WITH_TIMEOUT(service_->idle_script.calls.load(), 5, 10000);
    QTest::qWait(50);
    QCOMPARE(service_->idle_script.calls.load(), 5);  // it said there was no more
    service_->idle_script.slices = -1;  // from now on, always more
    chat->ask(QStringLiteral("Another?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 2, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(service_->idle_script.calls.load() > 20, 10000);
    chat->ask(QStringLiteral("And one more while it idles?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 3, 30000);
    QCOMPARE(chat->answers().back().answer.question, std::string("And one more while it idles?"));
    QVERIFY(chat->answers().back().error.empty());
    service_->idle_script.slices = 0;  // the idle run after it ends at its next slice
}

QTEST_MAIN(TstDesktopCitations)
#include "tst_desktop_citations.moc"
