// The chat on the real pipeline: LibraryAnswerService (the core's sl::ask over the library store:
// R-intro.pdf in one 2,048-token context, SmolLM2 on the CPU, citations from MSA's selections,
// verified against each sentence). The answer streams in pieces into the transcript, which then
// shows exactly what the core's sl::Answer holds: its text with the markers with_markers() puts
// (each a link), every citation in the sources list with its excerpt and, per citation, why it is
// flagged (weak, or read but cited by no sentence) or which sentences it backs with their scores,
// a note when the answer was cut, "Read: ...", the model and the method. Stop during the answer
// keeps the text so far and says it stopped.
#include <QApplication>
#include <QClipboard>
#include <QScopeGuard>
#include <QSignalSpy>
#include <QTest>
#include <QTextDocument>
#include <QTextBrowser>

#include "app/desktop/answer_format.h"
#include "app/desktop/chat_pane.h"
#include "app/desktop/library_answer_service.h"
#include "core/embed/sentence_embedder.h"
#include "core/util/assets.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopAnswer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase() { window_.reset(); }
    void streamsCitedAnswerFromModel();
    void stopKeepsTheTextSoFar();

private:
    QTemporaryDir dir_;
    std::unique_ptr<MainWindow> window_;
};

void TstDesktopAnswer::initTestCase() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    LibraryAnswerOptions lo;
    lo.n_ctx = 2048;  // keeps the CPU prefill short; the planner picks the pages that fit
    window_ = sl::test::make_library_window(
        dir_, std::make_shared<LibraryAnswerService>(
                  dir_.filePath(QStringLiteral("library")).toStdString(), model.string(), lo));
    const QString path = QString::fromStdString(pdf.string());
    window_->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(window_->library(), path), ItemState::Ready,
                              300000);
}

