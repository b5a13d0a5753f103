// The ask flow on a video with speech (app/common/ask.h): a question about what is said in one
// stretch of a derived video cites a time range within ±10 s of when it is said.
//
// The video: the five LibriVox clips of pocketsphinx-testdata (cached by scripts/setup.sh, with
// their reference transcripts) on a silent audio track, one clip every kSpacing = 45 s after kLead
// s of silence, so the speech spans almost four minutes and at least 37 s of silence parts any two
// clips; the picture is generated (testsrc). No subtitle track: the words in the library are our
// own speech-to-text (Whisper tiny.en when installed, else pocketsphinx, through the video reader as
// `sightline-cli add` runs it), which
// transcribes the target clips well enough (checked before asking: the question's key words are in
// the transcript of the target clip and in no other). The transcript depends on the layout (with
// 120 s spacing "selfish" comes out as "self shh"), hence the check names the words it needs.
//
// The library: a fresh one in a temp dir, the file added through sl::add_file with the CLI's
// default ingest options (transcription on). Three questions, each about one clip and answerable
// from that clip only; the targets are the three middle clips, so neither the attention sink / the
// first block nor recency decides for them.
//
// The check, per question: one of the first three citations (as numbered in the answer: first use
// in the text, then the others by attention mass) is a time range [t0, t1) of the video with
// |t0 - start| <= 10 s and |t1 - end| <= 10 s, where [start, end) is the clip's true span on the
// track. Both ends rather than an overlap: a citation of a whole 30 s segment, or of a range that
// spans two clips, fails; the clips are 45 s apart, so a citation of any other clip fails too.
//
// kBlock: the engine selects whole KV blocks, and this video's whole transcript is ~220 tokens.
// With the default 128-token blocks the five clips share two blocks. A block's mass is split among
// the units in it by the attention each of its tokens received (Selection::token_mass; before, by
// token counts), yet the selection itself is per block: with 128-token blocks the three questions
// still pass, but 0890's clip comes 2nd and 0920's 4th by share (cited through the answer's text).
// With 32-token blocks each clip's text has a block of its own and is cited first.
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include "core/ask/ask.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/assets.h"
#include "ingest/audio/whisper_speech.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"
#include "tests/ingest/video/media_fixture.h"

namespace {

constexpr double kLead = 20;       // seconds of silence before the first clip
constexpr double kSpacing = 45;    // seconds from one clip's start to the next one's
constexpr double kTail = 20;       // seconds of silence after the last clip
constexpr double kTolerance = 10;  // the issue's ±10 s
constexpr int kBlock = 32;         // MSA block / KV page for the questions (see above)

// The order of the clips on the track (pocketsphinx-testdata file ids, suffixes).
const char* const kOrder[] = {"0880", "0890", "0870", "0920", "0930"};

struct Clip {
    QString id, wav, text;  // text: reference transcript
    double start = 0, end = 0;
};

// A question about what one clip says, and words of the clip the transcript must hold for the
// question to be answerable from our transcription.
struct Target {
    const char* clip;
    const char* question;
    const char* words[3];
};
const Target kTargets[] = {
    {"0870",
     "What did Mister John Dashwood have leisure to consider?",
     {"leisure", "consider", "power"}},
    {"0890", "What is said about being cold hearted and selfish?", {"cold", "hearted", "selfish"}},
    {"0920",
     "Whom might he have married to be more respectable?",
     {"married", "woman", "respectable"}},
};

// Duration of a 16-bit mono 16 kHz WAV from its data chunk; 0 when unreadable.
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

QString range(double t0, double t1) {
    return QString::asprintf("[%.2f, %.2f) s", t0, t1);
}

}  // namespace

class TstAskVideo : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void citesTheClip_data();
    void citesTheClip();

private:
    const Clip* clip(const QString& id) const;
    QTemporaryDir dir_;
    std::vector<Clip> clips_;
    QString mp4_;
    std::unique_ptr<sl::LoadedModel> model_;
    std::optional<sl::Library> lib_;
    sl::doc::Document doc_;  // as stored (text only)
};

const Clip* TstAskVideo::clip(const QString& id) const {
    for (const auto& c : clips_)
        if (c.id == id) return &c;
    return nullptr;
}

