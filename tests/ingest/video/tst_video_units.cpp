// The media reader's pure pieces (subtitle parsers, ASS stripping, sidecar discovery, the frame
// sampler) and the reader on small clips this test makes with the ffmpeg CLI: chapters, title,
// thumbnails, memory input, audio-only files, cancellation, and hostile inputs (random bytes,
// truncated MP4s, absurd dimensions, absurd duration, no streams).
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>

#include "ingest/audio/audio_reader.h"
#include "ingest/ingest_error.h"
#include "ingest/video/frame_sampler.h"
#include "ingest/video/media_input.h"
#include "ingest/video/media_reader.h"
#include "ingest/video/subtitles.h"
#include "ingest/video/video_reader.h"
#include "tests/common/test_support.h"
#include "tests/ingest/video/media_fixture.h"

using sl::ingest::IngestContext;
using sl::ingest::IngestError;
using sl::ingest::IngestErrorKind;
using sl::ingest::IngestOptions;

namespace {

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

bool write_all(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

// The kind of IngestError reading `path` throws, or nullopt when it reads.
std::optional<IngestErrorKind> read_error(const QString& path, IngestOptions o = {},
                                          std::string* message = nullptr) {
    o.transcribe = false;
    IngestContext ctx(o);
    try {
        (void)sl::ingest::read_media_file(path.toStdString(), ctx);
    } catch (const IngestError& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    return std::nullopt;
}

bool is_jpeg(const std::vector<uint8_t>& b) {
    return b.size() > 4 && b[0] == 0xFF && b[1] == 0xD8 && b[b.size() - 2] == 0xFF &&
           b[b.size() - 1] == 0xD9;
}

}  // namespace

class TstVideoUnits : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void parseTimestamp_data();
    void parseTimestamp();
    void parseSrt();
    void parseVtt();
    void assEventText();
    void toUtf8();
    void sidecarDiscovery();
    void samplerHonoursCap_data();
    void samplerHonoursCap();
    void samplerPrefersShotChanges();
    void timeLabel();
    void dimensionCheck();
    void chaptersTitleThumbnails();
    void memoryInputMatchesFile();
    void audioOnlyFile();
    void cancellation();
    void randomBytesNamedMp4();
    void truncatedMp4();
    void hugeDimensions();
    void absurdDuration();
    void noStreams();
    void playlistsNamed();
    void hugeRiffTag_data();
    void hugeRiffTag();

private:
    QTemporaryDir dir_;
    QString clip_;  // 6 s, 96x64, 10 fps, two chapters, a title tag
    QString path(const char* name) const { return dir_.filePath(QString::fromLatin1(name)); }
};

void TstVideoUnits::initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(write_all(path("chapters.txt"),
                      ";FFMETADATA1\ntitle=Test Clip\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\n"
                      "END=2500\ntitle=Opening\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=2500\n"
                      "END=6000\ntitle=Second part\n"));
    clip_ = path("clip.mkv");
    const QString err = sl::test::run_ffmpeg(
        {QStringLiteral("-f"), QStringLiteral("lavfi"), QStringLiteral("-i"),
         QStringLiteral("testsrc=size=96x64:rate=10:duration=6"), QStringLiteral("-i"),
         path("chapters.txt"), QStringLiteral("-map"), QStringLiteral("0"),
         QStringLiteral("-map_metadata"), QStringLiteral("1"), QStringLiteral("-map_chapters"),
         QStringLiteral("1"), QStringLiteral("-c:v"), QStringLiteral("mpeg4"), QStringLiteral("-g"),
         QStringLiteral("10"), clip_});
    QVERIFY2(err.isEmpty(), qPrintable(err));
}

