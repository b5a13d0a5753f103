// The real window under Xvfb (xcb platform): a library with a PDF, a deck, a video and a broken
// file; an answer from the model with citations; the cited PDF region highlighted; the video at a
// cited frame with its timeline markers; a slide with notes; the dark palette; the model manager.
// Screenshots (PNG, grabbed from the X server) go to $SIGHTLINE_SCREENSHOT_DIR (default:
// ./screenshots). Skips with a message when there is no X display (run it through ctest, which
// wraps it in xvfb-run when installed: apt package xvfb).
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QListWidget>
#include <QScreen>
#include <QSignalSpy>
#include <QStyleFactory>
#include <QTest>
#include <QToolButton>

#include "app/desktop/chat_pane.h"
#include "app/desktop/disk_usage.h"
#include "app/desktop/highlight_canvas.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/model_manager.h"
#include "app/desktop/pdf_view.h"
#include "app/desktop/plan_dialog.h"
#include "app/desktop/slide_view.h"
#include "app/desktop/video_view.h"
#include "app/desktop/viewer_pane.h"
#include "core/document/locator.h"
#include "core/util/assets.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopScreenshots : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase() { window_.reset(); }
    void libraryAndCitedPdfRegion();
    void videoAtCitedFrame();
    void slideWithNotes();
    void darkPalette();
    void modelManager();
    void twentyCitationsStayOnScreen();
    void captionsFollowAndFind();
    void videoControls();
    void planAndDisk();
    void chatSurvivesRestart();  // last: it replaces the window

private:
    QString shot(QWidget* w, const QString& name);
    void settle();
    QToolButton* chip(int number);

    QTemporaryDir dir_;
    QString out_;
    std::unique_ptr<MainWindow> window_;
    QString pdf_, deck_, video_;
};

void TstDesktopScreenshots::initTestCase() {
    if (qEnvironmentVariableIsEmpty("DISPLAY") || QGuiApplication::platformName() != QLatin1String("xcb"))
        QSKIP("needs an X display (xcb): run through ctest, which uses xvfb-run (apt package xvfb)");
    sl::test::use_ffmpeg_media_backend();
    QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    out_ = qEnvironmentVariable("SIGHTLINE_SCREENSHOT_DIR", QDir::current().filePath(QStringLiteral("screenshots")));
    QVERIFY(QDir().mkpath(out_));
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    REQUIRE_ASSET(deck, "samples/pptx/pandoc-reference.pptx");
    REQUIRE_ASSET(avi, "samples/video/vtest.avi");
    pdf_ = QString::fromStdString(pdf.string());
    deck_ = QString::fromStdString(deck.string());
    video_ = QString::fromStdString(avi.string());
    // The window on a library store, answering through the library's pipeline (one context, MSA
    // selections as citations); a 2,048-token context keeps the CPU prefill short.
    const QString ini = dir_.filePath(QStringLiteral("sightline.conf"));
    {
        AppSettings s(ini);
        s.setConfirmHeavyIngest(false);
        s.setOcr(false);
    }
    MainWindowOptions o;
    o.settings_file = ini;
    o.library_dir = dir_.filePath(QStringLiteral("library"));
    o.background_prefill = false;  // its own tests: tst_desktop_prefill
    LibraryAnswerOptions lo;
    lo.n_ctx = 2048;
    o.service = std::make_shared<LibraryAnswerService>(o.library_dir.toStdString(), model.string(), lo);
    window_ = std::make_unique<MainWindow>(o);
    window_->resize(1500, 920);
    window_->move(20, 20);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    const QString broken = dir_.filePath(QStringLiteral("scan-broken.pdf"));
    QFile f(broken);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("%PDF-1.4\ntruncated");
    f.close();
    QVERIFY(sl::test::drop_files(window_.get(), {pdf_, deck_, video_, broken}));
    for (const QString& p : {pdf_, deck_, video_})
        QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), p), ItemState::Ready, 300000);
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), broken), ItemState::Failed, 60000);
}

void TstDesktopScreenshots::settle() {
    window_->repaint();
    QCoreApplication::processEvents();
    QTest::qWait(250);  // let the X server composite what was painted
    QCoreApplication::processEvents();
}