void TstAskVideo::initTestCase() {
    QVERIFY(dir_.isValid());
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    REQUIRE_ASSET(tr, "samples/audio/librivox/transcription");

    // The reference transcripts, by file id.
    QFile f(QString::fromStdString(tr.string()));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QRegularExpression line(QStringLiteral("^<s>(.*)</s>\\s*\\(([^)]+)-(\\d+)\\)\\s*$"));
    std::map<QString, QString> ref;
    for (const QByteArray& raw : f.readAll().split('\n')) {
        const auto m = line.match(QString::fromUtf8(raw).trimmed());
        if (m.hasMatch()) ref[m.captured(3)] = m.captured(1).trimmed();
    }
    double t = kLead;
    for (const char* id : kOrder) {
        const QString key = QString::fromLatin1(id);
        QVERIFY2(ref.count(key), id);
        REQUIRE_ASSET(wav, "samples/audio/librivox/sense_and_sensibility_01_austen_64kb-" +
                               std::string(id) + ".wav");
        Clip c{key, QString::fromStdString(wav.string()), ref[key], t, 0};
        const double d = wav_seconds(c.wav);
        QVERIFY2(d > 1 && d < kSpacing - 30, id);  // > 30 s of silence between clips
        c.end = t + d;
        t += kSpacing;
        clips_.push_back(c);
    }
    const double total = clips_.back().end + kTail;

    // The track: each clip padded with silence up to the next one's start (the first delayed by
    // kLead, the last padded by kTail), concatenated; the picture a test pattern at 2 fps.
    QStringList in;
    QString chain, concat;
    for (size_t i = 0; i < clips_.size(); ++i) {
        in << QStringLiteral("-i") << clips_[i].wav;
        const double pad = i + 1 < clips_.size() ? clips_[i + 1].start - clips_[i].end : kTail;
        chain += QStringLiteral("[%1:a]%2apad=pad_dur=%3[a%1];")
                     .arg(i)
                     .arg(i == 0 ? QStringLiteral("adelay=%1,").arg(kLead * 1000) : QString())
                     .arg(pad, 0, 'f', 4);
        concat += QStringLiteral("[a%1]").arg(i);
    }
    chain += concat + QStringLiteral("concat=n=%1:v=0:a=1[a]").arg(clips_.size());
    in << QStringLiteral("-f") << QStringLiteral("lavfi") << QStringLiteral("-i")
       << QStringLiteral("testsrc=size=320x240:rate=2:duration=%1").arg(total, 0, 'f', 3)
       << QStringLiteral("-filter_complex") << chain << QStringLiteral("-map")
       << QString::number(clips_.size()) + QStringLiteral(":v") << QStringLiteral("-map")
       << QStringLiteral("[a]") << QStringLiteral("-c:v") << QStringLiteral("libx264")
       << QStringLiteral("-preset") << QStringLiteral("ultrafast") << QStringLiteral("-c:a")
       << QStringLiteral("aac");
    mp4_ = dir_.filePath(QStringLiteral("reading.mp4"));
    const QString err = sl::test::run_ffmpeg(QStringList(in) << mp4_, 120000);
    QVERIFY2(err.isEmpty(), qPrintable(err));

    // A fresh library; the file added the way `sightline-cli add` adds it (default options).
    lib_.emplace(sl::Library::open(dir_.filePath(QStringLiteral("library")).toStdString()));
    const sl::ingest::IngestOptions io;  // transcription on, as the CLI's default
    QVERIFY(io.transcribe);
    sl::AddOptions add;
    add.ingest_options = "{\"transcribe\":true}";
    const sl::AddResult r = sl::add_file(
        *lib_, mp4_.toStdString(),
        [&](const std::string& p) {
            sl::ingest::IngestContext ctx(io);
            return sl::ingest::read_document(p, ctx);
        },
        add);
    QVERIFY2(r.status == sl::AddStatus::Added, r.message.c_str());
    std::vector<sl::DocId> ids;
    const auto docs = sl::ready_documents(*lib_, ids);
    QCOMPARE(docs.size(), size_t{1});
    doc_ = docs[0];
    QCOMPARE(doc_.kind, sl::doc::DocumentKind::Video);
    QVERIFY2(std::abs(doc_.duration - total) < 0.5, qPrintable(QString::number(doc_.duration)));

    // What the library holds: the transcript per segment, and the truth.
    for (const auto& u : doc_.units)
        for (const auto& b : u.blocks)
            if (b.time)
                qInfo("  unit %d %s %s: %s", u.index, sl::doc::to_string(b.role),
                      qPrintable(range(b.time->t0, b.time->t1)), b.text.c_str());
    for (const auto& c : clips_)
        qInfo("  truth %s %s: %s", qPrintable(c.id), qPrintable(range(c.start, c.end)),
              qPrintable(c.text));
    QVERIFY2(sl::test::all_blocks(doc_, sl::doc::BlockRole::Subtitle).empty(),
             "the video has no subtitles");
    // With Whisper (installed by scripts/setup.sh) the transcript's phrases start and end when
    // they are said: within 1 s of each clip's true span (word times), not at the silence before.
    if (!sl::ingest::WhisperSpeech::model_dir().empty()) {
        for (const auto& c : clips_) {
            double t0 = 1e9, t1 = -1;
            for (const auto& b : sl::test::all_blocks(doc_, sl::doc::BlockRole::Transcript)) {
                const double mid = (b.time->t0 + b.time->t1) / 2;
                if (mid < c.start - 1 || mid > c.end + 1) continue;
                t0 = std::min(t0, b.time->t0);
                t1 = std::max(t1, b.time->t1);
            }
            QVERIFY2(std::abs(t0 - c.start) <= 1.0 && std::abs(t1 - c.end) <= 1.0,
                     qPrintable(QStringLiteral("clip %1 %2 heard at %3").arg(c.id, range(c.start, c.end), range(t0, t1))));
        }
    }

    model_ = sl::load_model(model_path);
}