void TstVideoUnits::parseTimestamp_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<double>("seconds");
    QTest::newRow("srt") << QStringLiteral("01:02:03,456") << 3723.456;
    QTest::newRow("vtt") << QStringLiteral("00:00:07.250") << 7.25;
    QTest::newRow("vtt-short") << QStringLiteral("02:05.5") << 125.5;
    QTest::newRow("padded") << QStringLiteral("  00:00:01,000 ") << 1.0;
    QTest::newRow("minutes-60") << QStringLiteral("00:60:00.000") << -1.0;
    QTest::newRow("garbage") << QStringLiteral("12:ab:00") << -1.0;
    QTest::newRow("empty") << QString() << -1.0;
    QTest::newRow("no-fraction-digits") << QStringLiteral("00:00:01,") << -1.0;
}

void TstVideoUnits::parseTimestamp() {
    QFETCH(QString, text);
    QFETCH(double, seconds);
    QCOMPARE(sl::ingest::parse_timestamp(text.toStdString()), seconds);
}

void TstVideoUnits::parseSrt() {
    const std::string srt =
        "\xEF\xBB\xBF"
        "1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello</i> there\r\nsecond line\r\n\r\n"
        "2\n00:00:03,000 --> 00:00:04,000 X1:0\n{\\an8}Top &amp; tail\n\n"
        "3\nnot a timing line\nlost\n\n"
        "00:00:05,000 --> 00:00:06,000\nno index\n\n"
        "5\n00:00:07,000 --> 00:00:08,000\n\n";
    const auto cues = sl::ingest::parse_srt(srt);
    QCOMPARE(cues.size(), size_t{3});
    QCOMPARE(QString::fromStdString(cues[0].text), QStringLiteral("Hello there\nsecond line"));
    QCOMPARE(cues[0].time->t0, 1.0);
    QCOMPARE(cues[0].time->t1, 2.5);
    QCOMPARE(cues[0].role, sl::doc::BlockRole::Subtitle);
    QCOMPARE(QString::fromStdString(cues[1].text), QStringLiteral("Top & tail"));
    QCOMPARE(QString::fromStdString(cues[2].text), QStringLiteral("no index"));
    QCOMPARE(cues[2].time->t0, 5.0);
}

void TstVideoUnits::parseVtt() {
    const std::string vtt =
        "WEBVTT - a title\n\nNOTE this is a comment\nover two lines\n\n"
        "STYLE\n::cue { color: yellow }\n\n"
        "intro\n00:01.000 --> 00:02.000 align:start position:10%\n<v Bob>Hi <c.loud>all</c>\n\n"
        "00:00:03.500 --> 00:00:05.000\nkaraoke <00:00:04.000>timed &lt;3\n";
    const auto cues = sl::ingest::parse_vtt(vtt);
    QCOMPARE(cues.size(), size_t{2});
    QCOMPARE(QString::fromStdString(cues[0].text), QStringLiteral("Hi all"));
    QCOMPARE(cues[0].time->t0, 1.0);
    QCOMPARE(cues[0].time->t1, 2.0);
    QCOMPARE(QString::fromStdString(cues[1].text), QStringLiteral("karaoke timed <3"));
    QCOMPARE(cues[1].time->t0, 3.5);
}

void TstVideoUnits::assEventText() {
    using sl::ingest::ass_event_text;
    QCOMPARE(
        QString::fromStdString(ass_event_text("0,0,Default,,0,0,0,,{\\i1}Hello{\\i0}\\Nworld")),
        QStringLiteral("Hello\nworld"));
    QCOMPARE(QString::fromStdString(
                 ass_event_text("Dialogue: 0,0:00:01.00,0:00:02.00,Default,Bob,0,0,0,,a,b\\hc")),
             QStringLiteral("a,b c"));
    QCOMPARE(QString::fromStdString(ass_event_text("too,few,fields")), QString());
    QCOMPARE(QString::fromStdString(ass_event_text("0,0,Default,,0,0,0,,{unclosed")), QString());
}

