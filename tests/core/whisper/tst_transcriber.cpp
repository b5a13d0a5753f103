// Long-form transcription (core/whisper/transcriber.h) with Whisper tiny.en against faster-whisper
// itself: tests/reference/whisper/fw_transcript.json holds faster-whisper's float32 greedy
// segments (times, tokens, text) of a ~54 s recording made from the five LibriVox clips of
// pocketsphinx-testdata (make_fw_transcript.py regenerates it and builds the recording the same
// way). Checks: the same segments (tokens, times, text) over two 30 s windows with carried
// context, progress reports, cancellation, and a silent recording transcribed to nothing. Prints
// the run time beside faster-whisper's; word error rate on each clip beside faster-whisper's.
// Skips, naming scripts/setup.sh, when the model or the clips are absent.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/whisper/transcriber.h"
#include "tests/common/test_support.h"
#include "tests/core/whisper/wav_file.h"

namespace {

// make_fw_transcript.py's normalize(): lowercase, every character but a-z, 0-9 and ' a space.
std::vector<std::string> words(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    for (const char ch : text) {
        const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'') {
            cur += c;
        } else if (!cur.empty()) {
            out.push_back(cur);
            cur.clear();
        }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

size_t edit_distance(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
    std::vector<size_t> d(hyp.size() + 1);
    for (size_t j = 0; j <= hyp.size(); ++j) d[j] = j;
    for (size_t i = 1; i <= ref.size(); ++i) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= hyp.size(); ++j) {
            const size_t cur =
                std::min({d[j] + 1, d[j - 1] + 1, prev + (ref[i - 1] != hyp[j - 1])});
            prev = d[j];
            d[j] = cur;
        }
    }
    return d[hyp.size()];
}

}  // namespace

class TstTranscriber : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesFasterWhisper();
    void streamsFromASource();
    void wordTimestamps();
    void beamSearch();
    void initialPrompt();
    void wordErrorRate();
    void multilingualBaseModel();
    void progressAndCancel();
    void silenceGivesNothing();

private:
    void compare(const sl::whisper::Transcript& t, const QJsonObject& ref,
                 const QString& key = QStringLiteral("segments"));

    std::unique_ptr<sl::whisper::WhisperModel> model_;
    std::unique_ptr<sl::whisper::WhisperTokenizer> tok_;
    std::unique_ptr<sl::ThreadPool> pool_;
    std::vector<float> audio_;
    QJsonObject ref_;
};

void TstTranscriber::initTestCase() {
    const auto dir = sl::whisper::WhisperModel::default_dir();
    if (!std::filesystem::exists(dir / "model.bin"))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh (Whisper tiny.en)")
                             .arg(QString::fromStdString(dir.string()))));
    // The recording of make_fw_transcript.py: the five clips in order, twice, each + 0.5 s.
    for (int rep = 0; rep < 2; ++rep) {
        for (const char* id : {"0870", "0880", "0890", "0920", "0930"}) {
            const auto wav = sl::paths::samples_dir() / "audio" / "librivox" /
                             (std::string("sense_and_sensibility_01_austen_64kb-") + id + ".wav");
            if (!std::filesystem::exists(wav))
                QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh")
                                     .arg(QString::fromStdString(wav.string()))));
            const std::vector<float> clip = sl::test::read_wav_16k_mono(wav);
            QVERIFY(!clip.empty());
            audio_.insert(audio_.end(), clip.begin(), clip.end());
            audio_.insert(audio_.end(), 8000, 0.0f);
        }
    }
    // Two threads (the target machine's cores); SIGHTLINE_TEST_THREADS overrides for timing.
    const int threads = qEnvironmentVariableIntValue("SIGHTLINE_TEST_THREADS");
    pool_ = std::make_unique<sl::ThreadPool>(threads > 0 ? threads : 2);
    model_ = std::make_unique<sl::whisper::WhisperModel>(sl::whisper::WhisperModel::open(dir));
    const auto& c = model_->config();
    tok_ = std::make_unique<sl::whisper::WhisperTokenizer>(
        sl::whisper::WhisperTokenizer::open(dir, c.n_vocab, model_->tokens().eot));
    QFile f(sl::test::reference_script(QStringLiteral("whisper/fw_transcript.json")));
    QVERIFY(f.open(QIODevice::ReadOnly));
    ref_ = QJsonDocument::fromJson(f.readAll()).object();
    QCOMPARE(static_cast<qint64>(audio_.size()), ref_.value(QStringLiteral("samples")).toInteger());
}

