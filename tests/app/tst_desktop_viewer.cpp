// The viewer's caption names the place on screen and follows the user's navigation: the next
// page of a PDF (by its printed label, "p. T-2"), the next slide, a seek on a video's timeline.
// A video citation's label in the chat names the second the viewer seeks to (the cited phrase's
// start, not its segment's).
// Documents are made in memory (the PDF's file is absent: its page does not render, the caption
// does not depend on it).
#include <QLabel>
#include <QRegularExpression>
#include <QTextBrowser>
#include <QToolButton>
#include <QSpinBox>
#include <QTest>

#include "app/desktop/chat_pane.h"
#include "app/desktop/main_window.h"
#include "app/desktop/pdf_view.h"
#include "app/desktop/slide_view.h"
#include "app/desktop/video_view.h"
#include "app/desktop/viewer_pane.h"
#include "tests/app/tst_desktop_support.h"

using namespace sl::desktop;

namespace {

std::shared_ptr<const sl::doc::Document> make_doc(sl::doc::DocumentKind kind, const std::string& path,
                                                  const std::vector<std::string>& labels) {
    auto d = std::make_shared<sl::doc::Document>();
    d->id = path;
    d->path = path;
    d->kind = kind;
    for (size_t i = 0; i < labels.size(); ++i) {
        sl::doc::Unit u;
        u.index = static_cast<int>(i);
        u.label = labels[i];
        u.width = 612;
        u.height = 792;
        if (kind == sl::doc::DocumentKind::Slides) u.kind = sl::doc::UnitKind::Slide, u.width = 720, u.height = 405;
        if (kind == sl::doc::DocumentKind::Video) {
            u.kind = sl::doc::UnitKind::Segment;
            u.time = sl::doc::TimeRange{30.0 * static_cast<double>(i), 30.0 * static_cast<double>(i + 1)};
        }
        d->units.push_back(std::move(u));
    }
    if (kind == sl::doc::DocumentKind::Video) d->duration = 30.0 * static_cast<double>(labels.size());
    return d;
}

}  // namespace

class TstDesktopViewer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { sl::test::use_ffmpeg_media_backend(); }
    void captionFollowsPages();
    void captionFollowsSlides();
    void captionFollowsSeeks();
    void videoCitationLabelMatchesSeek();
    void textSectionShown();
};

void TstDesktopViewer::captionFollowsPages() {
    ViewerPane viewer;
    viewer.resize(800, 600);
    viewer.show();
    const auto pdf = make_doc(sl::doc::DocumentKind::Pdf, "/nonexistent/book.pdf", {"T-1", "T-2", "1", "2"});
    viewer.open(pdf, sl::doc::SourceRef{pdf->id, 0, std::nullopt, std::nullopt});
    QCOMPARE(viewer.caption(), QStringLiteral("book.pdf p. T-1"));
    viewer.pdfView()->nextPage();
    QCOMPARE(viewer.caption(), QStringLiteral("book.pdf p. T-2"));
    viewer.pdfView()->nextPage();
    QCOMPARE(viewer.caption(), QStringLiteral("book.pdf p. 1"));
    viewer.pdfView()->previousPage();
    QCOMPARE(viewer.caption(), QStringLiteral("book.pdf p. T-2"));
    // Typing a page number.
    auto* box = viewer.pdfView()->findChild<QSpinBox*>();
    QVERIFY(box);
    box->setValue(4);
    Q_EMIT box->editingFinished();
    QCOMPARE(viewer.pdfView()->currentPage(), 3);
    QCOMPARE(viewer.caption(), QStringLiteral("book.pdf p. 2"));
}

void TstDesktopViewer::captionFollowsSlides() {
    ViewerPane viewer;
    viewer.resize(800, 600);
    viewer.show();
    const auto deck = make_doc(sl::doc::DocumentKind::Slides, "/nonexistent/deck.pptx", {"1", "2", "3"});
    viewer.open(deck, sl::doc::SourceRef{deck->id, 0, std::nullopt, std::nullopt});
    QCOMPARE(viewer.caption(), QStringLiteral("deck.pptx slide 1"));
    viewer.slideView()->nextSlide();
    QCOMPARE(viewer.caption(), QStringLiteral("deck.pptx slide 2"));
    viewer.slideView()->nextSlide();
    viewer.slideView()->nextSlide();  // past the end: stays on the last
    QCOMPARE(viewer.caption(), QStringLiteral("deck.pptx slide 3"));
    viewer.slideView()->previousSlide();
    QCOMPARE(viewer.caption(), QStringLiteral("deck.pptx slide 2"));
}

