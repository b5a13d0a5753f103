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
#include "core/whisper/sampling.h"
#include "core/whisper/transcriber.h"
#include "kernels/cpu/gemm_s8.h"
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

// faster-whisper's references were recorded at temperature 0 alone (no fallback).
static sl::whisper::TranscribeOptions greedy_t0() {
    sl::whisper::TranscribeOptions o;
    o.temperatures = {0.0f};
    return o;
}

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
    void int8MatchesFasterWhisperInt8();
    void defaultComputeNearFloat32();
    void multilingualBaseModel();
    void progressAndCancel();
    void silenceGivesNothing();
    void compressionRatioAsZlib();
    void temperatureFallback();

private:
    void compare(const sl::whisper::Transcript& t, const QJsonObject& ref,
                 const QString& key = QStringLiteral("segments"));
    // Word errors of `m` (greedy, temperature 0) over the reference's LibriVox clips.
    void clip_errors(const sl::whisper::WhisperModel& m, size_t& n_words, size_t& errors);
    // faster-whisper int8 beam 5's word error rate (%) over the clips' n_words.
    double fw_int8_clip_wer(size_t n_words) const {
        return 100.0 * ref_.value(QStringLiteral("wer")).toObject().value(QStringLiteral("int8_default_errors")).toDouble() /
               static_cast<double>(n_words);
    }
    // The recording transcribed by `m` (greedy, temperature 0): its text; the seconds it took and
    // the audio's.
    std::string transcribe_recording(const sl::whisper::WhisperModel& m, double& seconds, double& duration) {
        QElapsedTimer timer;
        timer.start();
        const auto t = sl::whisper::transcribe(m, *tok_, audio_, greedy_t0(), *pool_);
        seconds = static_cast<double>(timer.nsecsElapsed()) / 1e9;
        duration = t.duration;
        std::string text;
        for (const auto& sg : t.segments) text += sg.text;
        return text;
    }

    std::unique_ptr<sl::whisper::WhisperModel> model_;
    std::unique_ptr<sl::whisper::WhisperTokenizer> tok_;
    std::unique_ptr<sl::ThreadPool> pool_;
    std::vector<float> audio_;
    QJsonObject ref_;
};

void TstTranscriber::clip_errors(const sl::whisper::WhisperModel& m, size_t& n_words,
                                 size_t& errors) {
    for (const auto& cv : ref_.value(QStringLiteral("clips")).toArray()) {
        const QJsonObject c = cv.toObject();
        const auto wav = sl::paths::samples_dir() / "audio" / "librivox" /
                         ("sense_and_sensibility_01_austen_64kb-" +
                          c.value(QStringLiteral("clip")).toString().toStdString() + ".wav");
        const auto ct = sl::whisper::transcribe(m, *tok_, sl::test::read_wav_16k_mono(wav), greedy_t0(), *pool_);
        std::string clip_text;
        for (const auto& s : ct.segments) clip_text += s.text;
        const auto ref = words(c.value(QStringLiteral("reference")).toString().toStdString());
        n_words += ref.size();
        errors += edit_distance(ref, words(clip_text));
    }
}

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
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, audio_, greedy_t0(), *pool_);
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
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, source, greedy_t0(), *pool_);
    qInfo("%d passes over the source, largest read %lld samples", source.passes,
          static_cast<long long>(source.max_read));
    QCOMPARE(source.passes, 2);  // the clamp's maximum, then the windows
    compare(t, ref_);
}

