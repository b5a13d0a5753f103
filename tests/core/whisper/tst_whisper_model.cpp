// Whisper tiny.en on Sightline's CPU kernels against CTranslate2 itself (the runtime of
// faster-whisper) on the same model file: tests/reference/whisper/ct2_greedy.json holds, for the
// five LibriVox clips of pocketsphinx-testdata, CTranslate2's encoder output rows (float32
// compute) and its greedy tokens from <|startoftranscript|><|notimestamps|>
// (make_ct2_reference.py regenerates it). Features come from core/whisper/log_mel on the clip
// padded with 30 s of zeros, the first 3000 frames. Checks: encoder rows by normalized error,
// greedy tokens equal, also with the decoder's weights in Q8_0; load and run times are printed.
// Skips, naming scripts/setup.sh, when the model or the clips are absent.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/whisper/log_mel.h"
#include "core/whisper/whisper_decoder.h"
#include "core/whisper/whisper_model.h"
#include "tests/common/test_support.h"
#include "tests/core/whisper/wav_file.h"

namespace {

// Whisper's features for one 30 s window: the clip, 30 s of zeros after it, the first 3000 frames.
sl::whisper::LogMel window_features(const std::vector<float>& audio) {
    std::vector<float> padded = audio;
    padded.resize(audio.size() + sl::whisper::kChunkSamples, 0.0f);
    sl::whisper::LogMel all = sl::whisper::log_mel_spectrogram(padded);
    sl::whisper::LogMel w;
    w.n_mels = all.n_mels;
    w.n_frames = sl::whisper::kChunkFrames;
    w.data.resize(static_cast<size_t>(w.n_mels) * static_cast<size_t>(w.n_frames));
    for (int m = 0; m < w.n_mels; ++m)
        std::copy_n(all.data.begin() + static_cast<ptrdiff_t>(m * all.n_frames), w.n_frames,
                    w.data.begin() + static_cast<ptrdiff_t>(m * w.n_frames));
    return w;
}

QString ints(const std::vector<int>& v) {
    QStringList s;
    for (const int x : v) s << QString::number(x);
    return s.join(QLatin1Char(' '));
}

}  // namespace

class TstWhisperModel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void config();
    void matchesCTranslate2_data();
    void matchesCTranslate2();
    void refusesWrongFeatures();

private:
    std::unique_ptr<sl::whisper::WhisperModel> model_, model_q8_;
    std::unique_ptr<sl::ThreadPool> pool_;
    QJsonObject ref_;
};

void TstWhisperModel::initTestCase() {
    const auto dir = sl::whisper::WhisperModel::default_dir();
    if (!std::filesystem::exists(dir / "model.bin"))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh (Whisper tiny.en)")
                             .arg(QString::fromStdString(dir.string()))));
    pool_ = std::make_unique<sl::ThreadPool>(2);
    QElapsedTimer timer;
    timer.start();
    model_ = std::make_unique<sl::whisper::WhisperModel>(sl::whisper::WhisperModel::open(dir));
    qInfo("loaded %s in %lld ms", dir.c_str(), static_cast<long long>(timer.elapsed()));
    timer.restart();
    sl::whisper::WhisperLoadOptions q8;
    q8.q8_decoder = true;
    model_q8_ =
        std::make_unique<sl::whisper::WhisperModel>(sl::whisper::WhisperModel::open(dir, q8));
    qInfo("loaded it with a Q8_0 decoder in %lld ms", static_cast<long long>(timer.elapsed()));
    QFile f(sl::test::reference_script(QStringLiteral("whisper/ct2_greedy.json")));
    QVERIFY(f.open(QIODevice::ReadOnly));
    ref_ = QJsonDocument::fromJson(f.readAll()).object();
    QVERIFY(!ref_.isEmpty());
}

void TstWhisperModel::config() {
    const auto& c = model_->config();
    QCOMPARE(c.n_mels, 80);
    QCOMPARE(c.n_audio_ctx, 1500);
    QCOMPARE(c.n_text_ctx, 448);
    QCOMPARE(c.d_model, 384);
    QCOMPARE(c.n_audio_heads, 6);
    QCOMPARE(c.n_text_heads, 6);
    QCOMPARE(c.n_audio_layers, 4);
    QCOMPARE(c.n_text_layers, 4);
    QCOMPARE(c.n_ffn, 1536);
    QCOMPARE(c.n_vocab, 51864);
    QVERIFY(!c.multilingual());
    const auto& t = model_->tokens();
    QCOMPARE(t.eot, 50256);
    QCOMPARE(t.sot, 50257);
    QCOMPARE(t.translate, 50357);
    QCOMPARE(t.transcribe, 50358);
    QCOMPARE(t.no_speech, 50361);
    QCOMPARE(t.no_timestamps, 50362);
    QCOMPARE(t.timestamp_begin, 50363);
    QCOMPARE(model_->suppress_ids().size(), size_t{90});
    QCOMPARE(model_->suppress_ids_begin(), (std::vector<int>{220, 50256}));
}

void TstWhisperModel::matchesCTranslate2_data() {
    QTest::addColumn<int>("clip");
    QTest::addColumn<bool>("q8");
    const QJsonArray clips = ref_.value(QStringLiteral("clips")).toArray();
    for (const bool q8 : {false, true}) {
        for (qsizetype i = 0; i < clips.size(); ++i) {
            const QString name = clips[i].toObject().value(QStringLiteral("file")).toString() +
                                 (q8 ? QStringLiteral(", Q8_0 decoder") : QString());
            QTest::newRow(qPrintable(name)) << static_cast<int>(i) << q8;
        }
    }
}