void TstDesktopViewer::captionFollowsSeeks() {
    ViewerPane viewer;
    viewer.resize(800, 600);
    viewer.show();
    const auto clip = make_doc(sl::doc::DocumentKind::Video, "/nonexistent/clip.mp4", {"a", "b", "c", "d"});
    viewer.open(clip, sl::doc::SourceRef{clip->id, 0, std::nullopt, std::nullopt});
    QCOMPARE(viewer.caption(), QStringLiteral("clip.mp4 00:00:00"));
    viewer.videoView()->seekTo(42.0);
    QCOMPARE(viewer.caption(), QStringLiteral("clip.mp4 00:00:42"));
    // A click on the timeline seeks (MarkerSlider emits sliderMoved with milliseconds).
    Q_EMIT viewer.videoView()->timeline()->sliderMoved(75000);
    QCOMPARE(viewer.caption(), QStringLiteral("clip.mp4 00:01:15"));
}

void TstDesktopViewer::videoCitationLabelMatchesSeek() {
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    w->resize(1280, 800);
    w->show();
    const auto clip = make_doc(sl::doc::DocumentKind::Video, "/nonexistent/clip.mp4", {"a", "b", "c", "d"});
    // As the core cites a phrase: the locator names the segment (30 s), the region the phrase (45.4 s).
    sl::Citation c;
    c.number = 1;
    c.kind = sl::doc::DocumentKind::Video;
    c.path = clip->path;
    c.locator = "clip.mp4 00:00:30";
    c.ref = sl::doc::SourceRef{clip->id, 1, std::nullopt, sl::doc::TimeRange{45.4, 52.0}};
    c.snippet = "the phrase";
    ChatAnswer a;
    a.answer.question = "When?";
    sl::test::add_sentence(a.answer, "Then it happens.", {sl::test::support(0, 0.5)});
    a.answer.citations = {c};
    a.finished = true;
    w->chat()->addAnswer(a);
    auto* chip = w->chat()->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip1"));
    QVERIFY(chip);
    qInfo("chip: %s", qPrintable(chip->text()));
    const QRegularExpression time(QStringLiteral("\\d\\d:\\d\\d:\\d\\d"));
    const QString chip_time = time.match(chip->text()).captured();
    // What clicking it does (MainWindow::openCitation with the library's document).
    w->viewer()->open(clip, c.ref);
    qInfo("viewer: %s", qPrintable(w->viewer()->caption()));
    const QString seek_time = time.match(w->viewer()->caption()).captured();
    QCOMPARE(seek_time, QStringLiteral("00:00:45"));
    QCOMPARE(chip_time, seek_time);
    const QString text = w->chat()->transcript()->toPlainText();
    QVERIFY2(text.contains(QStringLiteral("clip.mp4 00:00:45")) && !text.contains(QStringLiteral("00:00:30")),
             qPrintable(text));
}

void TstDesktopViewer::textSectionShown() {
    // A citation into a DOCX/Markdown/HTML/EPUB document shows the cited section's text.
    auto d = std::make_shared<sl::doc::Document>();
    d->id = d->path = "/nonexistent/report.docx";
    d->kind = sl::doc::DocumentKind::Text;
    for (const auto& [label, body] : {std::pair<std::string, std::string>{"Intro", "Why we counted."},
                                      {"Results", "317 gulls <on> the rock."}}) {
        sl::doc::Unit u;
        u.kind = sl::doc::UnitKind::Section;
        u.index = static_cast<int>(d->units.size());
        u.label = label;
        u.blocks.push_back({sl::doc::BlockRole::Title, label, std::nullopt, std::nullopt, {}, 1.0f});
        u.blocks.push_back({sl::doc::BlockRole::Body, body, std::nullopt, std::nullopt, {}, 1.0f});
        u.blocks.push_back({sl::doc::BlockRole::TableCell, "cell", std::nullopt, std::nullopt, {}, 1.0f});
        d->units.push_back(std::move(u));
    }
    ViewerPane viewer;
    viewer.resize(800, 600);
    viewer.show();
    viewer.open(d, sl::doc::SourceRef{d->id, 1, std::nullopt, std::nullopt});
    QCOMPARE(viewer.mode(), ViewerPane::Mode::Text);
    QCOMPARE(viewer.caption(), QStringLiteral("report.docx §2 Results"));
    const QString shown = viewer.textView()->toPlainText();
    QVERIFY2(shown.contains(QStringLiteral("317 gulls <on> the rock.")), qPrintable(shown));  // escaped, not markup
    QVERIFY2(shown.contains(QStringLiteral("Results")) && !shown.contains(QStringLiteral("Why we counted")),
             qPrintable(shown));
}

QTEST_MAIN(TstDesktopViewer)
#include "tst_desktop_viewer.moc"
