// Whisper's log-mel front end (core/whisper/log_mel.h) against the independent numpy reference
// tests/reference/whisper/log_mel_ref.py (float64, numpy's FFT, librosa's filterbank formulas):
// the filterbank, and features of fresh random audio of odd lengths (noise, tones over noise,
// speech-like bursts with silence, a clip padded with 30 s of zeros as the transcriber does) by
// normalized error; frame counts; a tone lands in the mel bin of its frequency.
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <random>
#include <vector>

#include "core/util/error.h"
#include "core/whisper/log_mel.h"
#include "tests/common/test_support.h"

namespace {

bool write_f32(const QString& path, const std::vector<float>& v) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return false;
    const auto n = static_cast<qint64>(v.size() * sizeof(float));
    return f.write(reinterpret_cast<const char*>(v.data()), n) == n;
}

std::vector<float> read_f32(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QByteArray b = f.readAll();
    std::vector<float> v(static_cast<size_t>(b.size()) / sizeof(float));
    std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
    return v;
}

enum class Kind { Noise, Tones, Bursts, Padded };

// Fresh audio of `n` samples (plus 30 s of zeros for Padded).
std::vector<float> make_audio(Kind kind, size_t n) {
    auto& g = sl::test::rng();
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    std::vector<float> a(n);
    switch (kind) {
        case Kind::Noise:
            for (auto& x : a) x = 0.3f * normal(g);
            break;
        case Kind::Tones: {
            const double f1 = 100 + 3000 * uni(g), f2 = 3000 + 4900 * uni(g);
            for (size_t i = 0; i < n; ++i) {
                const double t = static_cast<double>(i) / sl::whisper::kSampleRate;
                a[i] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * f1 * t) +
                                          0.1 * std::sin(2 * std::numbers::pi * f2 * t)) +
                       0.01f * normal(g);
            }
            break;
        }
        case Kind::Bursts:  // loud bursts between stretches of exact silence: the clamp matters
            for (size_t i = 0; i < n; ++i) a[i] = ((i / 4000) % 3 == 1) ? 0.8f * normal(g) : 0.0f;
            break;
        case Kind::Padded:
            for (auto& x : a) x = 0.1f * normal(g);
            a.resize(n + sl::whisper::kChunkSamples, 0.0f);
            break;
    }
    return a;
}

}  // namespace

class TstLogMel : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void frameCounts();
    void toneLandsInItsBin();
    void matchesNumpy_data();
    void matchesNumpy();
    void windowsMatchWhole_data();
    void windowsMatchWhole();

private:
    QString python_;
};

void TstLogMel::initTestCase() {
    python_ = sl::test::require_venv_python();
}

void TstLogMel::frameCounts() {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{159}, size_t{160}, size_t{161}, size_t{399},
                           size_t{48017}}) {
        const std::vector<float> a(n, 0.25f);
        const auto m = sl::whisper::log_mel_spectrogram(a);
        QCOMPARE(m.n_mels, 80);
        QCOMPARE(m.n_frames, static_cast<int64_t>(n / 160));
        QCOMPARE(m.data.size(), static_cast<size_t>(80 * (n / 160)));
        for (const float v : m.data) QVERIFY(std::isfinite(v));
    }
}

void TstLogMel::toneLandsInItsBin() {
    // A 1 kHz tone: the strongest mel bin is the one whose triangle peaks nearest 1 kHz.
    std::vector<float> a(16000);
    for (size_t i = 0; i < a.size(); ++i)
        a[i] = static_cast<float>(std::sin(2 * std::numbers::pi * 1000.0 * i / 16000.0));
    const auto m = sl::whisper::log_mel_spectrogram(a);
    const auto filters = sl::whisper::mel_filters(80);
    const int64_t t = m.n_frames / 2;
    int best = 0, best_filter = 0;
    for (int k = 0; k < 80; ++k) {
        if (m.data[static_cast<size_t>(k * m.n_frames + t)] >
            m.data[static_cast<size_t>(best * m.n_frames + t)])
            best = k;
        // Bin 25 is 1 kHz (40 Hz per bin).
        if (filters[static_cast<size_t>(k * 201 + 25)] >
            filters[static_cast<size_t>(best_filter * 201 + 25)])
            best_filter = k;
    }
    QCOMPARE(best, best_filter);
    // At 1 kHz the Slaney scale is linear up to mel 15: 80 filters over 0..8 kHz put it near 27.
    QVERIFY2(best > 20 && best < 35, qPrintable(QString::number(best)));
}

void TstLogMel::matchesNumpy_data() {
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("samples");
    QTest::addColumn<int>("n_mels");
    QTest::newRow("noise, 3 s + 137") << int(Kind::Noise) << 48137 << 80;
    QTest::newRow("noise, 401 samples") << int(Kind::Noise) << 401 << 80;
    QTest::newRow("tones over noise, 7.3 s") << int(Kind::Tones) << 116813 << 80;
    QTest::newRow("bursts and silence, 5 s + 61") << int(Kind::Bursts) << 80061 << 80;
    QTest::newRow("2.5 s + 30 s of zeros") << int(Kind::Padded) << 40003 << 80;
    QTest::newRow("noise, 128 mels (large-v3)") << int(Kind::Noise) << 33333 << 128;
}

