// Subtitles and speech on a video this test derives from real speech: the LibriVox clips of
// pocketsphinx-testdata (cached by scripts/setup.sh) concatenated with pauses as the audio track, a
// generated picture, and a subtitle track written from the reference transcripts. Checks the
// embedded subtitles (mov_text in MP4, SubRip in MKV) and a sidecar .srt come back at the right
// times with the right text, and reports the transcript's word error rate against the reference
// (Whisper when installed, pocketsphinx as the fallback, each engine named in the document).
#include <QElapsedTimer>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>

#include "ingest/audio/whisper_speech.h"
#include "ingest/video/video_reader.h"
#include "tests/common/test_support.h"
#include "tests/ingest/video/media_fixture.h"

namespace {

struct Clip {
    QString wav;
    QString text;  // reference transcript
    double start = 0, duration = 0;
};

constexpr double kLead = 0.5, kGap = 0.6;  // seconds of silence before the first clip, between

// Duration of a 16-bit mono WAV from its data chunk; 0 when unreadable.
double wav_seconds(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return 0;
    const QByteArray b = f.readAll();
    const int data = b.indexOf("data", 12);
    if (data < 0 || data + 8 > b.size()) return 0;
    const auto* p = reinterpret_cast<const uint8_t*>(b.constData() + data + 4);
    const uint32_t bytes = p[0] | (p[1] << 8) | (p[2] << 16) | (uint32_t{p[3]} << 24);
    return std::min<double>(bytes, b.size() - data - 8) / (16000.0 * 2);
}

QString srt_time(double t) {
    const auto ms = static_cast<qint64>(std::llround(t * 1000));
    return QString::asprintf("%02lld:%02lld:%02lld,%03lld", ms / 3600000, ms / 60000 % 60,
                             ms / 1000 % 60, ms % 1000);
}

QStringList words(const QString& s) {
    QString t = s.toLower();
    t.replace(QRegularExpression(QStringLiteral("[^a-z' ]")), QStringLiteral(" "));
    return t.split(QLatin1Char(' '), Qt::SkipEmptyParts);
}

// Word error rate (edit distance / reference length) and the number of matched words (LCS).
std::pair<double, int> wer(const QStringList& ref, const QStringList& hyp) {
    const auto n = ref.size(), m = hyp.size();
    std::vector<std::vector<int>> e(n + 1, std::vector<int>(m + 1)),
        l(n + 1, std::vector<int>(m + 1));
    for (qsizetype i = 0; i <= n; ++i) e[i][0] = static_cast<int>(i);
    for (qsizetype j = 0; j <= m; ++j) e[0][j] = static_cast<int>(j);
    for (qsizetype i = 1; i <= n; ++i)
        for (qsizetype j = 1; j <= m; ++j) {
            const bool same = ref[i - 1] == hyp[j - 1];
            e[i][j] =
                std::min({e[i - 1][j] + 1, e[i][j - 1] + 1, e[i - 1][j - 1] + (same ? 0 : 1)});
            l[i][j] = same ? l[i - 1][j - 1] + 1 : std::max(l[i - 1][j], l[i][j - 1]);
        }
    return {n ? static_cast<double>(e[n][m]) / static_cast<double>(n) : 0.0, l[n][m]};
}

}  // namespace

class TstVideoSpeech : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void mp4MovTextAndTranscript();
    void mkvSubRip();
    void sidecarSrt();
    void sidecarTooBigIsNoted();
    void pocketsphinxFallback();

private:
    void check_subtitles(const sl::doc::Document& d);
    QTemporaryDir dir_;
    std::vector<Clip> clips_;
    double total_ = 0;
    QString mp4_, mkv_, bare_;
};