void TstVideoUnits::toUtf8() {
    QCOMPARE(sl::ingest::to_utf8("caf\xC3\xA9"), std::string("caf\xC3\xA9"));
    QCOMPARE(sl::ingest::to_utf8("caf\xE9"), std::string("caf\xC3\xA9"));  // Latin-1
    QCOMPARE(sl::ingest::to_utf8("\xEF\xBB\xBFx"), std::string("x"));
    QCOMPARE(sl::ingest::to_utf8("\xE2\x82"), std::string("\xC3\xA2\xC2\x82"));  // cut sequence
}

void TstVideoUnits::sidecarDiscovery() {
    QTemporaryDir d;
    for (const char* n : {"movie.mkv", "movie.srt", "movie.en.srt", "movie.fr.VTT", "movie2.srt",
                          "movies.srt", "other.vtt", "movie.txt"})
        QVERIFY(write_all(d.filePath(QString::fromLatin1(n)), "x"));
    const auto found =
        sl::ingest::find_sidecar_subtitles(d.filePath(QStringLiteral("movie.mkv")).toStdString());
    QStringList names;
    for (const auto& f : found) names << QString::fromStdString(f).section(QLatin1Char('/'), -1);
    QCOMPARE(names, (QStringList{QStringLiteral("movie.en.srt"), QStringLiteral("movie.fr.VTT"),
                                 QStringLiteral("movie.srt")}));
}

void TstVideoUnits::samplerHonoursCap_data() {
    QTest::addColumn<double>("cap");
    QTest::addColumn<double>("duration");
    QTest::addColumn<double>("fps");
    for (double cap : {1.0, 2.0, 6.0, 30.0, 120.0})
        for (double dur : {5.0, 79.5, 601.0})
            QTest::addRow("cap%g-dur%g", cap, dur) << cap << dur << 25.0;
    QTest::addRow("unknown-duration") << 6.0 << 0.0 << 10.0;
}

void TstVideoUnits::samplerHonoursCap() {
    QFETCH(double, cap);
    QFETCH(double, duration);
    QFETCH(double, fps);
    sl::ingest::FrameSampler s({cap, duration, 0.12});
    std::vector<uint8_t> small(sl::ingest::FrameSampler::kSmallW *
                               sl::ingest::FrameSampler::kSmallH);
    std::uniform_int_distribution<int> shot(0, 200);
    const double length = duration > 0 ? duration : 120.0;
    std::vector<double> kept;
    double pending = -1;
    for (int i = 0; i / fps < length; ++i) {
        const double t = i / fps;
        if (shot(sl::test::rng()) == 0)  // random shot changes
            for (auto& b : small) b = static_cast<uint8_t>(sl::test::rng()() & 0xff);
        const auto d = s.offer(t, small);
        if (d.emit_pending) kept.push_back(pending);
        if (d.take) pending = t;
    }
    if (s.finish()) kept.push_back(pending);
    const double budget = duration > 0 ? std::max(1.0, std::floor(cap * duration / 60)) : 12.0;
    QVERIFY2(kept.size() <= budget,
             qPrintable(QStringLiteral("%1 > %2").arg(kept.size()).arg(budget)));
    QVERIFY(kept.size() >= std::min(budget, 1.0));
    for (size_t i = 1; i < kept.size(); ++i) QVERIFY(kept[i] > kept[i - 1]);
    // Evenly spread: every slot holds one frame (frames are dense here).
    QCOMPARE(static_cast<double>(kept.size()), budget);
}

void TstVideoUnits::samplerPrefersShotChanges() {
    sl::ingest::FrameSampler s({6.0, 60.0, 0.12});  // 6 slots of 10 s
    std::vector<uint8_t> small(
        sl::ingest::FrameSampler::kSmallW * sl::ingest::FrameSampler::kSmallH, 40);
    std::vector<double> kept;
    double pending = -1;
    for (int i = 0; i < 600; ++i) {
        const double t = i / 10.0;
        if (i == 133) std::fill(small.begin(), small.end(), uint8_t{200});  // a cut at 13.3 s
        if (i == 471) std::fill(small.begin(), small.end(), uint8_t{90});   // and at 47.1 s
        const auto d = s.offer(t, small);
        if (d.emit_pending) kept.push_back(pending);
        if (d.take) pending = t;
    }
    if (s.finish()) kept.push_back(pending);
    QCOMPARE(kept.size(), size_t{6});
    QCOMPARE(kept[0], 0.0);
    QVERIFY(std::abs(kept[1] - 13.3) < 1e-9);
    QCOMPARE(kept[2], 20.0);
    QVERIFY(std::abs(kept[4] - 47.1) < 1e-9);
    QCOMPARE(s.cuts_seen(), 3);  // the first frame counts as one
}