void TstTranscriber::matchesFasterWhisper() {
    QElapsedTimer timer;
    timer.start();
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, {}, *pool_);
    const double seconds = timer.nsecsElapsed() / 1e9;
    for (const auto& s : t.segments) qInfo("[%6.2f %6.2f]%s", s.start, s.end, s.text.c_str());
    qInfo(
        "%.1f s of audio in %.2f s (%d windows): %.1f s per audio minute; faster-whisper "
        "float32 greedy %.2f s, int8 greedy %.2f s, int8 beam 5 %.2f s (as recorded by "
        "make_fw_transcript.py)",
        t.duration, seconds, t.windows, seconds / t.duration * 60,
        ref_.value(QStringLiteral("float32_greedy_seconds")).toDouble(),
        ref_.value(QStringLiteral("int8_greedy_seconds")).toDouble(),
        ref_.value(QStringLiteral("int8_default_seconds")).toDouble());
    QVERIFY(!t.canceled);
    compare(t, ref_);
}

void TstTranscriber::compare(const sl::whisper::Transcript& t, const QJsonObject& ref,
                             const QString& key) {
    const QJsonArray want = ref.value(key).toArray();
    QCOMPARE(t.segments.size(), static_cast<size_t>(want.size()));
    for (qsizetype i = 0; i < want.size(); ++i) {
        const QJsonObject w = want[i].toObject();
        const auto& s = t.segments[static_cast<size_t>(i)];
        std::vector<int> tokens;
        for (const auto& v : w.value(QStringLiteral("tokens")).toArray())
            tokens.push_back(v.toInt());
        QCOMPARE(QString::fromStdString(s.text), w.value(QStringLiteral("text")).toString());
        QVERIFY2(s.tokens == tokens, qPrintable(QStringLiteral("segment %1").arg(i)));
        QVERIFY(std::abs(s.start - w.value(QStringLiteral("start")).toDouble()) < 1e-6);
        QVERIFY(std::abs(s.end - w.value(QStringLiteral("end")).toDouble()) < 1e-6);
        QVERIFY(std::abs(s.avg_logprob - w.value(QStringLiteral("avg_logprob")).toDouble()) < 2e-3);
        QVERIFY(std::abs(s.no_speech_prob - w.value(QStringLiteral("no_speech_prob")).toDouble()) <
                1e-3);
    }
}

void TstTranscriber::streamsFromASource() {
    // The same recording through an AudioSource that enforces audio_source.h's access pattern
    // (bounded reads, begins never more than 30.5 s behind the previous one): the same segments.
    struct Checked : sl::whisper::AudioSource {
        explicit Checked(std::span<const float> s) : inner(s) {}
        int64_t size() const override { return inner.size(); }
        void read(int64_t begin, int64_t n, float* out) override {
            if (n > 31 * 16000) throw sl::Error("read of " + std::to_string(n) + " samples");
            if (begin == 0 && last_begin > 0)
                ++passes;  // a new pass from the start
            else if (begin < last_begin - 30 * 16000 - 8000)
                throw sl::Error("read back to " + std::to_string(begin));
            last_begin = begin;
            max_read = std::max(max_read, n);
            inner.read(begin, n, out);
        }
        sl::whisper::SpanAudioSource inner;
        int64_t last_begin = 0, max_read = 0;
        int passes = 1;
    } source(audio_);
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, source, {}, *pool_);
    qInfo("%d passes over the source, largest read %lld samples", source.passes,
          static_cast<long long>(source.max_read));
    QCOMPARE(source.passes, 2);  // the clamp's maximum, then the windows
    compare(t, ref_);
}

