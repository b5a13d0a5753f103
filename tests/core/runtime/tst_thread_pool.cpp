// parallel_for covers every index exactly once, for many sizes and grains, across many loops.
#include <QTest>

#include <atomic>
#include <vector>

#include "core/runtime/thread_pool.h"

class TstThreadPool : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void coversEachIndexOnce_data();
    void coversEachIndexOnce();
    void manySmallLoops();
    void runOnAll();
};

void TstThreadPool::coversEachIndexOnce_data() {
    QTest::addColumn<int>("threads");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("grain");
    for (int t : {1, 2, 3, 5})
        for (int n : {1, 2, 7, 64, 1001})
            for (int g : {1, 4, 32}) QTest::addRow("t%d n%d g%d", t, n, g) << t << n << g;
}

void TstThreadPool::coversEachIndexOnce() {
    QFETCH(int, threads);
    QFETCH(int, n);
    QFETCH(int, grain);
    sl::ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
        QVERIFY(t >= 0 && t < threads);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    }, grain);
    for (auto& h : hits) QCOMPARE(h.load(), 1);
}

void TstThreadPool::manySmallLoops() {
    sl::ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    for (int round = 0; round < 5000; ++round)
        pool.parallel_for(9, [&](int64_t b, int64_t e, int) { total.fetch_add(e - b); });
    QCOMPARE(total.load(), int64_t{9 * 5000});
}

void TstThreadPool::runOnAll() {
    sl::ThreadPool pool(4);
    std::vector<std::atomic<int>> seen(4);
    pool.run_on_all([&](int t) { seen[static_cast<size_t>(t)].fetch_add(1); });
    for (auto& s : seen) QCOMPARE(s.load(), 1);
}

QTEST_APPLESS_MAIN(TstThreadPool)
#include "tst_thread_pool.moc"