void TstWhisperModel::matchesCTranslate2() {
    QFETCH(int, clip);
    QFETCH(bool, q8);
    const sl::whisper::WhisperModel& model = q8 ? *model_q8_ : *model_;
    const QJsonObject r = ref_.value(QStringLiteral("clips")).toArray()[clip].toObject();
    const auto wav = sl::paths::samples_dir() / "audio" / "librivox" /
                     r.value(QStringLiteral("file")).toString().toStdString();
    if (!std::filesystem::exists(wav))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh")
                             .arg(QString::fromStdString(wav.string()))));
    const std::vector<float> audio = sl::test::read_wav_16k_mono(wav);
    QCOMPARE(static_cast<qint64>(audio.size()), r.value(QStringLiteral("samples")).toInteger());

    QElapsedTimer timer;
    timer.start();
    const sl::whisper::LogMel mel = window_features(audio);
    const double mel_ms = timer.nsecsElapsed() / 1e6;
    timer.restart();
    std::vector<float> enc;
    model.encode(mel, enc, *pool_);
    const double enc_ms = timer.nsecsElapsed() / 1e6;

    // Encoder: the reference rows by normalized error, and the whole output's sums.
    const int64_t d = model.config().d_model;
    const QJsonArray rows = ref_.value(QStringLiteral("encoder_rows")).toArray();
    const QJsonArray want_rows = r.value(QStringLiteral("encoder_rows")).toArray();
    QCOMPARE(rows.size(), want_rows.size());
    std::vector<float> got, want;
    for (qsizetype i = 0; i < rows.size(); ++i) {
        const int64_t row = rows[i].toInt();
        got.insert(got.end(), enc.begin() + row * d, enc.begin() + (row + 1) * d);
        for (const auto& v : want_rows[i].toArray())
            want.push_back(static_cast<float>(v.toDouble()));
    }
    QCOMPARE(got.size(), want.size());
    const double enc_err = sl::test::normalized_error(got.data(), want.data(), got.size());
    double sumsq = 0;
    for (const float v : enc) sumsq += double(v) * v;
    const double want_sumsq = r.value(QStringLiteral("encoder_sumsq")).toDouble();

    // Greedy decoding without timestamps.
    timer.restart();
    sl::whisper::WhisperDecoder dec(model);
    dec.set_audio(enc, *pool_);
    const auto& t = model.tokens();
    const std::vector<int> prompt{t.sot, t.no_timestamps};
    const sl::whisper::GreedyResult res = sl::whisper::greedy_decode(dec, prompt, {}, *pool_);
    const double dec_ms = timer.nsecsElapsed() / 1e6;
    std::vector<int> want_tokens;
    for (const auto& v : r.value(QStringLiteral("tokens")).toArray())
        want_tokens.push_back(v.toInt());

    const double want_score = r.value(QStringLiteral("score")).toDouble();
    // CTranslate2's score: the sum of log-probabilities over the generated tokens and the end
    // token, divided by the number of generated tokens (length_penalty 1; the end token is not
    // part of the hypothesis).
    const double score =
        res.sum_logprob / static_cast<double>(std::max<size_t>(res.tokens.size(), 1));
    qInfo(
        "%.2f s of audio: features %.1f ms, encoder %.0f ms, decoder %.0f ms (%zu tokens); "
        "encoder rows normalized error %.2e, sum of squares %.6g vs %.6g; score %.5f vs %.5f",
        static_cast<double>(audio.size()) / 16000.0, mel_ms, enc_ms, dec_ms, res.tokens.size(),
        enc_err, sumsq, want_sumsq, score, want_score);
    QVERIFY2(enc_err < 1e-4, qPrintable(QString::number(enc_err)));
    QVERIFY2(std::abs(sumsq - want_sumsq) < 1e-3 * want_sumsq, qPrintable(QString::number(sumsq)));
    QVERIFY(res.reached_eot);
    QVERIFY2(res.tokens == want_tokens,
             qPrintable(
                 QStringLiteral("\n got: %1\nwant: %2").arg(ints(res.tokens), ints(want_tokens))));
    // float32 decoding reproduces CTranslate2's float32 scores; Q8_0 weights move them a little.
    QVERIFY2(std::abs(score - want_score) < (q8 ? 1e-2 : 2e-4), qPrintable(QString::number(score)));
}

void TstWhisperModel::refusesWrongFeatures() {
    sl::whisper::LogMel mel;
    mel.n_mels = 80;
    mel.n_frames = 2999;
    mel.data.assign(80 * 2999, 0.0f);
    std::vector<float> out;
    QVERIFY_THROWS_EXCEPTION(sl::Error, model_->encode(mel, out, *pool_));
    sl::whisper::WhisperDecoder dec(*model_);
    std::vector<float> logits;
    QVERIFY_THROWS_EXCEPTION(sl::Error, dec.step(50257, logits, *pool_));  // no audio yet
    QVERIFY_THROWS_EXCEPTION(sl::Error, dec.set_audio(std::vector<float>(10), *pool_));
}

QTEST_APPLESS_MAIN(TstWhisperModel)
#include "tst_whisper_model.moc"