QString TstDesktopScreenshots::shot(QWidget* w, const QString& name) {
    settle();
    const QPixmap px = w->screen()->grabWindow(w->winId());
    const QString path = QDir(out_).filePath(name);
    if (px.isNull() || !px.save(path)) qWarning("could not save %s", qPrintable(path));
    qInfo("screenshot: %s (%dx%d)", qPrintable(path), px.width(), px.height());
    return path;
}

QToolButton* TstDesktopScreenshots::chip(int number) {
    return window_->chat()->chipBar()->findChild<QToolButton*>(QStringLiteral("citationChip%1").arg(number));
}

void TstDesktopScreenshots::libraryAndCitedPdfRegion() {
    ChatPane* chat = window_->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    chat->ask(QStringLiteral("How do I fit a linear regression model?"));
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 800000);
    QVERIFY2(chat->answers().back().error.empty(), chat->answers().back().error.c_str());
    const sl::Answer& answer = chat->answers().back().answer;
    int pdf_cite = 0;
    for (size_t i = 0; i < answer.citations.size(); ++i) {
        const sl::Citation& c = answer.citations[i];
        qInfo("[%d] %s%s", c.number, c.locator.c_str(), answer.weak(i) ? " (weak)" : "");
        if (!pdf_cite && c.locator.rfind("R-intro.pdf", 0) == 0 && c.ref.bbox) pdf_cite = c.number;
    }
    QVERIFY2(pdf_cite > 0 && chip(pdf_cite), "no citation of R-intro.pdf with a region");
    QTest::mouseClick(chip(pdf_cite), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(window_->viewer()->pdfView()->rendered(), 30000);
    QVERIFY(!window_->viewer()->pdfView()->canvas()->highlightRect().isEmpty());
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("01-library-answer-pdf-region.png"))));
}

void TstDesktopScreenshots::videoAtCitedFrame() {
    const auto vtest = sl::test::document_of(window_->library(), video_);
    const auto deck = sl::test::document_of(window_->library(), deck_);
    QVERIFY(vtest && deck && deck->units.size() > 1);
    // An answer whose citations point into the video (vtest.avi has no speech or subtitles, so no
    // ranking finds it; the citations are set by hand, as the attention-based pipeline would).
    ChatAnswer a;
    a.answer.question = "When do people cross the square?";
    sl::test::add_sentence(a.answer, "Two people walk across the square at about 7 s.", {sl::test::support(0, 0.4)});
    sl::test::add_sentence(a.answer, "A group passes near the end.", {sl::test::support(1, 0.3)});
    sl::test::add_sentence(a.answer, "The deck's second slide is unrelated.", {sl::test::support(2, 0.05, true)});
    for (auto [n, t0] : {std::pair{1, 7.0}, std::pair{2, 60.0}}) {
        sl::Citation c;
        c.number = n;
        c.kind = sl::doc::DocumentKind::Video;
        c.ref.document = vtest->id;
        c.ref.time = sl::doc::TimeRange{t0, t0 + 2};
        c.path = vtest->path;
        c.locator = "vtest.avi " + sl::doc::format_time(t0);
        c.snippet = "(video frames)";
        a.answer.citations.push_back(c);
    }
    sl::Citation s;
    s.number = 3;
    s.kind = sl::doc::DocumentKind::Slides;
    s.ref.document = deck->id;
    s.ref.unit = 1;
    s.path = deck->path;
    s.locator = sl::doc::full_locator(*deck, deck->units[1]);
    for (const auto& b : deck->units[1].blocks)
        if (b.bbox && b.role != sl::doc::BlockRole::Note) {
            s.ref.bbox = b.bbox;
            s.snippet = b.text;
            break;
        }
    a.answer.citations.push_back(s);
    a.method = "citations set by hand for the screenshot";
    a.model = "\u2014";
    window_->chat()->addAnswer(a);
    QTest::mouseClick(chip(1), Qt::LeftButton);
    VideoView* v = window_->viewer()->videoView();
    QTRY_VERIFY_WITH_TIMEOUT(v->shownFrameTime() >= 0 && !v->playing(), 30000);
    qInfo("video frame shown at %.2f s", v->shownFrameTime());
    QCOMPARE(v->timeline()->markers().size(), size_t{2});
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("02-video-cited-frame.png"))));
}

