// WhisperModel::from_ct2 on CTranslate2 files written here: a miniature random-weight Whisper
// (d_model 32, 2 heads, one encoder and one decoder layer, 8 audio positions, the real 51864-token
// vocabulary size) that loads, encodes, decodes greedily and by beam search and transcribes with
// word times in f32 and Q8_0 without touching memory it should not (tokens in range, times inside
// the audio); and the binding's rules one by one: a missing variable, a wrong shape, a flag it
// does not run, heads that do not divide d_model, an untied projection, another spec, each refused
// with FormatError naming the file and the variable.
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/whisper/beam_search.h"
#include "core/whisper/ct2_model.h"
#include "core/whisper/transcriber.h"
#include "core/whisper/whisper_decoder.h"
#include "core/whisper/whisper_model.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/gemm_s8.h"
#include "tests/common/test_support.h"
#include "tests/core/whisper/ct2_test_writer.h"

using Bytes = std::vector<uint8_t>;
using sl::test::Ct2Writer;

namespace {

constexpr uint32_t kD = 32, kMels = 80, kAudioCtx = 8, kTextCtx = 16, kVocab = 51864, kFfn = 64;

struct Var {
    std::string name;
    std::vector<uint32_t> shape;
    uint8_t dtype = 0;  // 0 f32, 4 f16, 1 int8, 2 int16
    Bytes data;
};

Bytes random_f16(size_t n, float scale) {
    std::normal_distribution<float> g(0.0f, scale);
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = sl::kernels::f32_to_f16(g(sl::test::rng()));
    return Ct2Writer::of(v);
}

// The variables of a miniature WhisperSpec, by name; `edit` may change them before writing.
std::vector<Var> mini_whisper() {
    std::vector<Var> v;
    auto mat = [&](const std::string& n, std::vector<uint32_t> shape, float scale = 0.2f) {
        size_t count = 1;
        for (const uint32_t s : shape) count *= s;
        v.push_back({n, std::move(shape), 4, random_f16(count, scale)});
    };
    auto ln = [&](const std::string& p) {
        v.push_back({p + "/gamma", {kD}, 0, Ct2Writer::of(std::vector<float>(kD, 1.0f))});
        v.push_back({p + "/beta", {kD}, 0, Ct2Writer::of(std::vector<float>(kD, 0.0f))});
    };
    auto linear = [&](const std::string& p, uint32_t out, uint32_t in) {
        mat(p + "/weight", {out, in});
        mat(p + "/bias", {out}, 0.05f);
    };
    v.push_back({"decoder/activation", {}, 1, Bytes{3}});
    v.push_back({"decoder/alibi", {}, 1, Bytes{0}});
    v.push_back({"decoder/num_heads", {}, 2, Ct2Writer::of(std::vector<int16_t>{2})});
    v.push_back({"decoder/pre_norm", {}, 1, Bytes{1}});
    v.push_back({"decoder/scale_embeddings", {}, 1, Bytes{0}});
    mat("decoder/embeddings/weight", {kVocab, kD}, 0.5f);
    mat("decoder/position_encodings/encodings", {kTextCtx, kD});
    ln("decoder/layer_0/self_attention/layer_norm");
    linear("decoder/layer_0/self_attention/linear_0", 3 * kD, kD);
    linear("decoder/layer_0/self_attention/linear_1", kD, kD);
    ln("decoder/layer_0/attention/layer_norm");
    linear("decoder/layer_0/attention/linear_0", kD, kD);
    linear("decoder/layer_0/attention/linear_1", 2 * kD, kD);
    linear("decoder/layer_0/attention/linear_2", kD, kD);
    ln("decoder/layer_0/ffn/layer_norm");
    linear("decoder/layer_0/ffn/linear_0", kFfn, kD);
    linear("decoder/layer_0/ffn/linear_1", kD, kFfn);
    ln("decoder/layer_norm");
    mat("encoder/conv1/weight", {kD, kMels, 3});
    mat("encoder/conv1/bias", {kD}, 0.05f);
    mat("encoder/conv2/weight", {kD, kD, 3});
    mat("encoder/conv2/bias", {kD}, 0.05f);
    v.push_back({"encoder/num_heads", {}, 2, Ct2Writer::of(std::vector<int16_t>{2})});
    mat("encoder/position_encodings/encodings", {kAudioCtx, kD});
    ln("encoder/layer_0/self_attention/layer_norm");
    linear("encoder/layer_0/self_attention/linear_0", 3 * kD, kD);
    linear("encoder/layer_0/self_attention/linear_1", kD, kD);
    ln("encoder/layer_0/ffn/layer_norm");
    linear("encoder/layer_0/ffn/linear_0", kFfn, kD);
    linear("encoder/layer_0/ffn/linear_1", kD, kFfn);
    ln("encoder/layer_norm");
    return v;
}

Bytes write(const std::vector<Var>& vars, const std::string& spec = "WhisperSpec",
            bool tie = true) {
    Ct2Writer w;
    w.header(6, spec, 3).u32(static_cast<uint32_t>(vars.size()));
    for (const Var& v : vars) w.var(v.name, v.shape, v.dtype, v.data);
    if (tie)
        w.u32(1).str("decoder/projection/weight").str("decoder/embeddings/weight");
    else
        w.u32(0);
    return w.bytes;
}

Var& find(std::vector<Var>& vars, const std::string& name) {
    for (Var& v : vars)
        if (v.name == name) return v;
    throw std::runtime_error("no variable " + name);
}

}  // namespace