void TstAskVideo::citesTheClip_data() {
    QTest::addColumn<QString>("clip");
    QTest::addColumn<QString>("question");
    QTest::addColumn<QStringList>("words");
    for (const auto& t : kTargets)
        QTest::newRow(t.clip) << QString::fromLatin1(t.clip) << QString::fromLatin1(t.question)
                              << QStringList{QString::fromLatin1(t.words[0]),
                                             QString::fromLatin1(t.words[1]),
                                             QString::fromLatin1(t.words[2])};
}

void TstAskVideo::citesTheClip() {
    QFETCH(QString, clip);
    QFETCH(QString, question);
    QFETCH(QStringList, words);
    QVERIFY(model_);
    const Clip* c = this->clip(clip);
    QVERIFY(c);

    // The question is answerable from our transcript of the clip (and of no other clip).
    QString here, elsewhere;
    for (const auto& b : sl::test::all_blocks(doc_, sl::doc::BlockRole::Transcript)) {
        const double mid = (b.time->t0 + b.time->t1) / 2;
        (mid > c->start - 1 && mid < c->end + 1 ? here : elsewhere) +=
            QString::fromStdString(b.text) + QLatin1Char(' ');
    }
    for (const QString& w : words) {
        const QRegularExpression word(QStringLiteral("\\b") + w + QStringLiteral("\\b"));
        QVERIFY2(
            here.contains(word),
            qPrintable(
                QStringLiteral("the transcript of clip %1 lacks \"%2\": %3").arg(clip, w, here)));
        QVERIFY2(!elsewhere.contains(word),
                 qPrintable(QStringLiteral("\"%1\" is said outside clip %2").arg(w, clip)));
    }

    sl::AskOptions o;
    o.effort = sl::Effort::Low;
    o.block_size = kBlock;
    o.question = question.toStdString();
    const sl::AskResult r = sl::ask(*lib_, *model_, o);
    qInfo("question: %s", o.question.c_str());
    qInfo("plan:\n%s", r.plan.c_str());
    qInfo("answer: %s", r.answer.with_markers().c_str());
    qInfo("kv: %s; baseline %s", r.kv_note.c_str(), r.baseline ? "subtracted" : "not measured");
    qInfo("truth: clip %s %s: %s", qPrintable(clip), qPrintable(range(c->start, c->end)),
          qPrintable(c->text));

    bool hit = false;
    int rank = 0;
    for (const auto& ci : r.answer.citations) {
        const bool top = ++rank <= 3;
        const bool timed = ci.kind == sl::doc::DocumentKind::Video && ci.ref.time;
        const bool near = timed && std::abs(ci.ref.time->t0 - c->start) <= kTolerance &&
                          std::abs(ci.ref.time->t1 - c->end) <= kTolerance;
        qInfo("  [%d] %s %s tokens [%lld, %lld) share %.3f%s%s — %s", ci.number, ci.locator.c_str(),
              timed ? qPrintable(range(ci.ref.time->t0, ci.ref.time->t1)) : "(no time)",
              static_cast<long long>(ci.begin), static_cast<long long>(ci.end), ci.share,
              r.answer.used(static_cast<size_t>(rank - 1)) ? "" : " (not cited in the text)",
              near ? " <- within ±10 s of the truth" : "", ci.snippet.c_str());
        hit = hit || (top && near);
    }
    QVERIFY2(hit,
             qPrintable(
                 QStringLiteral("no citation among the first three lies within ±%1 s of clip %2 %3")
                     .arg(kTolerance)
                     .arg(clip, range(c->start, c->end))));
}

QTEST_GUILESS_MAIN(TstAskVideo)
#include "tst_ask_video.moc"