void TstVideoSpeech::initTestCase() {
    QVERIFY(dir_.isValid());
    REQUIRE_ASSET(tr, "samples/audio/librivox/transcription");
    QFile f(QString::fromStdString(tr.string()));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QRegularExpression line(QStringLiteral("^<s>(.*)</s>\\s*\\(([^)]+)\\)\\s*$"));
    double t = kLead;
    for (const QByteArray& raw : f.readAll().split('\n')) {
        const auto m = line.match(QString::fromUtf8(raw).trimmed());
        if (!m.hasMatch()) continue;
        REQUIRE_ASSET(wav, "samples/audio/librivox/" + m.captured(2).toStdString() + ".wav");
        Clip c{QString::fromStdString(wav.string()), m.captured(1).trimmed(), t, 0};
        c.duration = wav_seconds(c.wav);
        QVERIFY(c.duration > 1);
        t += c.duration + kGap;
        clips_.push_back(c);
    }
    QCOMPARE(clips_.size(), size_t{5});
    total_ = t;

    QString srt;
    for (size_t i = 0; i < clips_.size(); ++i)
        srt += QStringLiteral("%1\n%2 --> %3\n%4\n\n")
                   .arg(i + 1)
                   .arg(srt_time(clips_[i].start), srt_time(clips_[i].start + clips_[i].duration),
                        clips_[i].text);
    QFile s(dir_.filePath(QStringLiteral("subs.srt")));
    QVERIFY(s.open(QIODevice::WriteOnly));
    s.write(srt.toUtf8());
    s.close();

    QStringList in;
    QString chain, concat;
    for (size_t i = 0; i < clips_.size(); ++i) {
        in << QStringLiteral("-i") << clips_[i].wav;
        chain += QStringLiteral("[%1:a]%2apad=pad_dur=%3[a%1];")
                     .arg(i)
                     .arg(i == 0 ? QStringLiteral("adelay=%1,").arg(kLead * 1000) : QString())
                     .arg(kGap);
        concat += QStringLiteral("[a%1]").arg(i);
    }
    chain += concat + QStringLiteral("concat=n=%1:v=0:a=1[a]").arg(clips_.size());
    const QString n = QString::number(clips_.size());
    in << QStringLiteral("-f") << QStringLiteral("lavfi") << QStringLiteral("-i")
       << QStringLiteral("testsrc=size=320x240:rate=10:duration=%1").arg(total_)
       << QStringLiteral("-i") << s.fileName() << QStringLiteral("-filter_complex") << chain
       << QStringLiteral("-map") << n + QStringLiteral(":v") << QStringLiteral("-map")
       << QStringLiteral("[a]") << QStringLiteral("-map") << QString::number(clips_.size() + 1)
       << QStringLiteral("-c:v") << QStringLiteral("libx264") << QStringLiteral("-preset")
       << QStringLiteral("ultrafast") << QStringLiteral("-c:a") << QStringLiteral("aac");
    mp4_ = dir_.filePath(QStringLiteral("speech.mp4"));
    mkv_ = dir_.filePath(QStringLiteral("speech.mkv"));
    QString err = sl::test::run_ffmpeg(QStringList(in) << QStringLiteral("-c:s")
                                                       << QStringLiteral("mov_text") << mp4_);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    // Made from the sources too, with FLAC: AAC's priming delay would shift the whole Matroska
    // timeline (cues included) by 64 ms to keep timestamps non-negative.
    in.replace(in.lastIndexOf(QStringLiteral("aac")), QStringLiteral("flac"));
    err = sl::test::run_ffmpeg(QStringList(in)
                               << QStringLiteral("-c:s") << QStringLiteral("srt") << mkv_);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    // No subtitle stream, but a sidecar next to it.
    bare_ = dir_.filePath(QStringLiteral("lecture.mkv"));
    err =
        sl::test::run_ffmpeg({QStringLiteral("-i"), mkv_, QStringLiteral("-map"),
                              QStringLiteral("0:v"), QStringLiteral("-map"), QStringLiteral("0:a"),
                              QStringLiteral("-c"), QStringLiteral("copy"), bare_});
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QVERIFY(QFile::copy(s.fileName(), dir_.filePath(QStringLiteral("lecture.en.srt"))));
}