class TstWhisperLoad : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void miniatureRuns_data();
    void miniatureRuns();
    void refusesWhatItCannotRun_data();
    void refusesWhatItCannotRun();
};

void TstWhisperLoad::miniatureRuns_data() {
    QTest::addColumn<bool>("q8");
    QTest::addColumn<bool>("int8");
    QTest::newRow("f32") << false << false;
    QTest::newRow("Q8_0 decoder") << true << false;
    QTest::newRow("int8") << false << true;
    QTest::newRow("int8 encoder, Q8_0 decoder (ingest's default)") << true << true;
}

void TstWhisperLoad::miniatureRuns() {
    QFETCH(bool, q8);
    QFETCH(bool, int8);
    const Bytes file = write(mini_whisper());
    const sl::Ct2Model ct2 = sl::Ct2Model::parse(file, "mini/model.bin");
    sl::whisper::WhisperLoadOptions opt;
    opt.q8_decoder = q8;
    opt.int8 = int8;
    const auto model = sl::whisper::WhisperModel::from_ct2(ct2, {}, opt);
    // Which weights each part got: int8 where the CPU has the product's vector tier.
    const bool s8 = int8 && sl::kernels::s8_gemm_fast();
    QCOMPARE(model.int8(), s8);
    QCOMPARE(model.token_embedding_q8().empty(), !q8);
    QCOMPARE(model.token_embedding_s8().empty(), !(s8 && !q8));
    QCOMPARE(model.decoder_layers()[0].up.q8.empty(), !q8);
    QCOMPARE(model.decoder_layers()[0].up.s8.empty(), !(s8 && !q8));
    QCOMPARE(model.decoder_layers()[0].cross_kv.s8.empty(), !(s8 && !q8));
    const auto& c = model.config();
    QCOMPARE(c.d_model, 32);
    QCOMPARE(c.n_audio_ctx, 8);
    QCOMPARE(c.n_text_ctx, 16);
    QCOMPARE(c.n_audio_layers, 1);
    QCOMPARE(c.n_text_layers, 1);
    QCOMPARE(model.alignment_heads().size(), size_t{2});  // the default: the second half's heads

    sl::ThreadPool pool(2);
    sl::whisper::LogMel mel;
    mel.n_mels = 80;
    mel.n_frames = 16;
    mel.data = sl::test::random_floats(80 * 16, -1.0f, 1.0f);
    std::vector<float> enc;
    model.encode(mel, enc, pool);
    QCOMPARE(enc.size(), size_t{8 * 32});
    for (const float x : enc) QVERIFY(std::isfinite(x));

    sl::whisper::WhisperDecoder dec(model);
    dec.set_audio(enc, pool);
    const auto& tk = model.tokens();
    for (const int beams : {1, 3}) {
        for (const bool timestamps : {false, true}) {
            std::vector<int> prompt{tk.sot};
            if (!timestamps) prompt.push_back(tk.no_timestamps);
            sl::whisper::GreedyOptions o;
            o.max_length = 16;  // the miniature's text context
            o.beam_size = beams;
            const auto r = sl::whisper::decode(dec, prompt, o, pool);
            QVERIFY(r.tokens.size() <= 8);
            for (const int t : r.tokens) QVERIFY(t >= 0 && t < static_cast<int>(kVocab));
            QVERIFY(std::isfinite(r.sum_logprob));
            QVERIFY(r.no_speech_prob >= 0 && r.no_speech_prob <= 1);
        }
    }
    // Long-form transcription with word times over 0.16 s windows, when the real tokenizer
    // files (same vocabulary size) are installed.
    const auto tok_dir = sl::whisper::WhisperModel::default_dir();
    if (std::filesystem::exists(tok_dir / "vocabulary.txt")) {
        const auto tok = sl::whisper::WhisperTokenizer::open(tok_dir, c.n_vocab, tk.eot);
        const std::vector<float> audio = sl::test::random_floats(16000, -0.5f, 0.5f);
        for (const int beams : {1, 2}) {
            sl::whisper::TranscribeOptions o;
            o.word_timestamps = true;
            o.beam_size = beams;
            o.no_speech_threshold = 2.0f;  // never skip a window
            const auto t = sl::whisper::transcribe(model, tok, audio, o, pool);
            QVERIFY(t.windows >= 1);
            for (const auto& s : t.segments) {
                QVERIFY(s.start >= 0 && s.end >= s.start);
                for (const int id : s.tokens) QVERIFY(id >= 0 && id < static_cast<int>(kVocab));
                for (const auto& w : s.words) QVERIFY(w.end >= w.start && w.start >= 0);
            }
        }
    }

    // The context is full after 16 tokens.
    dec.reset();
    std::vector<float> logits;
    for (int i = 0; i < 16; ++i) dec.step(tk.sot, logits, pool);
    QVERIFY_THROWS_EXCEPTION(sl::Error, dec.step(tk.sot, logits, pool));
    QVERIFY_THROWS_EXCEPTION(sl::Error, dec.step(-1, logits, pool));
}