void TstTranscriber::wordTimestamps() {
    // Word times from cross-attention against faster-whisper's word_timestamps=True run (float32
    // greedy): the same segments (whose bounds follow their words), the same words, times to
    // 0.02 s (one audio position) and probabilities.
    sl::whisper::TranscribeOptions o = greedy_t0();
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
    sl::whisper::TranscribeOptions o = greedy_t0();
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
    sl::whisper::TranscribeOptions o = greedy_t0();
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
        const auto t = sl::whisper::transcribe(*model_, *tok_, clip, greedy_t0(), *pool_);
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

void TstTranscriber::int8MatchesFasterWhisperInt8() {
    // The int8 model (WhisperLoadOptions::int8, what ingest runs) against faster-whisper's int8
    // greedy run of the same recording (compute_type "int8": not the same rounding of the
    // activations, so a word may differ at a near-tie), and its word error rate on the clips
    // within 1 point of faster-whisper's int8 beam 5 defaults.
    if (!sl::kernels::s8_gemm_fast())
        QSKIP("the int8 product has no vector tier on this CPU (AVX-512 VNNI): the model stays f32");
    sl::whisper::WhisperLoadOptions lo;
    lo.int8 = true;
    const auto dir = sl::whisper::WhisperModel::default_dir();
    const sl::whisper::WhisperModel m = sl::whisper::WhisperModel::open(dir, lo);
    QVERIFY(m.int8());
    double seconds = 0, duration = 0;
    const std::string text = transcribe_recording(m, seconds, duration);
    const auto want = words(ref_.value(QStringLiteral("int8_greedy_text")).toString().toStdString());
    const size_t diff = edit_distance(want, words(text));
    qInfo("int8: %.1f s of audio in %.2f s (%.1f s per audio minute; float32 above); %zu of %zu "
          "words differ from faster-whisper int8 greedy",
          duration, seconds, seconds / duration * 60, diff, want.size());
    QVERIFY2(diff * 50 <= want.size(), text.c_str());  // at most 2 %

    size_t n_words = 0, errors = 0;
    clip_errors(m, n_words, errors);
    const double wer = 100.0 * static_cast<double>(errors) / static_cast<double>(n_words);
    const double fw_int8 = fw_int8_clip_wer(n_words);
    qInfo("int8 WER over %zu words: %.2f%% (%zu errors); faster-whisper int8 beam 5 %.2f%%", n_words,
          wer, errors, fw_int8);
    // 71 words: one near-tie flipped by the rounding of the activations moves the rate by 3-6
    // points ("cold-hearted ... ill-disposed" in clip 0890 flips with ulp-level changes); the
    // larger comparison is tests/reference/whisper/wer_eval.py's (477 words).
    QVERIFY2(wer <= fw_int8 + 7.0, qPrintable(QString::number(wer)));
}

void TstTranscriber::defaultComputeNearFloat32() {
    // What ingest runs by default (whisper_speech.cpp): the encoder's linears int8 (as
    // CTranslate2's int8), the decoder and the projection Q8_0 (activations quantized per 32
    // values, not per 384-value row). Against float32's transcript of the recording (at most 2 %
    // of the words differ) and the clips' word error rate as the int8 row's bound. Without the
    // int8 product's vector tier the encoder stays f32 and the same bounds hold.
    sl::whisper::WhisperLoadOptions lo;
    lo.int8 = true;
    lo.q8_decoder = true;
    const sl::whisper::WhisperModel m =
        sl::whisper::WhisperModel::open(sl::whisper::WhisperModel::default_dir(), lo);
    QCOMPARE(m.int8(), sl::kernels::s8_gemm_fast());
    QVERIFY(m.token_embedding_s8().empty());
    QVERIFY(!m.token_embedding_q8().empty());
    double seconds = 0, duration = 0;
    const std::string text = transcribe_recording(m, seconds, duration);
    std::string f32_text;  // faster-whisper's float32 greedy segments, which float32 matches
    for (const auto& sv : ref_.value(QStringLiteral("segments")).toArray())
        f32_text += sv.toObject().value(QStringLiteral("text")).toString().toStdString();
    const auto want = words(f32_text);
    QVERIFY(want.size() > 100);
    const size_t diff = edit_distance(want, words(text));
    qInfo("default (int8 encoder, Q8_0 decoder): %.1f s of audio in %.2f s (%.1f s per audio "
          "minute); %zu of %zu words differ from float32",
          duration, seconds, seconds / duration * 60, diff, want.size());
    QVERIFY2(diff * 50 <= want.size(), text.c_str());
    size_t n_words = 0, errors = 0;
    clip_errors(m, n_words, errors);
    const double wer = 100.0 * static_cast<double>(errors) / static_cast<double>(n_words);
    const double fw_int8 = fw_int8_clip_wer(n_words);
    qInfo("default WER over %zu words: %.2f%% (%zu errors); faster-whisper int8 beam 5 %.2f%%",
          n_words, wer, errors, fw_int8);
    QVERIFY2(wer <= fw_int8 + 7.0, qPrintable(QString::number(wer)));

    // Phrase bounds (from word times, as ingest cuts its blocks) against faster-whisper's float32
    // word_timestamps run: every start and end of its phrases has one of ours within the issue's
    // 0.5 s, but where the two runs start a window at different places. On this recording (its
    // clips twice) both runs open the second window on a hallucinated repeat of the first
    // window's last sentence and lose the sentence really said there; the repeat's close (33.60 s
    // from the model's timestamp here, 32.88 s from faster-whisper's word times) starts the next
    // window. So: at least 90 % of the bounds, and the phrases run to the end of the recording
    // (none skipped: word_timing.cpp's runaway guard).
    sl::whisper::TranscribeOptions o = greedy_t0();
    o.word_timestamps = true;
    const auto tw = sl::whisper::transcribe(m, *tok_, audio_, o, *pool_);
    std::vector<double> ours;
    for (const auto& seg : tw.segments) ours.insert(ours.end(), {seg.start, seg.end});
    int bounds = 0, within = 0;
    for (const auto& wv : ref_.value(QStringLiteral("word_segments")).toArray()) {
        for (const char* key : {"start", "end"}) {
            const double b = wv.toObject().value(QLatin1String(key)).toDouble();
            double nearest = 1e9;
            for (const double x : ours) nearest = std::min(nearest, std::abs(x - b));
            ++bounds;
            within += nearest <= 0.5;
            if (nearest > 0.5) qInfo("faster-whisper's phrase bound %.2f s: ours %.2f s away", b, nearest);
        }
    }
    qInfo("default: %zu phrases; %d of faster-whisper's %d phrase bounds within 0.5 s; last ends at "
          "%.2f s",
          tw.segments.size(), within, bounds, tw.segments.empty() ? 0.0 : tw.segments.back().end);
    QVERIFY(within * 10 >= bounds * 9);
    QVERIFY(!tw.segments.empty() && tw.segments.back().end > 53.0);  // to the end: nothing skipped
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
    const sl::whisper::Transcript t = sl::whisper::transcribe(model, tok, audio_, greedy_t0(), *pool_);
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
    sl::whisper::TranscribeOptions o = greedy_t0();
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
    const sl::whisper::Transcript t = sl::whisper::transcribe(*model_, *tok_, silence, greedy_t0(), *pool_);
    QCOMPARE(t.windows, 1);
    for (const auto& s : t.segments)
        qInfo("silence heard: [%.2f %.2f]%s", s.start, s.end, s.text.c_str());
    QVERIFY(t.segments.empty());
}

void TstTranscriber::compressionRatioAsZlib() {
    // Python's len(b) / len(zlib.compress(b)) for the same bytes (faster-whisper's
    // get_compression_ratio), written down.
    std::string rep;
    for (int i = 0; i < 12; ++i) rep += "10 of clubs. ";
    rep.pop_back();
    std::string ab;
    for (int i = 0; i < 200; ++i) ab += "ab";
    QCOMPARE(sl::whisper::compression_ratio(rep), 6.458333333333333);
    QCOMPARE(sl::whisper::compression_ratio("The quarterly report shows that revenue grew by twelve "
                                            "percent in the northern region."),
             1.1025641025641026);
    QCOMPARE(sl::whisper::compression_ratio("a"), 0.1111111111111111);
    QCOMPARE(sl::whisper::compression_ratio(ab), 26.666666666666668);
    QCOMPARE(sl::whisper::compression_ratio(""), 0.0);
}

void TstTranscriber::temperatureFallback() {
    // "Ten of clubs" (pocketsphinx-testdata's cards/001.wav) said 20 times in a row: the window's
    // text repeats, its compression ratio passes 2.4, and faster-whisper's fallback decodes it
    // again by sampling at 0.2, 0.4, ... Checked: at temperature 0 alone the ratio is over the
    // threshold and nothing falls back; with the fallback the window is decoded again
    // (fallbacks > 0), the text kept is the best-scoring one among those under the threshold,
    // and a fixed seed gives the same text every time.
    const auto wav = sl::paths::samples_dir() / "audio" / "cards" / "001.wav";
    if (!std::filesystem::exists(wav))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh").arg(QString::fromStdString(wav.string()))));
    const std::vector<float> clip = sl::test::read_wav_16k_mono(wav);
    std::vector<float> audio;
    for (int i = 0; i < 20; ++i) {
        audio.insert(audio.end(), clip.begin(), clip.end());
        audio.insert(audio.end(), 3200, 0.0f);
    }
    const auto t0 = sl::whisper::transcribe(*model_, *tok_, audio, greedy_t0(), *pool_);
    QCOMPARE(t0.fallbacks, 0);
    QVERIFY(!t0.segments.empty());
    std::string text0;
    for (const auto& s : t0.segments) text0 += s.text;
    qInfo("temperature 0: ratio %.2f: %s", t0.segments.front().compression_ratio, text0.c_str());
    QVERIFY(t0.segments.front().compression_ratio > 2.4);

    sl::whisper::TranscribeOptions o;  // faster-whisper's defaults
    const auto t1 = sl::whisper::transcribe(*model_, *tok_, audio, o, *pool_);
    const auto t2 = sl::whisper::transcribe(*model_, *tok_, audio, o, *pool_);
    std::string text1, text2;
    for (const auto& s : t1.segments) text1 += s.text;
    for (const auto& s : t2.segments) text2 += s.text;
    qInfo("with the fallback: %d fallbacks, temperature %.1f, ratio %.2f, log-prob %.2f: %s",
          t1.fallbacks, t1.segments.empty() ? 0.0 : t1.segments.front().temperature,
          t1.segments.empty() ? 0.0 : t1.segments.front().compression_ratio,
          t1.segments.empty() ? 0.0 : t1.segments.front().avg_logprob, text1.c_str());
    QVERIFY(t1.fallbacks > 0);
    QCOMPARE(QString::fromStdString(text1), QString::fromStdString(text2));
    QVERIFY(!t1.segments.empty());
    for (const auto& s : t1.segments) QVERIFY(s.temperature > 0.0f);
    // Every temperature failed the ratio here (the speech itself repeats), so the kept decoding is
    // the best average log-probability of all six: never worse than temperature 0's.
    if (t1.segments.front().compression_ratio > 2.4)
        QVERIFY(t1.segments.front().avg_logprob >= t0.segments.front().avg_logprob);
}

QTEST_APPLESS_MAIN(TstTranscriber)
#include "tst_transcriber.moc"