void TstTranscriber::wordTimestamps() {
    // Word times from cross-attention against faster-whisper's word_timestamps=True run (float32
    // greedy): the same segments (whose bounds follow their words), the same words, times to
    // 0.02 s (one audio position) and probabilities.
    sl::whisper::TranscribeOptions o;
    o.word_timestamps = true;
    QElapsedTimer timer;
    timer.start();
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, o, *pool_);
    const double seconds = timer.nsecsElapsed() / 1e9;
    const QJsonArray want = ref_.value(QStringLiteral("word_segments")).toArray();
    size_t n_words = 0, exact = 0;
    double worst = 0, worst_p = 0;
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const auto& seg = t.segments[i];
        QString line = QStringLiteral("[%1 %2]").arg(seg.start, 0, 'f', 2).arg(seg.end, 0, 'f', 2);
        for (const auto& w : seg.words)
            line += QStringLiteral(" %1(%2-%3)")
                        .arg(QString::fromStdString(w.text))
                        .arg(w.start)
                        .arg(w.end);
        qInfo("%s", qPrintable(line));
    }
    QCOMPARE(t.segments.size(), static_cast<size_t>(want.size()));
    for (qsizetype i = 0; i < want.size(); ++i) {
        const QJsonObject ws = want[i].toObject();
        const auto& seg = t.segments[static_cast<size_t>(i)];
        QCOMPARE(QString::fromStdString(seg.text), ws.value(QStringLiteral("text")).toString());
        worst = std::max({worst, std::abs(seg.start - ws.value(QStringLiteral("start")).toDouble()),
                          std::abs(seg.end - ws.value(QStringLiteral("end")).toDouble())});
        const QJsonArray words = ws.value(QStringLiteral("words")).toArray();
        QCOMPARE(seg.words.size(), static_cast<size_t>(words.size()));
        for (qsizetype k = 0; k < words.size(); ++k) {
            const QJsonObject w = words[k].toObject();
            const auto& got = seg.words[static_cast<size_t>(k)];
            QCOMPARE(QString::fromStdString(got.text), w.value(QStringLiteral("word")).toString());
            const double ds = std::abs(got.start - w.value(QStringLiteral("start")).toDouble());
            const double de = std::abs(got.end - w.value(QStringLiteral("end")).toDouble());
            worst = std::max({worst, ds, de});
            worst_p = std::max(
                worst_p,
                std::abs(got.probability - w.value(QStringLiteral("probability")).toDouble()));
            ++n_words;
            exact += ds < 1e-6 && de < 1e-6;
        }
    }
    qInfo(
        "%zu words, %zu with exactly faster-whisper's times; worst time difference %.2f s, "
        "worst probability difference %.4f; %.2f s (faster-whisper float32 %.2f s)",
        n_words, exact, worst, worst_p, seconds,
        ref_.value(QStringLiteral("float32_greedy_words_seconds")).toDouble());
    QVERIFY2(worst <= 0.02 + 1e-6, qPrintable(QString::number(worst)));
    QVERIFY2(worst_p < 0.01, qPrintable(QString::number(worst_p)));
}

void TstTranscriber::beamSearch() {
    // Beam search (beam 5, faster-whisper's default) against faster-whisper's float32 beam-5 run.
    sl::whisper::TranscribeOptions o;
    o.beam_size = 5;
    QElapsedTimer timer;
    timer.start();
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, o, *pool_);
    const double seconds = timer.nsecsElapsed() / 1e9;
    for (const auto& s : t.segments) qInfo("[%6.2f %6.2f]%s", s.start, s.end, s.text.c_str());
    qInfo(
        "beam 5: %.1f s of audio in %.2f s; faster-whisper float32 beam 5 %.2f s, int8 beam 5 "
        "%.2f s",
        t.duration, seconds, ref_.value(QStringLiteral("float32_beam5_seconds")).toDouble(),
        ref_.value(QStringLiteral("int8_default_seconds")).toDouble());
    compare(t, ref_, QStringLiteral("beam5_segments"));
}

void TstTranscriber::initialPrompt() {
    // An initial prompt conditions the first window as faster-whisper's initial_prompt does.
    sl::whisper::TranscribeOptions o;
    o.initial_prompt = ref_.value(QStringLiteral("initial_prompt")).toString().toStdString();
    QVERIFY(!o.initial_prompt.empty());
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, o, *pool_);
    compare(t, ref_, QStringLiteral("prompted_segments"));
}

void TstTranscriber::wordErrorRate() {
    // Each LibriVox clip alone against its line of pocketsphinx-testdata's transcription, beside
    // faster-whisper's errors on the same clips (int8 beam 5 defaults, float32 greedy).
    const QJsonArray clips = ref_.value(QStringLiteral("clips")).toArray();
    QCOMPARE(clips.size(), qsizetype{5});
    size_t n_words = 0, errors = 0;
    double seconds = 0, audio_seconds = 0;
    for (const auto& cv : clips) {
        const QJsonObject c = cv.toObject();
        const auto wav = sl::paths::samples_dir() / "audio" / "librivox" /
                         ("sense_and_sensibility_01_austen_64kb-" +
                          c.value(QStringLiteral("clip")).toString().toStdString() + ".wav");
        const std::vector<float> clip = sl::test::read_wav_16k_mono(wav);
        QElapsedTimer timer;
        timer.start();
        const auto t = sl::whisper::transcribe(*model_, *tok_, clip, {}, *pool_);
        seconds += timer.nsecsElapsed() / 1e9;
        audio_seconds += t.duration;
        std::string text;
        for (const auto& s : t.segments) text += s.text;
        QCOMPARE(QString::fromStdString(text),
                 c.value(QStringLiteral("float32_greedy_text")).toString());
        const auto ref = words(c.value(QStringLiteral("reference")).toString().toStdString());
        n_words += ref.size();
        errors += edit_distance(ref, words(text));
    }
    const QJsonObject w = ref_.value(QStringLiteral("wer")).toObject();
    QCOMPARE(static_cast<qint64>(n_words), w.value(QStringLiteral("words")).toInteger());
    const double wer = 100.0 * static_cast<double>(errors) / static_cast<double>(n_words);
    const double fw_int8 =
        100.0 * w.value(QStringLiteral("int8_default_errors")).toDouble() / n_words;
    const double fw_f32 =
        100.0 * w.value(QStringLiteral("float32_greedy_errors")).toDouble() / n_words;
    qInfo(
        "WER over %zu words: Sightline %.2f%% (%zu errors, %.2f s for %.1f s of audio); "
        "faster-whisper int8 beam 5 %.2f%%, float32 greedy %.2f%%",
        n_words, wer, errors, seconds, audio_seconds, fw_int8, fw_f32);
    QVERIFY2(wer <= fw_int8 + 1.0, qPrintable(QString::number(wer)));
}

