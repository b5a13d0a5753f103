// SentenceEmbedder (all-MiniLM-L6-v2 on Sightline's runtime) against the independent numpy
// reference tests/reference/embed/minilm_ref.py (HF tokenizers ids + a float64 numpy BERT over the
// same safetensors): same ids, cosine >= 0.9999 and small normalized error on sentences short and
// long (cut at 256 tokens), Unicode and empty; batch == one by one; thread counts agree; unit
// length; paraphrases score above unrelated pairs; and the open() errors name the file.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/embed/sentence_embedder.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

std::string long_text() {
    std::string s;
    for (int i = 0; i < 60; ++i)
        s += "R is an integrated suite of software facilities for data manipulation, calculation "
             "and graphical "
             "display. ";
    return s;
}

const std::vector<std::string> kSentences = {
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "Two men pushed carts through the woods.",
    "R provides a wide variety of statistical (linear and nonlinear modelling, classical "
    "statistical tests, "
    "time-series analysis, classification, clustering, ...) and graphical techniques, and is "
    "highly extensible. "
    "One of R's strengths is the ease with which well-designed publication-quality plots can be "
    "produced, "
    "including mathematical symbols and formulae where needed. Great care has been taken over the "
    "defaults for "
    "the minor design choices in graphics, but the user retains full control.",
    "Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
    "\xce\x9a\xce\xb1\xce\xbb\xce\xb7\xce\xbc\xce\xad\xcf\x81\xce\xb1",
    "",
    long_text(),
};

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i)
        ab += a[i] * b[i], aa += double(a[i]) * a[i], bb += b[i] * b[i];
    return ab / std::sqrt(aa * bb);
}

}  // namespace

class TstSentenceEmbedder : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesNumpyReference();
    void batchEqualsSingle();
    void threadCountsAgree();
    void semanticSanity();
    void openErrors();

private:
    std::filesystem::path dir_;
    std::unique_ptr<sl::SentenceEmbedder> emb_;
};

void TstSentenceEmbedder::initTestCase() {
    dir_ = sl::SentenceEmbedder::default_dir();
    if (!std::filesystem::exists(dir_ / "model.safetensors"))
        QSKIP(qPrintable(
            QStringLiteral("%1 is missing: run scripts/setup.sh (sentence-embedding model)")
                .arg(QString::fromStdString(dir_.string()))));
    emb_ = sl::SentenceEmbedder::open(dir_.string());
    QCOMPARE(emb_->dim(), 384);
    QCOMPARE(emb_->max_tokens(), size_t(256));
}

void TstSentenceEmbedder::matchesNumpyReference() {
    const QString python = sl::test::require_venv_python();
    QVERIFY(!python.isEmpty());
    QTemporaryDir tmp;
    const QString in = tmp.filePath(QStringLiteral("in.json")),
                  out = tmp.filePath(QStringLiteral("out.json"));
    QJsonArray texts;
    for (const auto& s : kSentences) texts.append(QString::fromStdString(s));
    QFile f(in);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(texts).toJson(QJsonDocument::Compact));
    f.close();
    QByteArray ignored;
    QVERIFY(sl::test::run_process(
        python,
        {sl::test::reference_script(QStringLiteral("embed/minilm_ref.py")), QStringLiteral("embed"),
         QString::fromStdString(dir_.string()), in, out},
        &ignored, 600000));
    QFile r(out);
    QVERIFY(r.open(QIODevice::ReadOnly));
    const QJsonObject ref = QJsonDocument::fromJson(r.readAll()).object();
    const QJsonArray ids = ref.value(QStringLiteral("ids")).toArray();
    const QJsonArray embs = ref.value(QStringLiteral("embeddings")).toArray();
    QCOMPARE(static_cast<size_t>(embs.size()), kSentences.size());

    const auto got = emb_->embed(std::span<const std::string>(kSentences));
    double worst_cos = 1.0, worst_err = 0.0;
    for (size_t i = 0; i < kSentences.size(); ++i) {
        std::vector<int32_t> want_ids;
        for (const auto& v : ids[static_cast<qsizetype>(i)].toArray())
            want_ids.push_back(v.toInt());
        QCOMPARE(emb_->tokenizer().encode(kSentences[i], 256), want_ids);
        std::vector<double> want;
        std::vector<float> want_f;
        for (const auto& v : embs[static_cast<qsizetype>(i)].toArray()) {
            want.push_back(v.toDouble());
            want_f.push_back(static_cast<float>(v.toDouble()));
        }
        QCOMPARE(got[i].size(), want.size());
        const double c = cosine(got[i], want);
        const double err = sl::test::normalized_error(got[i].data(), want_f.data(), want_f.size());
        worst_cos = std::min(worst_cos, c);
        worst_err = std::max(worst_err, err);
        QVERIFY2(c >= 0.9999,
                 qPrintable(QStringLiteral("sentence %1: cosine %2").arg(i).arg(c, 0, 'g', 8)));
        QVERIFY2(err <= 1e-3,
                 qPrintable(QStringLiteral("sentence %1: normalized error %2").arg(i).arg(err)));
    }
    QCOMPARE(ids.last().toArray().size(), 256);  // the long text is cut
    qInfo(
        "vs numpy float64 reference: worst cosine %.9f, worst normalized error %.3g over %zu texts",
        worst_cos, worst_err, kSentences.size());
}