void TstVideoUnits::timeLabel() {
    QCOMPARE(sl::ingest::time_label(0), std::string("00:00:00"));
    QCOMPARE(sl::ingest::time_label(3723.9), std::string("01:02:03"));
    QCOMPARE(sl::ingest::time_label(-5), std::string("00:00:00"));
}

void TstVideoUnits::dimensionCheck() {
    using sl::ingest::MediaInput;
    MediaInput::check_dimensions("x.mkv", 0, 16384, 16384, 16384);
    try {
        MediaInput::check_dimensions("x.mkv", 0, 100000, 100000, 16384);
        QFAIL("no error");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::TooLarge);
        QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("100000x100000")));
    }
}

void TstVideoUnits::chaptersTitleThumbnails() {
    IngestOptions o;
    o.max_frames_per_minute = 30;  // 3 slots of 2 s
    IngestContext ctx(o);
    const auto reader = sl::ingest::make_video_reader();
    QVERIFY(reader->sniff(read_all(clip_).left(64).toStdString()));
    const sl::doc::Document d = reader->read(clip_.toStdString(), ctx);
    QCOMPARE(d.kind, sl::doc::DocumentKind::Video);
    QCOMPARE(QString::fromStdString(d.title), QStringLiteral("Test Clip"));
    QVERIFY(std::abs(d.duration - 6.0) < 0.15);
    QCOMPARE(d.metadata.at("video_codec"), std::string("mpeg4"));
    QCOMPARE(d.metadata.at("width"), std::string("96"));
    QCOMPARE(d.metadata.at("fps"), std::string("10.000"));
    QCOMPARE(d.outline.size(), size_t{2});
    QCOMPARE(QString::fromStdString(d.outline[1].title), QStringLiteral("Second part"));
    QVERIFY(std::abs(*d.outline[1].time - 2.5) < 1e-6);
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(d.units[0].kind, sl::doc::UnitKind::Segment);
    QCOMPARE(QString::fromStdString(d.units[0].label), QStringLiteral("00:00:00"));
    const auto frames = sl::test::all_frames(d);
    QCOMPARE(frames.size(), size_t{3});
    for (const auto& f : frames) {
        QCOMPARE(f.width, 96);
        QCOMPARE(f.height, 64);
        QCOMPARE(f.mime, std::string("image/jpeg"));
        QVERIFY(is_jpeg(f.encoded));
        QVERIFY(QString::fromStdString(f.locator).startsWith(QStringLiteral("frame:t=")));
    }
    // No thumbnails when not asked for.
    o.thumbnail_px = 0;
    IngestContext ctx2(o);
    const auto bare = sl::test::all_frames(reader->read(clip_.toStdString(), ctx2));
    QCOMPARE(bare.size(), size_t{3});
    QVERIFY(bare[0].encoded.empty());
}

void TstVideoUnits::memoryInputMatchesFile() {
    const QByteArray bytes = read_all(clip_);
    IngestContext a, b;
    const auto from_file = sl::ingest::read_media_file(clip_.toStdString(), a);
    const auto from_memory = sl::ingest::read_media_memory(
        std::span(reinterpret_cast<const uint8_t*>(bytes.constData()), size_t(bytes.size())),
        "clip.mkv", b);
    const auto fa = sl::test::all_frames(from_file), fb = sl::test::all_frames(from_memory);
    QCOMPARE(fa.size(), fb.size());
    for (size_t i = 0; i < fa.size(); ++i) QCOMPARE(*fa[i].timestamp, *fb[i].timestamp);
    QCOMPARE(from_memory.outline.size(), from_file.outline.size());
}