void TstTranscriber::multilingualBaseModel() {
    // Whisper base (multilingual: 6 layers, d_model 512, 8 heads, vocabulary.json), language
    // detected on the first window, against faster-whisper's float32 greedy run
    // (fw_transcript_base.json).
    const auto dir = sl::paths::cache_dir() / "models" / "whisper-base";
    if (!std::filesystem::exists(dir / "model.bin"))
        QSKIP(qPrintable(
            QStringLiteral("%1 is missing: run SIGHTLINE_WHISPER_BASE=1 scripts/setup.sh")
                .arg(QString::fromStdString(dir.string()))));
    QFile f(sl::test::reference_script(QStringLiteral("whisper/fw_transcript_base.json")));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject ref = QJsonDocument::fromJson(f.readAll()).object();
    QElapsedTimer timer;
    timer.start();
    const auto model = sl::whisper::WhisperModel::open(dir);
    const auto tok =
        sl::whisper::WhisperTokenizer::open(dir, model.config().n_vocab, model.tokens().eot);
    qInfo("loaded %s in %lld ms", dir.c_str(), static_cast<long long>(timer.elapsed()));
    const auto& c = model.config();
    QCOMPARE(c.d_model, 512);
    QCOMPARE(c.n_text_heads, 8);
    QCOMPARE(c.n_audio_layers, 6);
    QVERIFY(c.multilingual());
    QCOMPARE(model.lang_ids().size(), size_t{99});
    timer.restart();
    const sl::whisper::Transcript t = sl::whisper::transcribe(model, tok, audio_, {}, *pool_);
    const double seconds = timer.nsecsElapsed() / 1e9;
    for (const auto& s : t.segments) qInfo("[%6.2f %6.2f]%s", s.start, s.end, s.text.c_str());
    qInfo("language %s (p %.3f); %.1f s of audio in %.2f s; faster-whisper float32 greedy %.2f s",
          t.language.c_str(), t.language_probability, t.duration, seconds,
          ref.value(QStringLiteral("float32_greedy_seconds")).toDouble());
    QCOMPARE(QString::fromStdString(t.language), ref.value(QStringLiteral("language")).toString());
    QVERIFY(std::abs(t.language_probability -
                     ref.value(QStringLiteral("language_probability")).toDouble()) < 1e-3);
    compare(t, ref);
}

void TstTranscriber::progressAndCancel() {
    std::vector<std::pair<double, double>> calls;
    sl::whisper::TranscribeOptions o;
    o.progress = [&](double done, double total) {
        calls.emplace_back(done, total);
        return false;  // stop after the first window
    };
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, o, *pool_);
    QVERIFY(t.canceled);
    QCOMPARE(calls.size(), size_t{1});
    QCOMPARE(t.windows, 1);
    QVERIFY(calls[0].first > 20.0 && calls[0].first <= 30.0);
    QCOMPARE(calls[0].second, t.duration);
    QVERIFY(!t.segments.empty());
    QVERIFY(t.segments.back().end <= calls[0].first + 1e-9);
}

void TstTranscriber::silenceGivesNothing() {
    const std::vector<float> silence(16000 * 5, 0.0f);
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, silence, {}, *pool_);
    QCOMPARE(t.windows, 1);
    for (const auto& s : t.segments)
        qInfo("silence heard: [%.2f %.2f]%s", s.start, s.end, s.text.c_str());
    QVERIFY(t.segments.empty());
}

QTEST_APPLESS_MAIN(TstTranscriber)
#include "tst_transcriber.moc"