void TstDesktopScreenshots::slideWithNotes() {
    QTest::mouseClick(chip(3), Qt::LeftButton);
    QCOMPARE(window_->viewer()->mode(), ViewerPane::Mode::Slides);
    QCOMPARE(window_->viewer()->slideView()->currentSlide(), 1);
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("03-slide-with-notes.png"))));
}

void TstDesktopScreenshots::darkPalette() {
    const QPalette light = QApplication::palette();
    QPalette dark;
    dark.setColor(QPalette::Window, QColor(37, 37, 38));
    dark.setColor(QPalette::WindowText, QColor(230, 230, 230));
    dark.setColor(QPalette::Base, QColor(30, 30, 30));
    dark.setColor(QPalette::AlternateBase, QColor(45, 45, 48));
    dark.setColor(QPalette::Text, QColor(230, 230, 230));
    dark.setColor(QPalette::Button, QColor(45, 45, 48));
    dark.setColor(QPalette::ButtonText, QColor(230, 230, 230));
    dark.setColor(QPalette::Highlight, QColor(38, 79, 120));
    dark.setColor(QPalette::HighlightedText, Qt::white);
    dark.setColor(QPalette::PlaceholderText, QColor(150, 150, 150));
    dark.setColor(QPalette::Link, QColor(120, 170, 230));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        dark.setColor(QPalette::Disabled, role, QColor(110, 110, 110));
    QApplication::setPalette(dark);
    QTest::mouseClick(chip(1), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(window_->viewer()->videoView()->shownFrameTime() >= 0, 30000);
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("04-dark-palette.png"))));
    QApplication::setPalette(light);
}

void TstDesktopScreenshots::modelManager() {
    ModelManagerDialog dlg(window_->settings(), window_.get());
    QSignalSpy loaded(&dlg, &ModelManagerDialog::infoLoaded);
    dlg.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dlg));
    QTRY_VERIFY_WITH_TIMEOUT(loaded.size() >= 1, 30000);
    QVERIFY2(dlg.info().error.isEmpty(), qPrintable(dlg.info().error));
    QVERIFY(dlg.info().summary.contains(QStringLiteral("llama")));
    QVERIFY(QFile::exists(shot(&dlg, QStringLiteral("05-model-manager.png"))));
}

// An answer citing 20 places: the chips wrap and scroll, the window stays on the screen.
void TstDesktopScreenshots::twentyCitationsStayOnScreen() {
    const auto pdf = sl::test::document_of(window_->library(), pdf_);
    QVERIFY(pdf && pdf->units.size() > 40);
    ChatAnswer a;
    a.answer.question = "Which pages discuss data frames?";
    std::vector<sl::Support> supports;
    for (int i = 0; i < 20; ++i) supports.push_back(sl::test::support(i, 0.05));
    sl::test::add_sentence(a.answer, "Data frames come up on many pages.", supports);
    for (int i = 0; i < 20; ++i) {
        sl::Citation c;
        c.number = i + 1;
        c.kind = sl::doc::DocumentKind::Pdf;
        c.ref.document = pdf->id;
        c.ref.unit = 20 + i;
        c.path = pdf->path;
        c.locator = sl::doc::full_locator(*pdf, pdf->units[static_cast<size_t>(20 + i)]);
        a.answer.citations.push_back(c);
    }
    a.method = "citations set by hand for the screenshot";
    window_->chat()->addAnswer(a);
    settle();
    const QRect screen = window_->screen()->availableGeometry();
    QVERIFY2(screen.contains(window_->frameGeometry()) || window_->width() <= screen.width(),
             qPrintable(QStringLiteral("window %1x%2 on a %3x%4 screen")
                            .arg(window_->width()).arg(window_->height()).arg(screen.width()).arg(screen.height())));
    QVERIFY(window_->width() <= 1520 && window_->height() <= 940);
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("06-twenty-citations.png"))));
}