void TstWhisperLoad::refusesWhatItCannotRun_data() {
    QTest::addColumn<int>("rule");
    QTest::addColumn<QString>("needle");
    QTest::newRow("missing variable")
        << 0 << QStringLiteral("'encoder/layer_0/ffn/linear_1/weight' is missing");
    QTest::newRow("wrong shape")
        << 1
        << QStringLiteral(
               "'decoder/layer_0/attention/linear_1/weight' has shape [96, 32], expected [64, 32]");
    QTest::newRow("post-norm layers") << 2 << QStringLiteral("'decoder/pre_norm' is 0");
    QTest::newRow("another activation") << 3 << QStringLiteral("'decoder/activation' is 1");
    QTest::newRow("heads do not divide d_model") << 4 << QStringLiteral("heads 3/2");
    QTest::newRow("untied projection") << 5 << QStringLiteral("not tied to the embeddings");
    QTest::newRow("another spec") << 6
                                  << QStringLiteral(
                                         "spec 'TransformerSpec' is not a Whisper model");
    QTest::newRow("int8 embeddings without scale")
        << 7 << QStringLiteral("has no scale variable 'decoder/embeddings/weight_scale'");
}

void TstWhisperLoad::refusesWhatItCannotRun() {
    QFETCH(int, rule);
    QFETCH(QString, needle);
    std::vector<Var> v = mini_whisper();
    std::string spec = "WhisperSpec";
    bool tie = true;
    switch (rule) {
        case 0:
            std::erase_if(
                v, [](const Var& x) { return x.name == "encoder/layer_0/ffn/linear_1/weight"; });
            break;
        case 1: {
            Var& x = find(v, "decoder/layer_0/attention/linear_1/weight");
            x.shape = {96, 32};
            x.data = random_f16(96 * 32, 0.1f);
            break;
        }
        case 2:
            find(v, "decoder/pre_norm").data = Bytes{0};
            break;
        case 3:
            find(v, "decoder/activation").data = Bytes{1};
            break;
        case 4:
            find(v, "encoder/num_heads").data = Ct2Writer::of(std::vector<int16_t>{3});
            break;
        case 5:
            tie = false;
            v.push_back({"decoder/projection/weight",
                         {kVocab, kD},
                         4,
                         random_f16(size_t{kVocab} * kD, 0.1f)});
            std::sort(v.begin(), v.end(),
                      [](const Var& a, const Var& b) { return a.name < b.name; });
            break;
        case 6:
            spec = "TransformerSpec";
            break;
        case 7: {
            Var& x = find(v, "decoder/embeddings/weight");
            x.dtype = 1;
            x.data = Bytes(size_t{kVocab} * kD, 1);
            break;
        }
        default:
            QFAIL("no such rule");
    }
    const Bytes file = write(v, spec, tie);
    const sl::Ct2Model ct2 = sl::Ct2Model::parse(file, "mini/model.bin");
    try {
        (void)sl::whisper::WhisperModel::from_ct2(ct2, {});
        QFAIL("accepted a model it cannot run");
    } catch (const sl::FormatError& e) {
        const QString msg = QString::fromStdString(e.what());
        QVERIFY2(msg.startsWith(QStringLiteral("mini/model.bin")), qPrintable(msg));
        QVERIFY2(msg.contains(needle),
                 qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg, needle)));
    }
}

QTEST_APPLESS_MAIN(TstWhisperLoad)
#include "tst_whisper_load.moc"
