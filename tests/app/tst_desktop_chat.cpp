// The chat pane as a user meets it: an answer with many citations keeps the window within the
// screen (the chips wrap and scroll instead of widening the window); the chats the library keeps
// come back (with their citations) when the window opens again, Export finds them, and Clear
// removes them for good. Answers are rendered as Markdown (code, bold, lists) with their citation
// markers still links.
#include <QApplication>
#include <QFile>
#include <QFontInfo>
#include <QScreen>
#include <QSignalSpy>
#include <QTextBlock>
#include <QTextDocument>
#include <QTest>
#include <QTextBrowser>
#include <QToolButton>

#include "app/desktop/chat_pane.h"
#include "app/desktop/main_window.h"
#include "core/answer/answer_json.h"
#include "core/library/library.h"
#include "tests/app/tst_desktop_support.h"

using namespace sl::desktop;

namespace {

// An answer of `n` sentences, each backed by its own citation of a page of a long-named PDF.
ChatAnswer answer_with_citations(int n) {
    ChatAnswer a;
    a.answer.question = "What do the documents say?";
    for (int i = 0; i < n; ++i) {
        sl::Citation c;
        c.number = i + 1;
        c.kind = sl::doc::DocumentKind::Pdf;
        c.path = "/docs/a-rather-long-report-name-from-the-archive-" + std::to_string(i) + ".pdf";
        c.locator = "a-rather-long-report-name-from-the-archive-" + std::to_string(i) + ".pdf p. " + std::to_string(100 + i);
        c.ref.document = "doc" + std::to_string(i);
        c.ref.unit = 99 + i;
        c.snippet = "words on the page";
        a.answer.citations.push_back(c);
        sl::test::add_sentence(a.answer, "Sentence " + std::to_string(i) + " says something.",
                               {sl::test::support(i, 0.5)});
    }
    a.finished = true;
    return a;
}

}  // namespace

class TstDesktopChat : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void manyCitationsStayWithinScreen();
    void chatSurvivesRestart();
    void markdownRendered();
};

void TstDesktopChat::manyCitationsStayWithinScreen() {
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    w->resize(1280, 800);
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w.get()));
    w->chat()->addAnswer(answer_with_citations(20));
    QApplication::processEvents();
    const auto chips = w->chat()->chipBar()->findChildren<QToolButton*>();
    QCOMPARE(chips.size(), qsizetype{20});
    qInfo("window %dx%d, minimum size hint %dx%d", w->width(), w->height(), w->minimumSizeHint().width(),
          w->minimumSizeHint().height());
    QVERIFY2(w->minimumSizeHint().width() <= 1600, "20 citations make the window wider than a 1600 px screen");
    QVERIFY2(w->minimumSizeHint().height() <= 1000, "20 citations make the window taller than a 1000 px screen");
    QVERIFY(w->width() <= 1600);
    QCOMPARE(w->width(), 1280);  // the window keeps the size it had
    // The chips wrap onto several rows inside the chat pane, and Ask stays on the window.
    QWidget* chat = w->chat();
    const QRect pane(chat->mapTo(w.get(), QPoint(0, 0)), chat->size());
    QVERIFY(w->rect().contains(pane));
    int rows = 0, last_y = -1;
    for (QToolButton* c : chips) {
        const QRect r(c->mapTo(chat, QPoint(0, 0)), c->size());
        QVERIFY2(r.right() <= chat->width(), qPrintable(c->text() + QStringLiteral(" sticks out of the chat")));
        if (r.y() != last_y) ++rows, last_y = r.y();
    }
    qInfo("20 chips in %d rows; the chips take %d px of the chat's %d", rows, chips.front()->parentWidget()->parentWidget()->height(),
          chat->height());
    QVERIFY2(rows > 1, "the chips do not wrap");
    if (const QString shots = qEnvironmentVariable("SIGHTLINE_SCREENSHOT_DIR"); !shots.isEmpty())
        w->grab().save(shots + QStringLiteral("/chat-20-citations.png"));
    QToolButton* ask = nullptr;
    for (QToolButton* b : chat->findChildren<QToolButton*>())
        if (b->text() == QStringLiteral("Ask")) ask = b;
    QVERIFY(ask && ask->isVisible());
    const QRect ask_rect(ask->mapTo(w.get(), QPoint(0, 0)), ask->size());
    QVERIFY(w->rect().contains(ask_rect));
    // The transcript keeps most of the pane: the chips take a few rows and scroll past them.
    QVERIFY2(w->chat()->transcript()->height() > chat->height() / 3, "the chips crowd out the answers");
}