void TstLogMel::matchesNumpy() {
    QFETCH(int, kind);
    QFETCH(int, samples);
    QFETCH(int, n_mels);
    QVERIFY(!python_.isEmpty());
    const std::vector<float> audio =
        make_audio(static_cast<Kind>(kind), static_cast<size_t>(samples));

    QElapsedTimer timer;
    timer.start();
    const auto got = sl::whisper::log_mel_spectrogram(audio, n_mels);
    const double ms = timer.nsecsElapsed() / 1e6;

    QTemporaryDir tmp;
    const QString in = tmp.filePath(QStringLiteral("audio.f32")),
                  out = tmp.filePath(QStringLiteral("mel.f32")),
                  filt = tmp.filePath(QStringLiteral("filters.f32"));
    QVERIFY(write_f32(in, audio));
    QVERIFY(
        sl::test::run_process(python_,
                              {sl::test::reference_script(QStringLiteral("whisper/log_mel_ref.py")),
                               in, QString::number(n_mels), out, filt},
                              nullptr));
    const std::vector<float> want = read_f32(out);
    QCOMPARE(want.size(), got.data.size());
    QCOMPARE(got.n_frames, static_cast<int64_t>(audio.size() / 160));

    const std::vector<float> want_filters = read_f32(filt);
    const std::vector<float> filters = sl::whisper::mel_filters(n_mels);
    QCOMPARE(filters.size(), want_filters.size());
    const double filter_err =
        sl::test::normalized_error(filters.data(), want_filters.data(), filters.size());

    const double err = sl::test::normalized_error(got.data.data(), want.data(), want.size());
    double max_abs = 0;
    for (size_t i = 0; i < want.size(); ++i)
        max_abs = std::max(max_abs, std::abs(double(got.data[i]) - want[i]));
    qInfo(
        "%lld frames in %.2f ms; filterbank error %.2e; features: normalized error %.2e, max "
        "abs error %.2e",
        static_cast<long long>(got.n_frames), ms, filter_err, err, max_abs);
    QVERIFY2(filter_err < 1e-6, qPrintable(QString::number(filter_err)));
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    QVERIFY2(max_abs < 2e-4, qPrintable(QString::number(max_abs)));
}

void TstLogMel::windowsMatchWhole_data() {
    QTest::addColumn<int>("samples");
    QTest::newRow("65 s + 77") << 16000 * 65 + 77;
    QTest::newRow("31 s + 1") << 16000 * 31 + 1;
    QTest::newRow("1001 samples") << 1001;
    QTest::newRow("450 samples") << 450;
}

void TstLogMel::windowsMatchWhole() {
    // log_mel_max + log_mel_window (the streaming path) against the one-pass features of the
    // whole signal, on windows at the start, in the middle, at the end and of one frame.
    QFETCH(int, samples);
    const std::vector<float> audio = make_audio(Kind::Bursts, static_cast<size_t>(samples));
    const auto whole = sl::whisper::log_mel_spectrogram(audio);
    struct Counting : sl::whisper::AudioSource {
        explicit Counting(std::span<const float> s) : inner(s) {}
        int64_t size() const override { return inner.size(); }
        void read(int64_t begin, int64_t n, float* out) override {
            max_read = std::max(max_read, n);
            total += n;
            inner.read(begin, n, out);
        }
        sl::whisper::SpanAudioSource inner;
        int64_t max_read = 0, total = 0;
    } source(audio);
    const float max_log = sl::whisper::log_mel_max(source);
    QVERIFY2(source.max_read <= 30 * 16000 + 400, qPrintable(QString::number(source.max_read)));
    QVERIFY(source.total < samples + samples / 10 + 1000);  // one pass, small overlaps
    const int64_t F = whole.n_frames;
    std::uniform_int_distribution<int64_t> any(0, std::max<int64_t>(F - 1, 0));
    std::vector<std::pair<int64_t, int64_t>> windows{
        {0, std::min<int64_t>(F, 3000)},
        {F - 1, 1},
        {std::max<int64_t>(F - 3000, 0), std::min<int64_t>(F, 3000)},
        {0, 1},
        {0, F}};
    for (int i = 0; i < 4; ++i) {
        const int64_t f0 = any(sl::test::rng());
        windows.emplace_back(f0, std::min<int64_t>(F - f0, 1 + any(sl::test::rng()) % 3000));
    }
    double worst = 0;
    for (const auto& [f0, nf] : windows) {
        const auto w = sl::whisper::log_mel_window(source, f0, nf, max_log);
        QCOMPARE(w.n_frames, nf);
        for (int m = 0; m < 80; ++m)
            for (int64_t t = 0; t < nf; ++t)
                worst = std::max(worst, std::abs(double(w.data[static_cast<size_t>(m * nf + t)]) -
                                                 whole.data[static_cast<size_t>(m * F + f0 + t)]));
    }
    qInfo("%lld frames: worst difference over %zu windows %.3g", static_cast<long long>(F),
          windows.size(), worst);
    QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst)));
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::whisper::log_mel_window(source, F, 1, max_log));
}

QTEST_APPLESS_MAIN(TstLogMel)
#include "tst_log_mel.moc"
