// The chat on the real pipeline of today (LexicalAnswerService: BM25 over R-intro.pdf's pages +
// SmolLM2 on the CPU): the answer streams in pieces into the transcript, its citations name pages
// of R-intro.pdf with regions on them, and each citation has been verified (weak ones flagged with
// a reason).
#include <QSignalSpy>
#include <QTest>
#include <QTextBrowser>

#include "app/desktop/chat_pane.h"
#include "core/util/assets.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopAnswer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void streamsCitedAnswerFromModel();
    void noDocumentsIsAReadableError();
};

void TstDesktopAnswer::streamsCitedAnswerFromModel() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir, false, std::make_shared<LexicalAnswerService>(model.string()));
    const QString path = QString::fromStdString(pdf.string());
    w->addPaths({path});
    QTRY_COMPARE_WITH_TIMEOUT(sl::test::state_of(w->library(), path), ItemState::Ready, 300000);
    ChatPane* chat = w->chat();
    QSignalSpy finished(chat, &ChatPane::answerFinished);
    QSignalSpy changed(chat->transcript(), &QTextBrowser::textChanged);
    chat->ask(QStringLiteral("How do I fit a linear regression model and look at its coefficients?"));
    QVERIFY(chat->busy());
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 600000);
    const Answer& a = chat->answers().back();
    qInfo("answer: %s", a.text.c_str());
    QVERIFY2(a.error.empty(), a.error.c_str());
    QVERIFY(!a.text.empty());
    QVERIFY2(changed.size() > 3, "streamed in pieces");
    QVERIFY(a.context_tokens > 100);
    QCOMPARE(a.citations.size(), size_t{3});  // medium effort reads three sources
    for (const auto& c : a.citations) {
        qInfo("[%d] %s weak=%d %s", c.number, c.locator.c_str(), c.weak ? 1 : 0, c.weak_reason.c_str());
        QVERIFY(c.locator.rfind("R-intro.pdf p. ", 0) == 0);
        QVERIFY(c.ref.bbox.has_value() && c.ref.bbox->valid());
        QVERIFY(c.weak == !c.weak_reason.empty() || !c.weak);
    }
    QVERIFY(chat->transcript()->toHtml().contains(QStringLiteral("cite:0:1")));
}

void TstDesktopAnswer::noDocumentsIsAReadableError() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir, false, std::make_shared<LexicalAnswerService>(model.string()));
    w->chat()->ask(QStringLiteral("anything?"));
    QCOMPARE(w->chat()->answers().size(), size_t{1});
    QVERIFY(w->chat()->answers()[0].error.find("no document is ready") != std::string::npos);
    QVERIFY(w->chat()->transcript()->toPlainText().contains(QStringLiteral("Could not answer")));
}

QTEST_MAIN(TstDesktopAnswer)
#include "tst_desktop_answer.moc"