// The caption follows the pages; Ctrl+F finds and the outline opens beside the page.
void TstDesktopScreenshots::captionsFollowAndFind() {
    QTest::mouseClick(chip(1), Qt::LeftButton);
    ViewerPane* viewer = window_->viewer();
    QCOMPARE(viewer->mode(), ViewerPane::Mode::Pdf);
    const QString before = viewer->caption();
    viewer->pdfView()->nextPage();
    QVERIFY2(viewer->caption() != before && viewer->caption().startsWith(QStringLiteral("R-intro.pdf p. ")),
             qPrintable(before + QStringLiteral(" -> ") + viewer->caption()));
    viewer->pdfView()->find(QStringLiteral("data frame"));
    QVERIFY(viewer->pdfView()->hitCount() > 3);
    for (auto* b : viewer->pdfView()->findChildren<QToolButton*>())
        if (b->text() == QStringLiteral("Contents")) b->click();
    QTRY_VERIFY_WITH_TIMEOUT(viewer->pdfView()->rendered(), 30000);
    QVERIFY(viewer->caption().startsWith(QStringLiteral("R-intro.pdf p. ")));
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("07-pdf-find-outline.png"))));
}

// The video with its frame strip and controls (vtest.avi has no speech: no transcript panel).
void TstDesktopScreenshots::videoControls() {
    // The hand-made answer citing the video is the one before the 20-citation answer.
    const auto& answers = window_->chat()->answers();
    int index = -1;
    for (int i = 0; i < static_cast<int>(answers.size()); ++i)
        if (answers[static_cast<size_t>(i)].answer.question == "When do people cross the square?") index = i;
    QVERIFY(index >= 0);
    window_->chat()->activateCitation(index, 2);
    VideoView* v = window_->viewer()->videoView();
    QTRY_VERIFY_WITH_TIMEOUT(v->shownFrameTime() > 50 && !v->playing(), 30000);
    QVERIFY(v->frameStrip()->isVisible() && v->frameStrip()->count() >= 4);
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("08-video-controls.png"))));
}

// The context plan of the pipeline's answer, and the library's disk use.
void TstDesktopScreenshots::planAndDisk() {
    const ChatAnswer& first = window_->chat()->answers().front();
    QVERIFY2(!first.plan.empty(), "the pipeline's answer has no plan");
    PlanDialog plan(first, sl::Effort::Medium, 2048, 8192, window_.get());
    plan.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plan));
    QVERIFY(plan.planText().contains(QStringLiteral("R-intro.pdf")));
    QVERIFY(QFile::exists(shot(&plan, QStringLiteral("09-context-plan.png"))));
    plan.close();
    DiskDialog disk(dir_.filePath(QStringLiteral("library")).toStdString(), qint64{2} << 30, nullptr, window_.get());
    disk.show();
    QVERIFY(QTest::qWaitForWindowExposed(&disk));
    QTRY_VERIFY_WITH_TIMEOUT(disk.usage().database > 0, 10000);
    QVERIFY(QFile::exists(shot(&disk, QStringLiteral("10-disk-use.png"))));
}

// A new window on the same library restores the pipeline's answer with its citations.
void TstDesktopScreenshots::chatSurvivesRestart() {
    const std::string question = window_->chat()->answers().front().answer.question;
    const size_t citations = window_->chat()->answers().front().answer.citations.size();
    window_.reset();
    MainWindowOptions o;
    o.settings_file = dir_.filePath(QStringLiteral("sightline.conf"));
    o.library_dir = dir_.filePath(QStringLiteral("library"));
    o.background_prefill = false;
    window_ = std::make_unique<MainWindow>(o);
    QSignalSpy restored(window_.get(), &MainWindow::chatHistoryRestored);
    window_->resize(1500, 920);
    window_->move(20, 20);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(restored.size() >= 1, 60000);
    const auto& answers = window_->chat()->answers();
    QVERIFY(!answers.empty());
    QCOMPARE(answers.front().answer.question, question);  // hand-made answers were not stored
    QCOMPARE(answers.front().answer.citations.size(), citations);
    QVERIFY(QFile::exists(shot(window_.get(), QStringLiteral("11-chat-after-restart.png"))));
}

QTEST_MAIN(TstDesktopScreenshots)
#include "tst_desktop_screenshots.moc"
