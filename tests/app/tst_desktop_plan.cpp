// The context plan under an answer: its "the context plan" link opens the plan (what each document
// gave the context) with what was read, and Apply sets the effort and the context size of the
// questions that follow (the status bar's effort and the settings follow).
#include <QComboBox>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <QUrl>

#include "app/desktop/answer_format.h"
#include "app/desktop/chat_pane.h"
#include "app/desktop/main_window.h"
#include "app/desktop/plan_dialog.h"
#include "tests/app/tst_desktop_support.h"

using namespace sl::desktop;

class TstDesktopPlan : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void planLinkOpensPlanAndApplies() {
        QTemporaryDir dir;
        auto w = sl::test::make_window(dir);
        w->show();
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        ChatAnswer a;
        a.answer.question = "How do I fit a linear model?";
        a.answer.text = "Use lm().";
        a.read_summary = "12 units ranked best for the question, of 310 (R-intro.pdf p. 30, ...)";
        a.plan = "Context plan: 8,192 tokens of context\n  R-intro.pdf  78,000 tokens -> 7,500: 12 of 113 units kept";
        a.finished = true;
        w->chat()->addAnswer(a);
        const QString html = answer_html(a, 0, false);
        QVERIFY2(html.contains(QStringLiteral("href='plan:0'")), qPrintable(html));
        QCOMPARE(parse_plan_link(QStringLiteral("plan:3")), 3);
        QCOMPARE(parse_plan_link(QStringLiteral("cite:0:1")), -1);

        Q_EMIT w->chat()->transcript()->anchorClicked(QUrl(QStringLiteral("plan:0")));
        PlanDialog* dlg = nullptr;
        QTRY_VERIFY((dlg = w->findChild<PlanDialog*>()) != nullptr);
        QVERIFY(dlg->findChild<QPlainTextEdit*>()->toPlainText().contains(QStringLiteral("12 of 113 units kept")));
        auto* effort = dlg->findChild<QComboBox*>();
        auto* context = dlg->findChild<QSpinBox*>();
        QVERIFY(effort && context);
        QCOMPARE(context->value(), 0);  // the model's own
        effort->setCurrentIndex(effort->findData(static_cast<int>(sl::Effort::High)));
        context->setValue(4096);
        dlg->accept();
        QCOMPARE(w->settings()->effort(), QStringLiteral("high"));
        QCOMPARE(w->chat()->effort(), sl::Effort::High);
        QCOMPARE(w->settings()->answerContext(), 4096);
        // A link to an answer that is not there opens nothing.
        QTRY_VERIFY(w->findChild<PlanDialog*>() == nullptr);
        Q_EMIT w->chat()->transcript()->anchorClicked(QUrl(QStringLiteral("plan:7")));
        QTest::qWait(50);
        QVERIFY(w->findChild<PlanDialog*>() == nullptr);
    }
};

QTEST_MAIN(TstDesktopPlan)
#include "tst_desktop_plan.moc"
