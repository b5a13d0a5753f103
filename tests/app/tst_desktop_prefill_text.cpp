// The background prefill's parts that need no model: the status bar's texts (progress, ETA,
// paused, ready, failed), the gate an answer holds to pause the prefill (PausingAnswerService),
// and the chat's "Read: ..." line under an answer.
#include <QTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "app/desktop/answer_format.h"
#include "app/desktop/prefill_controller.h"
#include "app/desktop/prefill_gate.h"

using namespace sl::desktop;

namespace {

// Records whether the gate was held while it answered.
class GateProbeService : public AskService {
public:
    explicit GateProbeService(std::shared_ptr<PrefillGate> gate) : gate_(std::move(gate)) {}
    std::string name() const override { return "probe"; }
    ChatAnswer answer(const std::string& question, sl::Effort effort, const AskStream&,
                      const std::atomic<bool>*) override {
        held_during = gate_->held();
        effort_seen = effort;
        ChatAnswer a;
        a.answer.question = question;
        a.answer.text = "ok";
        a.finished = true;
        return a;
    }
    bool held_during = false;
    sl::Effort effort_seen = sl::Effort::Medium;

private:
    std::shared_ptr<PrefillGate> gate_;
};

}  // namespace

class TstDesktopPrefillText : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); }
    void eta();
    void statusTexts();
    void gateHoldsAndWaits();
    void pausingService();
    void readLine();
};

void TstDesktopPrefillText::eta() {
    QCOMPARE(format_eta(750), QStringLiteral("12:30"));
    QCOMPARE(format_eta(59.6), QStringLiteral("1:00"));
    QCOMPARE(format_eta(3723), QStringLiteral("1:02:03"));
    QCOMPARE(format_eta(0), QStringLiteral("0:00"));
    QVERIFY(format_eta(-1).isEmpty());
}

void TstDesktopPrefillText::statusTexts() {
    PrefillProgress p;
    QVERIFY(prefill_status_text(p).isEmpty());  // idle: no item

    p.state = PrefillState::Prefilling;
    p.done = 31744;
    p.saved = 31744;
    p.total = 78379;
    p.eta_seconds = 750;
    QCOMPARE(prefill_status_text(p), QStringLiteral("Context: prefilled 31,744 / 78,379 tokens (40%) · ETA 12:30"));
    p.eta_seconds = -1;
    QCOMPARE(prefill_status_text(p), QStringLiteral("Context: prefilled 31,744 / 78,379 tokens (40%)"));

    p.state = PrefillState::Paused;
    QVERIFY2(prefill_status_text(p).startsWith(QStringLiteral("Context: paused while answering")),
             qPrintable(prefill_status_text(p)));
    QVERIFY(prefill_status_text(p).contains(QStringLiteral("31,744 / 78,379")));

    p.state = PrefillState::Complete;
    p.done = p.saved = p.total;
    QCOMPARE(prefill_status_text(p), QStringLiteral("Context: ready · 78,379 tokens prefilled"));

    p.state = PrefillState::Preparing;
    QVERIFY(prefill_status_text(p).startsWith(QStringLiteral("Context: preparing")));

    p.state = PrefillState::Failed;
    p.reason = QStringLiteral("/lib/kv/library-abc.slkv: No space left on device");
    QCOMPARE(prefill_status_text(p),
             QStringLiteral("Context: prefill failed: /lib/kv/library-abc.slkv: No space left on device"));
    QCOMPARE(QString::fromLatin1(to_string(PrefillState::Paused)), QStringLiteral("paused"));
}

void TstDesktopPrefillText::gateHoldsAndWaits() {
    PrefillGate gate;
    int cancels = 0, changes = 0;
    gate.setListener([&] { ++changes; });
    gate.setCanceller([&] { ++cancels; });
    QVERIFY(!gate.held());
    gate.hold();
    QVERIFY(gate.held());
    QCOMPARE(cancels, 1);  // the running prefill is told to stop at once
    gate.hold();
    gate.release();
    QVERIFY(gate.held());  // two holders, one left
    gate.release();
    QVERIFY(!gate.held());
    QCOMPARE(changes, 3);  // two holds and the last release
    gate.release();        // unbalanced: ignored
    QVERIFY(!gate.held());

    // Not busy: no wait. Busy: waits for the worker to stop, or times out.
    QVERIFY(gate.waitStopped(std::chrono::milliseconds(0)));
    gate.setBusy(true);
    QVERIFY(!gate.waitStopped(std::chrono::milliseconds(50)));
    std::atomic<bool> stop{true};
    QVERIFY(!gate.waitStopped(std::chrono::seconds(10), &stop));  // given up when cancelled
    std::thread worker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        gate.setBusy(false);
    });
    const auto t0 = std::chrono::steady_clock::now();
    QVERIFY(gate.waitStopped(std::chrono::seconds(10)));
    worker.join();
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

    // A canceller set while held (the prefill was being prepared) cancels at once.
    gate.hold();
    cancels = 0;
    gate.setCanceller([&] { ++cancels; });
    QCOMPARE(cancels, 1);
    gate.release();
    gate.setCanceller({});
    gate.setListener({});
}

void TstDesktopPrefillText::pausingService() {
    auto gate = std::make_shared<PrefillGate>();
    auto inner = std::make_shared<GateProbeService>(gate);
    PausingAnswerService s(inner, gate, std::chrono::milliseconds(100));
    QCOMPARE(s.name(), std::string("probe"));
    const ChatAnswer a = s.answer("q?", sl::Effort::Low, {}, nullptr);
    QCOMPARE(a.answer.text, std::string("ok"));
    QVERIFY(inner->held_during);
    QCOMPARE(inner->effort_seen, sl::Effort::Low);
    QVERIFY(!gate->held());  // released afterwards
}

void TstDesktopPrefillText::readLine() {
    ChatAnswer a;
    a.answer.question = std::string("What is R?");
    a.answer.text = std::string("An answer.");
    a.method = std::string("scripted");
    a.finished = true;
    QVERIFY(!answer_html(a, 0, false).contains(QStringLiteral("Read:")));
    a.read_summary = "31,744 of 78,379 prefilled tokens (R-intro.pdf p. 1-40) and 5 preselected units";
    const QString html = answer_html(a, 0, false);
    QVERIFY2(html.contains(QStringLiteral("Read: 31,744 of 78,379 prefilled tokens (R-intro.pdf p. 1-40)")), qPrintable(html));
    QVERIFY(answer_markdown(a).contains(QStringLiteral("Read: 31,744 of 78,379")));
}

QTEST_GUILESS_MAIN(TstDesktopPrefillText)
#include "tst_desktop_prefill_text.moc"