void TstVideoUnits::audioOnlyFile() {
    const QString wav = path("tone.wav");
    const QString err =
        sl::test::run_ffmpeg({QStringLiteral("-f"), QStringLiteral("lavfi"), QStringLiteral("-i"),
                              QStringLiteral("sine=frequency=440:duration=3"), wav});
    QVERIFY2(err.isEmpty(), qPrintable(err));
    const auto reader = sl::ingest::make_audio_reader();
    QVERIFY(reader->sniff(read_all(wav).left(64).toStdString()));
    QVERIFY(!sl::ingest::make_video_reader()->sniff(read_all(wav).left(64).toStdString()));
    IngestOptions o;
    o.transcribe = false;
    IngestContext ctx(o);
    const auto d = reader->read(wav.toStdString(), ctx);
    QCOMPARE(d.kind, sl::doc::DocumentKind::Audio);
    QVERIFY(std::abs(d.duration - 3.0) < 0.05);
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(d.metadata.at("audio_codec"), std::string("pcm_s16le"));
}

void TstVideoUnits::cancellation() {
    std::atomic<bool> cancel{true};
    IngestContext pre({}, {}, &cancel);
    try {
        (void)sl::ingest::read_media_file(clip_.toStdString(), pre);
        QFAIL("no error");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::Cancelled);
    }
    // Cancelled from the progress callback, mid-read.
    cancel = false;
    std::vector<double> seen;
    IngestContext mid(
        {},
        [&](double f, const std::string&) {
            seen.push_back(f);
            cancel = true;
        },
        &cancel);
    try {
        (void)sl::ingest::read_media_file(clip_.toStdString(), mid);
        QFAIL("no error");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::Cancelled);
    }
    QCOMPARE(seen.size(), size_t{1});
    // Progress rises to 1.
    seen.clear();
    IngestContext full({}, [&](double f, const std::string&) { seen.push_back(f); });
    (void)sl::ingest::read_media_file(clip_.toStdString(), full);
    QVERIFY(!seen.empty());
    QCOMPARE(seen.back(), 1.0);
    QVERIFY(std::is_sorted(seen.begin(), seen.end()));
}

void TstVideoUnits::randomBytesNamedMp4() {
    // Rounds 4 and 5 begin with '[', which FFmpeg's prober once took for LRC lyrics (score 5).
    for (int round = 0; round < 6; ++round) {
        QByteArray junk(4096 << (round % 4), '\0');
        for (auto& c : junk) c = static_cast<char>(sl::test::rng()() & 0xff);
        if (round >= 4) junk[0] = '[';
        const QString p = path("junk.mp4");
        QVERIFY(write_all(p, junk));
        std::string msg;
        const auto kind = read_error(p, {}, &msg);
        QVERIFY2(kind == IngestErrorKind::Unsupported || kind == IngestErrorKind::Corrupt,
                 kind ? msg.c_str() : "read random bytes as media");
        QVERIFY(QString::fromStdString(msg).contains(QStringLiteral("junk.mp4")));
    }
}