void TstVideoSpeech::check_subtitles(const sl::doc::Document& d) {
    const auto subs = sl::test::all_blocks(d, sl::doc::BlockRole::Subtitle);
    QCOMPARE(subs.size(), clips_.size());
    double worst = 0;
    for (size_t i = 0; i < subs.size(); ++i) {
        QCOMPARE(QString::fromStdString(subs[i].text), clips_[i].text);
        QVERIFY(subs[i].time);
        const double e0 = std::abs(subs[i].time->t0 - clips_[i].start);
        const double e1 = std::abs(subs[i].time->t1 - (clips_[i].start + clips_[i].duration));
        worst = std::max({worst, e0, e1});
        QVERIFY2(e0 <= 0.1 && e1 <= 0.1,
                 qPrintable(QStringLiteral("cue %1: %2..%3, expected %4..%5")
                                .arg(i)
                                .arg(subs[i].time->t0)
                                .arg(subs[i].time->t1)
                                .arg(clips_[i].start)
                                .arg(clips_[i].start + clips_[i].duration)));
        // Each cue sits in the segment that contains its start.
        bool placed = false;
        for (const auto& u : d.units)
            for (const auto& b : u.blocks)
                if (b.text == subs[i].text && b.role == sl::doc::BlockRole::Subtitle)
                    placed = placed || (u.time->t0 <= b.time->t0 && b.time->t0 < u.time->t1);
        QVERIFY(placed);
    }
    qInfo("%s: %zu subtitles, worst timing error %.4f s", d.path.c_str(), subs.size(), worst);
}

void TstVideoSpeech::mp4MovTextAndTranscript() {
    sl::ingest::IngestOptions o;
    o.transcribe = true;
    sl::ingest::IngestContext ctx(o);
    QElapsedTimer timer;
    timer.start();
    const auto d = sl::ingest::make_video_reader()->read(mp4_.toStdString(), ctx);
    const double seconds = static_cast<double>(timer.nsecsElapsed()) * 1e-9;
    QCOMPARE(d.kind, sl::doc::DocumentKind::Video);
    QVERIFY(std::abs(d.duration - total_) < 0.2);
    QCOMPARE(d.metadata.at("subtitle_codecs"), std::string("mov_text"));
    QCOMPARE(d.metadata.at("audio_codec"), std::string("aac"));
    QCOMPARE(d.units.size(), static_cast<size_t>(std::ceil(d.duration / 30)));
    check_subtitles(d);

    const auto transcript = sl::test::all_blocks(d, sl::doc::BlockRole::Transcript);
    QVERIFY2(!transcript.empty(), d.metadata.count("transcript")
                                      ? d.metadata.at("transcript").c_str()
                                      : "no transcript");
    QStringList hyp, ref;
    double prev = -1;
    for (const auto& b : transcript) {
        hyp << words(QString::fromStdString(b.text));
        QVERIFY(b.time && b.time->t0 >= prev && b.time->t1 >= b.time->t0);
        QVERIFY(b.time->t1 <= d.duration + 0.01);
        QVERIFY(b.confidence >= 0 && b.confidence <= 1);
        prev = b.time->t0;
        // Each utterance lies on one of the clips (pocketsphinx's detector pads by ~0.3 s).
        const double mid = (b.time->t0 + b.time->t1) / 2;
        QVERIFY(std::any_of(clips_.begin(), clips_.end(), [&](const Clip& c) {
            return mid > c.start - 0.3 && mid < c.start + c.duration + 0.3;
        }));
        qInfo("  [%6.2f, %6.2f] (%.2f) %s", b.time->t0, b.time->t1, b.confidence, b.text.c_str());
    }
    for (const auto& c : clips_) {
        ref << words(c.text);
        qInfo("  ref [%6.2f, %6.2f] %s", c.start, c.start + c.duration, qPrintable(c.text));
    }
    const auto [rate, matched] = wer(ref, hyp);
    qInfo(
        "transcript: WER %.3f, %d of %lld reference words matched, %zu utterances; "
        "%.1f s of media read in %.1f s",
        rate, matched, static_cast<long long>(ref.size()), transcript.size(), d.duration, seconds);
    QVERIFY(matched > 0);
    // The engine that heard it is named; Whisper (installed by scripts/setup.sh) within 15% WER
    // (tiny.en: 2.8% here), pocketsphinx, the fallback, within 90%.
    const std::string engine = d.metadata.count("transcript") ? d.metadata.at("transcript") : "";
    if (!sl::ingest::WhisperSpeech::model_dir().empty()) {
        QCOMPARE(engine, std::string("whisper tiny.en"));
        QVERIFY2(rate < 0.15, qPrintable(QString::number(rate)));
    } else {
        QVERIFY2(engine.rfind("pocketsphinx", 0) == 0, engine.c_str());
        QVERIFY(rate < 0.9);
    }
}

