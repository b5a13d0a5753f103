// The real window under Xvfb (xcb platform): a library with a PDF, a deck, a video and a broken
// file; an answer from the model with citations; the cited PDF region highlighted; the video at a
// cited frame with its timeline markers; a slide with notes; the dark palette; the model manager.
// Screenshots (PNG, grabbed from the X server) go to $SIGHTLINE_SCREENSHOT_DIR (default:
// ./screenshots). Skips with a message when there is no X display (run it through ctest, which
// wraps it in xvfb-run when installed: apt package xvfb).
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QScreen>
#include <QSignalSpy>
#include <QStyleFactory>
#include <QTest>
#include <QToolButton>

#include "app/desktop/chat_pane.h"
#include "app/desktop/highlight_canvas.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/model_manager.h"
#include "app/desktop/pdf_view.h"
#include "app/desktop/slide_view.h"
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

QTEST_MAIN(TstDesktopScreenshots)
#include "tst_desktop_screenshots.moc"
