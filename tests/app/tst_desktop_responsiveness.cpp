// The window stays responsive while refman.pdf (2,415 pages, OCR off) is read: a 10 ms QTimer
// heartbeat on the GUI thread records how late each tick was. The figure is printed, not asserted
// (timings belong to benchmarks); the test checks that the ingest finished on the worker while the
// GUI thread kept ticking and receiving progress.
#include <QSignalSpy>
#include <QTest>

#include "app/desktop/event_loop_probe.h"
#include "tests/app/tst_desktop_support.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopResponsiveness : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void heartbeatWhileRefmanIngests();
};

void TstDesktopResponsiveness::heartbeatWhileRefmanIngests() {
    REQUIRE_ASSET(pdf, "samples/pdf/refman.pdf");
    QTemporaryDir dir;
    auto w = sl::test::make_window(dir);
    w->show();
    QVERIFY(QTest::qWaitForWindowExposed(w.get()));
    const QString path = QString::fromStdString(pdf.string());
    // Baseline: the same heartbeat for 5 s with nothing being read (the machine's load is shared).
    EventLoopProbe idle(10);
    idle.start();
    QTest::qWait(5000);
    idle.stop();
    qInfo("idle GUI heartbeat 10 ms: %d ticks, lateness max %.1f ms, p99 %.1f ms, p50 %.1f ms", idle.ticks(),
          idle.maxDelayMs(), idle.percentileDelayMs(99), idle.percentileDelayMs(50));
    EventLoopProbe probe(10);
    int progress_updates = 0;
    connect(w->library(), &QAbstractItemModel::dataChanged, this, [&progress_updates] { ++progress_updates; });
    QElapsedTimer clock;
    clock.start();
    probe.start();
    QVERIFY(sl::test::drop_files(w.get(), {path}));
    QTRY_VERIFY_WITH_TIMEOUT(sl::test::state_of(w->library(), path) == ItemState::Ready ||
                                 sl::test::state_of(w->library(), path) == ItemState::Failed,
                             1100000);
    probe.stop();
    const double seconds = static_cast<double>(clock.elapsed()) / 1000.0;
    const LibraryItem* it = sl::test::item_of(w->library(), path);
    QVERIFY(it != nullptr);
    QVERIFY2(it->state == ItemState::Ready, qPrintable(it->error));
    QCOMPARE(it->document->units.size(), size_t{2415});
    qInfo("refman.pdf ingested in %.1f s (%zu pages); GUI heartbeat 10 ms: %d ticks, lateness max %.1f ms, "
          "p99 %.1f ms, p50 %.1f ms; %d progress updates (%.1f per second)",
          seconds, it->document->units.size(), probe.ticks(), probe.maxDelayMs(), probe.percentileDelayMs(99),
          probe.percentileDelayMs(50), progress_updates, progress_updates / seconds);
    // The GUI thread ran all along: a tick at least every second on average.
    QVERIFY(probe.ticks() > static_cast<int>(seconds));
    QVERIFY(progress_updates > 2);
}

QTEST_MAIN(TstDesktopResponsiveness)
#include "tst_desktop_responsiveness.moc"
