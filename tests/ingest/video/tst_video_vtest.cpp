// The video reader on a real video by other authors: OpenCV's vtest.avi (79.5 s, 768x576,
// MS-MPEG4v3, 10 fps, no audio; cached by scripts/setup.sh). Frame sampling under several caps.
#include <QElapsedTimer>
#include <QTest>

#include <cmath>

#include "ingest/video/video_reader.h"
#include "tests/common/test_support.h"
#include "tests/ingest/video/media_fixture.h"

class TstVideoVtest : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void framesUnderCap_data();
    void framesUnderCap();
};

void TstVideoVtest::framesUnderCap_data() {
    QTest::addColumn<double>("cap");
    QTest::newRow("2/min") << 2.0;
    QTest::newRow("6/min") << 6.0;
    QTest::newRow("30/min") << 30.0;
}

void TstVideoVtest::framesUnderCap() {
    QFETCH(double, cap);
    REQUIRE_ASSET(p, "samples/video/vtest.avi");
    sl::ingest::IngestOptions o;
    o.max_frames_per_minute = cap;
    sl::ingest::IngestContext ctx(o);
    const auto reader = sl::ingest::make_video_reader();
    QElapsedTimer timer;
    timer.start();
    const sl::doc::Document d = reader->read(p.string(), ctx);
    const double seconds = static_cast<double>(timer.nsecsElapsed()) * 1e-9;

    QCOMPARE(d.kind, sl::doc::DocumentKind::Video);
    QVERIFY2(std::abs(d.duration - 79.5) < 0.11, qPrintable(QString::number(d.duration)));
    QCOMPARE(d.metadata.at("video_codec"), std::string("msmpeg4v3"));
    QCOMPARE(d.metadata.at("width"), std::string("768"));
    QCOMPARE(d.metadata.at("height"), std::string("576"));
    QCOMPARE(d.metadata.at("fps"), std::string("10.000"));
    QCOMPARE(d.metadata.at("corrupt_packets"), std::string("0"));
    QVERIFY(d.metadata.count("audio_codec") == 0);

    QCOMPARE(d.units.size(), size_t{3});  // 30 s segments
    const char* labels[] = {"00:00:00", "00:00:30", "00:01:00"};
    for (size_t i = 0; i < d.units.size(); ++i) {
        const auto& u = d.units[i];
        QCOMPARE(u.kind, sl::doc::UnitKind::Segment);
        QCOMPARE(u.label, std::string(labels[i]));
        QCOMPARE(u.time->t0, 30.0 * static_cast<double>(i));
        for (const auto& v : u.visuals) {
            QVERIFY(*v.timestamp >= u.time->t0 && *v.timestamp < u.time->t1);
            QCOMPARE(v.width, 768);
            QCOMPARE(v.height, 576);
            QVERIFY(!v.encoded.empty());
        }
    }
    QCOMPARE(d.units.back().time->t1, d.duration);

    const auto frames = sl::test::all_frames(d);
    const double budget = std::max(1.0, std::floor(cap * d.duration / 60.0));
    qInfo("cap %.0f/min: %zu frames (budget %.0f), %lld decoded, %.2f s (%.0fx realtime)", cap,
          frames.size(), budget, std::atoll(d.metadata.at("decoded_frames").c_str()), seconds,
          d.duration / seconds);
    QVERIFY(static_cast<double>(frames.size()) <= budget);
    QVERIFY(static_cast<double>(frames.size()) >= budget / 2);
    double prev = -1;
    for (const auto& f : frames) {
        QVERIFY(*f.timestamp > prev);
        QVERIFY(*f.timestamp >= 0 && *f.timestamp < d.duration);
        // Exact presentation times of a 10 fps stream: multiples of 0.1 s.
        QVERIFY(std::abs(*f.timestamp * 10 - std::round(*f.timestamp * 10)) < 1e-6);
        prev = *f.timestamp;
    }
}

QTEST_GUILESS_MAIN(TstVideoVtest)
#include "tst_video_vtest.moc"