void TstVideoUnits::truncatedMp4() {
    for (const bool faststart : {false, true}) {
        const QString full = path(faststart ? "fast.mp4" : "slow.mp4");
        QStringList args{QStringLiteral("-i"),   clip_,
                         QStringLiteral("-c:v"), QStringLiteral("mpeg4"),
                         QStringLiteral("-g"),   QStringLiteral("10")};
        if (faststart) args << QStringLiteral("-movflags") << QStringLiteral("+faststart");
        const QString err = sl::test::run_ffmpeg(args << full);
        QVERIFY2(err.isEmpty(), qPrintable(err));
        const QByteArray bytes = read_all(full);
        const QString cut = path(faststart ? "fast-cut.mp4" : "slow-cut.mp4");
        QVERIFY(write_all(cut, bytes.left(bytes.size() / 2)));
        std::string msg;
        const auto kind = read_error(cut, {}, &msg);
        if (!faststart) {  // the index (moov) is at the end: gone
            QCOMPARE(kind, std::optional(IngestErrorKind::Corrupt));
            QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("truncated")),
                     msg.c_str());
        } else {  // index first: what is there reads
            QVERIFY2(!kind, msg.c_str());
            IngestOptions o;
            o.transcribe = false;
            o.max_frames_per_minute = 600;
            IngestContext ctx(o);
            const auto d = sl::ingest::read_media_file(cut.toStdString(), ctx);
            const auto frames = sl::test::all_frames(d);
            QVERIFY(!frames.empty());
            QVERIFY(*frames.back().timestamp < 4.0);
        }
    }
}

void TstVideoUnits::hugeDimensions() {
    // Matroska: PixelWidth/PixelHeight patched to 65535 (2-byte fields of a 320x256 clip).
    const QString mkv = path("big.mkv");
    QString err =
        sl::test::run_ffmpeg({QStringLiteral("-f"), QStringLiteral("lavfi"), QStringLiteral("-i"),
                              QStringLiteral("testsrc=size=320x256:rate=5:duration=1"),
                              QStringLiteral("-c:v"), QStringLiteral("mpeg4"), mkv});
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QByteArray bytes = read_all(mkv);
    const int w = bytes.indexOf(QByteArray("\xB0\x82\x01\x40", 4));
    const int h = bytes.indexOf(QByteArray("\xBA\x82\x01\x00", 4));
    QVERIFY(w > 0 && h > 0);
    bytes[w + 2] = '\xFF';
    bytes[w + 3] = '\xFF';
    bytes[h + 2] = '\xFF';
    bytes[h + 3] = '\xFF';
    QVERIFY(write_all(mkv, bytes));
    std::string msg;
    QCOMPARE(read_error(mkv, {}, &msg), std::optional(IngestErrorKind::TooLarge));
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("65535x65535")), msg.c_str());

    // AVI: the 32-bit sizes of the main header and the stream format patched to 100000x100000.
    const QString avi = path("big.avi");
    err = sl::test::run_ffmpeg({QStringLiteral("-f"), QStringLiteral("lavfi"), QStringLiteral("-i"),
                                QStringLiteral("testsrc=size=64x48:rate=5:duration=1"),
                                QStringLiteral("-c:v"), QStringLiteral("mpeg4"), avi});
    QVERIFY2(err.isEmpty(), qPrintable(err));
    bytes = read_all(avi);
    const QByteArray huge("\xA0\x86\x01\x00", 4);  // 100000, little-endian
    const int avih = bytes.indexOf("avih");
    const int strf = bytes.indexOf("strf");
    QVERIFY(avih > 0 && strf > 0);
    bytes.replace(avih + 8 + 32, 4, huge);  // dwWidth
    bytes.replace(avih + 8 + 36, 4, huge);  // dwHeight
    bytes.replace(strf + 8 + 4, 4, huge);   // biWidth
    bytes.replace(strf + 8 + 8, 4, huge);   // biHeight
    QVERIFY(write_all(avi, bytes));
    QCOMPARE(read_error(avi, {}, &msg), std::optional(IngestErrorKind::TooLarge));
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("100000x100000")), msg.c_str());
}

void TstVideoUnits::absurdDuration() {
    IngestOptions o;
    o.max_duration_s = 2.0;
    std::string msg;
    QCOMPARE(read_error(clip_, o, &msg), std::optional(IngestErrorKind::TooLarge));
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("duration")), msg.c_str());
}

