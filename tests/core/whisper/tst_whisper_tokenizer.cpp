// Whisper's tokenizer (core/whisper/whisper_tokenizer.h) on the real tiny.en files against Hugging
// Face tokenizers loading the same tokenizer.json (tests/reference/whisper/tokenize_hf.py):
// encode of texts with spaces, punctuation, contractions, digits, newlines and non-Latin scripts,
// and decode of CTranslate2's greedy tokens (tests/reference/whisper/ct2_greedy.json) with special
// tokens mixed in. Skips, naming scripts/setup.sh, when the model directory is absent.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "core/whisper/whisper_model.h"
#include "core/whisper/whisper_tokenizer.h"
#include "tests/common/test_support.h"

namespace {

const std::vector<std::string> kTexts = {
    " Hello world",
    "Hello world",
    " And Mr. John Dashwood had then leisure to consider how much there might be prudently in "
    "his power to do for them.",
    " He was not an ill-disposed young man.",
    "Don't  stop\n it's 3.14159, they'll see -- \"quoted\" (parens) [1984]!",
    "   leading and trailing spaces   ",
    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82 "
    "\xce\x9a\xce\xb1\xce\xbb\xce\xb7\xce\xbc\xce\xad\xcf\x81\xce\xb1",
    "<|endoftext|> is text here, not a token",
    "",
};

}  // namespace

class TstWhisperTokenizer : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void matchesHuggingFace();
    void specialTokens();
    void refusesWrongVocabulary();

private:
    std::filesystem::path dir_;
    std::unique_ptr<sl::whisper::WhisperTokenizer> tok_;
};

void TstWhisperTokenizer::initTestCase() {
    dir_ = sl::whisper::WhisperModel::default_dir();
    if (!std::filesystem::exists(dir_ / "vocabulary.txt"))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh (Whisper tiny.en)")
                             .arg(QString::fromStdString(dir_.string()))));
    tok_ = std::make_unique<sl::whisper::WhisperTokenizer>(
        sl::whisper::WhisperTokenizer::open(dir_, 51864, 50256));
    QCOMPARE(tok_->size(), 51864);
}

void TstWhisperTokenizer::matchesHuggingFace() {
    const QString python = sl::test::require_venv_python();
    QVERIFY(!python.isEmpty());
    QFile rf(sl::test::reference_script(QStringLiteral("whisper/ct2_greedy.json")));
    QVERIFY(rf.open(QIODevice::ReadOnly));
    const QJsonArray clips =
        QJsonDocument::fromJson(rf.readAll()).object().value(QStringLiteral("clips")).toArray();
    std::vector<std::vector<int>> id_lists;
    for (const auto& c : clips) {
        std::vector<int> ids{50257, 50362};  // specials are left out of the text
        for (const auto& v : c.toObject().value(QStringLiteral("tokens")).toArray())
            ids.push_back(v.toInt());
        ids.push_back(50256);
        id_lists.push_back(ids);
    }
    id_lists.push_back({50363, 843, 50400, 1770});  // timestamps among the text

    QJsonArray texts, ids_json;
    for (const auto& t : kTexts) texts.append(QString::fromStdString(t));
    for (const auto& ids : id_lists) {
        QJsonArray a;
        for (const int id : ids) a.append(id);
        ids_json.append(a);
    }
    QTemporaryDir tmp;
    const QString in = tmp.filePath(QStringLiteral("in.json")),
                  out = tmp.filePath(QStringLiteral("out.json"));
    QFile f(in);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(
                QJsonObject{{QStringLiteral("texts"), texts}, {QStringLiteral("ids"), ids_json}})
                .toJson(QJsonDocument::Compact));
    f.close();
    QVERIFY(
        sl::test::run_process(python,
                              {sl::test::reference_script(QStringLiteral("whisper/tokenize_hf.py")),
                               QString::fromStdString(dir_.string()), in, out},
                              nullptr));
    QFile o(out);
    QVERIFY(o.open(QIODevice::ReadOnly));
    const QJsonObject ref = QJsonDocument::fromJson(o.readAll()).object();
    const QJsonArray enc = ref.value(QStringLiteral("encode")).toArray();
    const QJsonArray dec = ref.value(QStringLiteral("decode")).toArray();
    QCOMPARE(static_cast<size_t>(enc.size()), kTexts.size());
    QCOMPARE(static_cast<size_t>(dec.size()), id_lists.size());
    for (size_t i = 0; i < kTexts.size(); ++i) {
        std::vector<int> want;
        for (const auto& v : enc[static_cast<qsizetype>(i)].toArray()) want.push_back(v.toInt());
        const std::vector<int> got = tok_->encode(kTexts[i]);
        for (const int id : got) QVERIFY(id < 50256);
        // Hugging Face matches added tokens written in the text ("<|endoftext|>" becomes 50256);
        // Sightline never turns text into control tokens, so that case differs on purpose.
        if (kTexts[i].find("<|") == std::string::npos) QVERIFY2(got == want, kTexts[i].c_str());
        QCOMPARE(tok_->decode_text(got), kTexts[i]);  // byte-level BPE round-trips exactly
    }
    for (size_t i = 0; i < id_lists.size(); ++i) {
        QCOMPARE(QString::fromStdString(tok_->decode_text(id_lists[i])),
                 dec[static_cast<qsizetype>(i)].toString());
    }
}

void TstWhisperTokenizer::specialTokens() {
    QCOMPARE(tok_->token_text(50256), std::string("<|endoftext|>"));
    QCOMPARE(tok_->token_text(50257), std::string("<|startoftranscript|>"));
    QCOMPARE(tok_->token_text(50362), std::string("<|notimestamps|>"));
    QCOMPARE(tok_->token_text(50363), std::string("<|0.00|>"));
    QCOMPARE(tok_->token_text(51863), std::string("<|30.00|>"));
    QCOMPARE(tok_->token_text(220), std::string("\xc4\xa0"));  // "Ġ", a lone space
}

void TstWhisperTokenizer::refusesWrongVocabulary() {
    QVERIFY_THROWS_EXCEPTION(sl::FormatError,
                             sl::whisper::WhisperTokenizer::open(dir_, 51865, 50256));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError,
                             sl::whisper::WhisperTokenizer::open(dir_, 51864, 50257));
    QVERIFY_THROWS_EXCEPTION(sl::IoError,
                             sl::whisper::WhisperTokenizer::open(dir_ / "nope", 51864, 50256));
}

QTEST_APPLESS_MAIN(TstWhisperTokenizer)
#include "tst_whisper_tokenizer.moc"