void TstDesktopAnswer::streamsCitedAnswerFromModel() {
    ChatPane* chat = window_->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    QSignalSpy changed(chat->transcript(), &QTextBrowser::textChanged);
    QStringList statuses;  // what the transcript said before the text came
    const QMetaObject::Connection watch =
        connect(chat->transcript(), &QTextBrowser::textChanged, this, [&] {
            if (!chat->answers().empty() && !chat->answers().back().status.empty())
                statuses << QString::fromStdString(chat->answers().back().status);
        });
    const auto unwatch =
        qScopeGuard([&] { disconnect(watch); });  // `statuses` dies with this function
    chat->ask(
        QStringLiteral("How do I fit a linear regression model and look at its coefficients?"));
    QVERIFY(chat->busy());
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 800000);
    const ChatAnswer& c = chat->answers().back();
    const sl::Answer& a = c.answer;
    qInfo("answer: %s", a.with_markers().c_str());
    qInfo("stop: %s%s; %s", a.stop_reason.c_str(), a.cut ? " (cut)" : "", c.method.c_str());
    QVERIFY2(c.error.empty(), c.error.c_str());
    QVERIFY(!a.text.empty());
    QVERIFY2(changed.size() > 3, "streamed in pieces");
    statuses.removeDuplicates();
    qInfo("status lines: %s", qPrintable(statuses.join(QStringLiteral(" | "))));
    QVERIFY2(statuses.filter(QStringLiteral("prefilling")).size() +
                     statuses.filter(QStringLiteral("reading the context")).size() >
                 0,
             qPrintable(statuses.join(QLatin1Char('\n'))));
    QVERIFY(c.context_tokens > 500);
    QCOMPARE(QString::fromStdString(c.model),
             QString::fromUtf8(sl::assets::kDefaultModel).section(QLatin1Char('/'), -1));
    QVERIFY2(c.method.find("MSA") != std::string::npos, c.method.c_str());
    if (std::filesystem::exists(sl::SentenceEmbedder::default_dir()))  // set-up installs it
        QVERIFY2(c.method.find("meaning (all-MiniLM-L6-v2)") != std::string::npos,
                 c.method.c_str());
    QVERIFY(!c.read_summary.empty());
    QVERIFY(!a.sentences.empty());
    QVERIFY2(!a.citations.empty(), "MSA selections gave no citation");

    // The transcript shows the core's answer whole.
    const QString text = chat->transcript()->toPlainText();
    const QString html = chat->transcript()->toHtml();
    qInfo("%s", qPrintable(text));
    // (as Markdown renders it: `code` loses its ticks, **bold** its stars)
    QTextDocument rendered;
    rendered.setMarkdown(QString::fromStdString(a.with_markers()),
                         QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub | QTextDocument::MarkdownNoHTML));
    QVERIFY2(text.simplified().contains(rendered.toPlainText().simplified()), qPrintable(rendered.toPlainText()));
    for (const auto& piece : marked_pieces(a))
        for (const auto& s : piece.marks)
            QVERIFY(html.contains(QStringLiteral("cite:0:%1")
                                      .arg(a.citations[static_cast<size_t>(s.citation)].number)));
    bool some_support = false;
    for (size_t i = 0; i < a.citations.size(); ++i) {
        const sl::Citation& cit = a.citations[i];
        qInfo("[%d] %s used=%d weak=%d share %.3f", cit.number, cit.locator.c_str(),
              a.used(i) ? 1 : 0, a.weak(i) ? 1 : 0, cit.share);
        QVERIFY(cit.locator.rfind("R-intro.pdf p. ", 0) == 0);
        QVERIFY(text.contains(QString::fromStdString(cit.locator)));
        QVERIFY(!citation_excerpt(cit).isEmpty());
        QVERIFY(text.contains(citation_excerpt(cit)));
        if (!a.used(i)) QVERIFY(text.contains(QStringLiteral("read, not cited by any sentence")));
        if (a.weak(i))
            QVERIFY(text.contains(
                QStringLiteral("weak: its text backs the sentence poorly (word overlap ")));
        const QStringList backs = citation_supports(a, i);
        for (qsizetype k = 0; k < std::min<qsizetype>(backs.size(), 3);
             ++k) {  // the transcript lists the best three
            QVERIFY2(text.contains(QStringLiteral("backs ") + backs[k]), qPrintable(backs[k]));
            some_support = true;
        }
    }
    QVERIFY2(some_support, "no citation backs a sentence");
    if (!stop_note(a).isEmpty()) QVERIFY(text.contains(stop_note(a)));
    QVERIFY(
        text.contains(QStringLiteral("Read: ") + QString::fromStdString(c.read_summary).left(20)));
    QVERIFY(text.contains(QString::fromStdString(c.model) +
                          QStringLiteral(" \u00b7 one long context with MSA")));

    // Copy: the answer with its markers and the sources.
    QApplication::clipboard()->clear();
    chat->copyAnswer();
    const QString copied = QApplication::clipboard()->text();
    QVERIFY(copied.startsWith(QString::fromStdString(a.with_markers()).trimmed()));
    QVERIFY(copied.contains(QStringLiteral("\n\nSources:\n[1] ") +
                            QString::fromStdString(a.citations[0].locator)));
}

void TstDesktopAnswer::stopKeepsTheTextSoFar() {
    ChatPane* chat = window_->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    const size_t n = chat->answers().size();
    chat->ask(QStringLiteral(
        "Explain in detail how R handles missing values in vectors, data frames and models."));
    QVERIFY(chat->busy());
    QTRY_VERIFY_WITH_TIMEOUT(
        chat->answers().size() == n + 1 && !chat->answers().back().answer.text.empty(), 800000);
    const std::string before = chat->answers().back().answer.text;
    chat->stop();
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 120000);
    const ChatAnswer& c = chat->answers().back();
    qInfo("stopped after: %s", c.answer.text.c_str());
    QVERIFY2(c.error.empty(), c.error.c_str());
    QCOMPARE(c.answer.stop_reason, std::string("cancelled"));
    QVERIFY(c.answer.text.rfind(before, 0) == 0);  // what was shown stays
    QVERIFY(c.answer.citations.empty());
    QVERIFY(chat->transcript()->toPlainText().contains(QStringLiteral("Stopped before the end")));
}

QTEST_MAIN(TstDesktopAnswer)
#include "tst_desktop_answer.moc"
