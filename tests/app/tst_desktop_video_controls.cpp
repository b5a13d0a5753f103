// The video player's controls as a viewer of a long recording uses them: the strip of sampled
// frames and the transcript beside the player (filled from the document, following playback,
// seeking on a click), frame steps, playback speed and volume. On vtest.avi as ingest reads it,
// with a transcript added to the document.
#include <QAudioOutput>
#include <QComboBox>
#include <QListWidget>
#include <QMediaPlayer>
#include <QTest>

#include "app/desktop/video_panels.h"
#include "app/desktop/video_view.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopVideoControls : public QObject {
    Q_OBJECT

    std::shared_ptr<const sl::doc::Document> doc_;

private Q_SLOTS:
    void initTestCase() {
        if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND")) qputenv("QT_MEDIA_BACKEND", "ffmpeg");
        REQUIRE_ASSET(avi, "samples/video/vtest.avi");
        sl::ingest::IngestOptions o;
        o.ocr = false;
        sl::ingest::IngestContext ctx(o);
        sl::doc::Document d = sl::ingest::read_document(avi.string(), ctx);
        // A transcript, as speech to text or subtitles would give it.
        sl::doc::Unit u;
        u.kind = sl::doc::UnitKind::Segment;
        u.index = static_cast<int>(d.units.size());
        for (double t : {10.0, 30.0, 50.0}) {
            sl::doc::Block b;
            b.role = sl::doc::BlockRole::Transcript;
            b.text = "said at " + std::to_string(static_cast<int>(t));
            b.time = sl::doc::TimeRange{t, t + 5};
            u.blocks.push_back(b);
        }
        d.units.push_back(u);
        doc_ = std::make_shared<const sl::doc::Document>(std::move(d));
    }

    void panelsFollowAndSeek() {
        VideoView v;
        v.resize(900, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showAt(doc_, 0, {});
        QVERIFY(v.frameStrip()->isVisible());
        QVERIFY2(v.frameStrip()->count() >= 4, qPrintable(QString::number(v.frameStrip()->count())));
        QVERIFY(!v.frameStrip()->item(0)->icon().isNull());
        QVERIFY(v.transcriptList()->isVisible());
        QCOMPARE(v.transcriptList()->count(), 3);
        QVERIFY(v.transcriptList()->item(1)->text().contains(QStringLiteral("said at 30")));
        QTRY_VERIFY_WITH_TIMEOUT(v.shownFrameTime() >= 0 && !v.playing(), 30000);

        // A click on a transcript row seeks there, and the row follows the time.
        QListWidgetItem* row = v.transcriptList()->item(1);
        Q_EMIT v.transcriptList()->itemClicked(row);
        QTRY_VERIFY_WITH_TIMEOUT(std::abs(v.shownFrameTime() - 30.0) < 1.0, 30000);
        QCOMPARE(v.transcriptList()->currentRow(), 1);
        // A click on a frame of the strip seeks to it.
        QListWidgetItem* frame = v.frameStrip()->item(v.frameStrip()->count() - 1);
        const double t = frame->data(Qt::UserRole).toDouble();
        Q_EMIT v.frameStrip()->itemClicked(frame);
        QTRY_VERIFY_WITH_TIMEOUT(std::abs(v.shownFrameTime() - t) < 1.0, 30000);
        QCOMPARE(v.frameStrip()->currentRow(), v.frameStrip()->count() - 1);
        QCOMPARE(v.transcriptList()->currentRow(), row_at(v.transcriptList(), v.shownFrameTime()));
    }

    void stepsSpeedVolume() {
        VideoView v;
        v.resize(900, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showAt(doc_, 20.0, {});
        QTRY_VERIFY_WITH_TIMEOUT(std::abs(v.shownFrameTime() - 20.0) < 1.0 && !v.playing(), 30000);
        const double at = v.shownFrameTime();
        const double step = frame_interval(*doc_);
        QVERIFY(step > 0.001 && step < 0.5);
        v.stepFrames(5);
        QTRY_VERIFY_WITH_TIMEOUT(v.shownFrameTime() > at + step, 30000);
        QVERIFY2(std::abs(v.shownFrameTime() - (at + 5 * step)) <= 2 * step + 0.05,
                 qPrintable(QStringLiteral("%1 -> %2").arg(at).arg(v.shownFrameTime())));
        QVERIFY(!v.playing());
        const double later = v.shownFrameTime();
        v.stepFrames(-10);
        QTRY_VERIFY_WITH_TIMEOUT(v.shownFrameTime() < later - step, 30000);

        v.setRate(1.5);
        QCOMPARE(v.player()->playbackRate(), 1.5);
        QCOMPARE(v.findChild<QComboBox*>()->currentData().toDouble(), 1.5);
        v.setRate(9);
        QCOMPARE(v.rate(), 4.0);
        v.setVolume(30);
        QVERIFY(std::abs(v.player()->audioOutput()->volume() - 0.3f) < 1e-3);
    }
};

QTEST_MAIN(TstDesktopVideoControls)
#include "tst_desktop_video_controls.moc"