void TstSentenceEmbedder::batchEqualsSingle() {
    const auto batch = emb_->embed(std::span<const std::string>(kSentences));
    for (size_t i = 0; i < kSentences.size(); ++i) {
        const auto one = emb_->embed(kSentences[i]);
        double norm2 = 0;
        for (float v : one) norm2 += double(v) * v;
        QVERIFY(std::abs(norm2 - 1.0) < 1e-5);
        QVERIFY2(sl::test::normalized_error(batch[i].data(), one.data(), one.size()) < 1e-5,
                 qPrintable(QStringLiteral("sentence %1").arg(i)));
    }
}

void TstSentenceEmbedder::threadCountsAgree() {
    sl::SentenceEmbedder::Options o;
    o.n_threads = 1;
    o.batch_tokens = 300;  // several batches
    const auto one = sl::SentenceEmbedder::open(dir_.string(), o);
    const auto a = one->embed(std::span<const std::string>(kSentences));
    o.n_threads = 3;
    const auto three = sl::SentenceEmbedder::open(dir_.string(), o);
    const auto b = three->embed(std::span<const std::string>(kSentences));
    for (size_t i = 0; i < a.size(); ++i)
        QVERIFY(sl::test::normalized_error(a[i].data(), b[i].data(), a[i].size()) < 1e-5);
}

void TstSentenceEmbedder::semanticSanity() {
    auto sim = [&](const char* x, const char* y) {
        return sl::SentenceEmbedder::similarity(emb_->embed(x), emb_->embed(y));
    };
    const float para1 = sim("A man is eating food.", "A man is eating a piece of bread.");
    const float para2 = sim("The new movie is awesome", "The new movie is so great");
    const float para3 =
        sim("How do I fit a linear model in R?", "Fitting linear regression models with lm()");
    const float unrel1 = sim("A man is eating food.", "A monkey is playing drums.");
    const float unrel2 = sim("The new movie is awesome", "The cat sits outside");
    const float unrel3 = sim("How do I fit a linear model in R?", "The girl is carrying a baby.");
    qInfo("paraphrases %.3f %.3f %.3f; unrelated %.3f %.3f %.3f", double(para1), double(para2),
          double(para3), double(unrel1), double(unrel2), double(unrel3));
    for (float p : {para1, para2, para3}) {
        QVERIFY(p > 0.5f);
        for (float u : {unrel1, unrel2, unrel3}) QVERIFY(p > u + 0.3f);
    }
    QCOMPARE(sim("identical text", "identical text"), sim("identical text", "identical text"));
    QVERIFY(std::abs(sim("identical text", "identical text") - 1.0f) < 1e-5f);
}

void TstSentenceEmbedder::openErrors() {
    auto expect = [](const std::string& dir, const std::string& needle) {
        try {
            sl::SentenceEmbedder::open(dir);
            QFAIL("opened a broken model directory");
        } catch (const sl::Error& e) {
            QVERIFY2(std::string(e.what()).find(needle) != std::string::npos, e.what());
        }
    };
    QTemporaryDir tmp;
    const std::string d = tmp.path().toStdString();
    expect(d + "/nope", "scripts/setup.sh");
    expect(d, d + "/model.safetensors: missing");
    // A truncated weights file.
    {
        std::ifstream src(dir_ / "model.safetensors", std::ios::binary);
        std::string head(4096, '\0');
        src.read(head.data(), 4096);
        std::ofstream(d + "/model.safetensors", std::ios::binary) << head;
    }
    std::filesystem::copy_file(dir_ / "vocab.txt", d + "/vocab.txt");
    std::ofstream(d + "/config.json") << "{}";
    expect(d, d + "/model.safetensors: header size");
    // The real weights with a broken config.
    std::filesystem::remove(d + "/model.safetensors");
    std::filesystem::create_symlink(dir_ / "model.safetensors", d + "/model.safetensors");
    std::ofstream(d + "/config.json") << R"({"hidden_act": "relu"})";
    expect(d, d + "/config.json: hidden_act 'relu'");
    std::ofstream(d + "/config.json")
        << R"({"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
        "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12})";
    QVERIFY(sl::SentenceEmbedder::open(d) != nullptr);  // that config is enough
    std::ofstream(d + "/config.json")
        << R"({"vocab_size": 30522, "hidden_size": 256, "num_hidden_layers": 6,
        "num_attention_heads": 8, "intermediate_size": 1536, "max_position_embeddings": 512,
        "type_vocab_size": 2})";
    expect(d, "model.safetensors: tensor 'embeddings.word_embeddings.weight' has shape");
    // A pooling other than the mean is refused, naming the file.
    std::ofstream(d + "/config.json")
        << R"({"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
        "num_attention_heads": 12, "intermediate_size": 1536, "max_position_embeddings": 512,
        "type_vocab_size": 2})";
    std::filesystem::create_directory(d + "/1_Pooling");
    std::ofstream(d + "/1_Pooling/config.json")
        << R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})";
    expect(d, d + "/1_Pooling/config.json: pooling_mode_mean_tokens is not true");
    std::filesystem::copy_file(dir_ / "1_Pooling" / "config.json", d + "/1_Pooling/config.json",
                               std::filesystem::copy_options::overwrite_existing);
    QVERIFY(sl::SentenceEmbedder::open(d) != nullptr);
}

QTEST_GUILESS_MAIN(TstSentenceEmbedder)
#include "tst_sentence_embedder.moc"