void TstVideoUnits::noStreams() {
    const QString meta = path("empty.ffmeta");  // FFmpeg's metadata format: a container, no streams
    QVERIFY(write_all(meta, ";FFMETADATA1\ntitle=nothing\n"));
    std::string msg;
    QCOMPARE(read_error(meta, {}, &msg), std::optional(IngestErrorKind::Unsupported));
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("no audio, video")), msg.c_str());
    const QString empty = path("empty.mp4");
    QVERIFY(write_all(empty, QByteArray()));
    const auto kind = read_error(empty, {}, &msg);
    QVERIFY2(kind == IngestErrorKind::Corrupt, kind ? msg.c_str() : "read an empty file");
    QVERIFY2(QString::fromStdString(msg).endsWith(QStringLiteral("empty.mp4: the file is empty")),
             msg.c_str());
}

void TstVideoUnits::playlistsNamed() {
    // An HLS playlist points at segments: refused by name, with the segment it wanted.
    const QString m3u8 = path("talk.m3u8");
    QVERIFY(write_all(m3u8, "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
                            "#EXTINF:2.0,\nsegment-000.ts\n#EXT-X-ENDLIST\n"));
    QVERIFY(sl::ingest::make_video_reader()->extensions().size() > 0);
    const auto e = sl::ingest::make_video_reader()->extensions();
    QVERIFY(std::find(e.begin(), e.end(), std::string("m3u8")) != e.end());
    std::string msg;
    QCOMPARE(read_error(m3u8, {}, &msg), std::optional(IngestErrorKind::Unsupported));
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("segment-000.ts")), msg.c_str());
    QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("add the media file itself")),
             msg.c_str());
    QVERIFY2(!QString::fromStdString(msg).contains(QStringLiteral("damaged")), msg.c_str());
}

void TstVideoUnits::hugeRiffTag_data() {
    QTest::addColumn<quint32>("tag_bytes");
    // Smallest first: the check is on the process's peak, which an earlier row would raise.
    QTest::newRow("400 MB") << quint32{400u << 20};
    QTest::newRow("842 MB (fuzz_video's)") << quint32{0x322E3137u};
    QTest::newRow("1.8 GB") << quint32{0x70000000u};
}

// A WAV whose LIST/INFO tag claims hundreds of MB: FFmpeg would allocate (and zero) it before
// reading; the allocation cap refuses it, and the sound still reads.
void TstVideoUnits::hugeRiffTag() {
    QFETCH(quint32, tag_bytes);
    auto le32 = [](uint32_t v) {
        QByteArray b(4, '\0');
        for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
        return b;
    };
    const QByteArray pcm(16000, '\0');  // a second of 8 kHz 16-bit silence
    const QByteArray fmt = QByteArray::fromHex("01000100401f0000803e000002001000");
    const QByteArray info = QByteArray("INFOINAM") + le32(tag_bytes) + QByteArray(64, 'a');
    const QByteArray body = QByteArray("WAVEfmt ") + le32(16) + fmt + "data" + le32(16000) + pcm +
                            "LIST" + le32(0xFFFFFFFDu) + info;
    const QString wav = path("tagged.wav");
    QVERIFY(write_all(wav, QByteArray("RIFF") + le32(static_cast<uint32_t>(body.size())) + body));
    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    IngestOptions o;
    o.transcribe = false;
    IngestContext ctx(o);
    std::string msg;
    try {
        (void)sl::ingest::make_audio_reader()->read(wav.toStdString(), ctx);
    } catch (const IngestError& e) {
        msg = e.what();  // refusing it by name is fine too; running away with memory is not
        QVERIFY2(QString::fromStdString(msg).contains(QStringLiteral("tagged.wav")), msg.c_str());
    }
    rusage after{};
    getrusage(RUSAGE_SELF, &after);
    const long grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024;  // ru_maxrss is in KiB
    QVERIFY2(grown_mb < 256, qPrintable(QStringLiteral("peak memory grew by %1 MB").arg(grown_mb)));
}

QTEST_GUILESS_MAIN(TstVideoUnits)
#include "tst_video_units.moc"