// Without a Whisper model (or with it turned off) pocketsphinx hears the audio, and says so.
void TstVideoSpeech::pocketsphinxFallback() {
    qputenv("SIGHTLINE_WHISPER_MODEL", "off");
    sl::ingest::IngestOptions o;
    o.transcribe = true;
    sl::ingest::IngestContext ctx(o);
    const auto d = sl::ingest::make_video_reader()->read(mp4_.toStdString(), ctx);
    qunsetenv("SIGHTLINE_WHISPER_MODEL");
    const std::string engine = d.metadata.count("transcript") ? d.metadata.at("transcript") : "";
    QVERIFY2(engine.rfind("pocketsphinx (no Whisper model", 0) == 0, engine.c_str());
    QVERIFY(!sl::test::all_blocks(d, sl::doc::BlockRole::Transcript).empty());
}

void TstVideoSpeech::mkvSubRip() {
    sl::ingest::IngestOptions o;
    o.transcribe = false;
    sl::ingest::IngestContext ctx(o);
    const auto d = sl::ingest::make_video_reader()->read(mkv_.toStdString(), ctx);
    QCOMPARE(d.metadata.at("subtitle_codecs"), std::string("subrip"));
    QVERIFY(sl::test::all_blocks(d, sl::doc::BlockRole::Transcript).empty());
    check_subtitles(d);
}

void TstVideoSpeech::sidecarSrt() {
    sl::ingest::IngestOptions o;
    o.transcribe = false;
    sl::ingest::IngestContext ctx(o);
    const auto d = sl::ingest::make_video_reader()->read(bare_.toStdString(), ctx);
    QVERIFY(d.metadata.count("subtitle_codecs") == 0);
    QCOMPARE(d.metadata.at("sidecar_subtitles"), std::string("lecture.en.srt"));
    check_subtitles(d);
}

// A sidecar over the 16 MiB limit is not read, and the document says so (the CLI prints it).
void TstVideoSpeech::sidecarTooBigIsNoted() {
    const QString media = dir_.filePath(QStringLiteral("huge.mkv"));
    QVERIFY(QFile::copy(bare_, media));
    QFile srt(dir_.filePath(QStringLiteral("huge.srt")));
    QVERIFY(srt.open(QIODevice::WriteOnly));
    QVERIFY(srt.write("1\n00:00:01,000 --> 00:00:02,000\nhello\n\n") > 0);
    QVERIFY(srt.resize(17 << 20));  // sparse: the size is what counts
    srt.close();
    sl::ingest::IngestOptions o;
    o.transcribe = false;
    sl::ingest::IngestContext ctx(o);
    const auto d = sl::ingest::make_video_reader()->read(media.toStdString(), ctx);
    QCOMPARE(d.metadata.count("sidecar_subtitles"), size_t{0});
    const auto notes = d.notes();
    QCOMPARE(notes.size(), size_t{1});
    QVERIFY2(notes[0].find("huge.srt") != std::string::npos, notes[0].c_str());
    QVERIFY2(notes[0].find("16 MiB") != std::string::npos, notes[0].c_str());
}

QTEST_GUILESS_MAIN(TstVideoSpeech)
#include "tst_video_speech.moc"