void TstDesktopChat::chatSurvivesRestart() {
    QTemporaryDir dir;
    const std::filesystem::path library = dir.filePath(QStringLiteral("library")).toStdString();
    ChatAnswer stored = answer_with_citations(3);
    stored.answer.question = "What changed in 2023?";
    {  // An answer as sl::ask records it in the library.
        sl::Library lib = sl::Library::open(library);
        sl::ChatRecord r;
        r.question = stored.answer.question;
        r.answer = stored.answer.with_markers();
        r.citations = sl::answer_to_json(stored.answer);
        r.settings = R"({"model":"SmolLM2.gguf","attention":"msa","top_k":16,"effort":"medium",)"
                     R"("context_tokens":450,"read":"all of 3 documents"})";
        lib.add_chat(r);
    }
    std::unique_ptr<MainWindow> w;
    for (int run = 0; run < 2; ++run) {  // the first start, then again after closing the window
        w = sl::test::make_library_window(dir);
        w->show();
        QTRY_COMPARE_WITH_TIMEOUT(w->chat()->answers().size(), size_t{1}, 10000);
        const ChatAnswer& a = w->chat()->answers()[0];
        QCOMPARE(a.answer.question, stored.answer.question);
        QCOMPARE(a.answer.text, stored.answer.text);
        QCOMPARE(a.answer.citations.size(), size_t{3});
        QCOMPARE(a.answer.citations[1].locator, stored.answer.citations[1].locator);
        QCOMPARE(a.answer.sentences.size(), size_t{3});
        QCOMPARE(a.read_summary, std::string("all of 3 documents"));
        QCOMPARE(a.model, std::string("SmolLM2.gguf"));
        QVERIFY(a.finished);
        const QString text = w->chat()->transcript()->toPlainText();
        QVERIFY2(text.contains(QStringLiteral("What changed in 2023?")), qPrintable(text));
        QVERIFY(text.contains(QStringLiteral("says something [1].")));
        QCOMPARE(w->chat()->chipBar()->findChildren<QToolButton*>().size(), qsizetype{3});
        w->close();
        if (run == 0) w.reset();
    }
    // Export finds the restored answers.
    QSignalSpy written(w.get(), &MainWindow::reportWritten);
    const QString md = dir.filePath(QStringLiteral("report.md"));
    w->exportReport(md);
    QTRY_COMPARE_WITH_TIMEOUT(written.size(), 1, 10000);
    QCOMPARE(written.at(0).at(1).toString(), QString());
    QFile f(md);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString report = QString::fromUtf8(f.readAll());
    QVERIFY(report.contains(QStringLiteral("What changed in 2023?")));
    QVERIFY(report.contains(QString::fromStdString(stored.answer.citations[2].locator)));

    // Clear empties the chat and the library: the next start shows nothing.
    auto* clear = w->chat()->findChild<QToolButton*>(QStringLiteral("clearChat"));
    QVERIFY(clear && clear->isEnabled());
    QSignalSpy cleared(w.get(), &MainWindow::chatHistoryCleared);
    w->clearChatHistory();
    QTRY_COMPARE_WITH_TIMEOUT(cleared.size(), 1, 10000);
    QCOMPARE(cleared.at(0).at(0).toString(), QString());
    QVERIFY(w->chat()->answers().empty());
    QVERIFY(!clear->isEnabled());
    QVERIFY(sl::Library::open(library).list_chats().empty());
    w.reset();
    w = sl::test::make_library_window(dir);
    QSignalSpy restored(w.get(), &MainWindow::chatHistoryRestored);
    QTRY_COMPARE_WITH_TIMEOUT(restored.size(), 1, 10000);
    QCOMPARE(restored.at(0).at(0).toInt(), 0);
    QVERIFY(w->chat()->answers().empty());
}

void TstDesktopChat::markdownRendered() {
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    ChatAnswer a = answer_with_citations(1);
    a.answer.text.clear();
    a.answer.sentences.clear();
    sl::test::add_sentence(a.answer, "Fit it with `lm()` and **read** the coefficients.", {sl::test::support(0, 0.6)});
    a.answer.text += "\n\n- `coef()` gives them\n- `summary()` gives the fit\n";
    w->chat()->addAnswer(a);
    QTextDocument* doc = w->chat()->transcript()->document();
    const QString text = doc->toPlainText();
    qInfo("%s", qPrintable(text));
    QVERIFY2(!text.contains(QLatin1Char('`')) && !text.contains(QStringLiteral("**")), "Markdown shown literally");
    QVERIFY(text.contains(QStringLiteral("A: Fit it with lm() and read the coefficients [1].")));
    // The list is a list, the code is in a fixed-pitch font, the bold is bold, the marker a link.
    int items = 0;
    bool code = false, bold = false, link = false;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
        if (b.textList()) ++items;
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            if (f.text().contains(QStringLiteral("lm()")) && QFontInfo(f.charFormat().font()).fixedPitch()) code = true;
            if (f.text() == QStringLiteral("read") && f.charFormat().fontWeight() >= QFont::Bold) bold = true;
            if (f.text() == QStringLiteral("[1]") && f.charFormat().anchorHref() == QStringLiteral("cite:0:1")) link = true;
        }
    }
    QCOMPARE(items, 2);
    QVERIFY2(code, "inline code is not in a fixed-pitch font");
    QVERIFY2(bold, "**read** is not bold");
    QVERIFY2(link, "the marker [1] is not a link to cite:0:1");
}

QTEST_MAIN(TstDesktopChat)
#include "tst_desktop_chat.moc"
