// The default model's tokenizer against Hugging Face tokenizers (an independent implementation),
// run from the venv of scripts/setup.sh by tests/reference/tokenizer/encode_hf.py: same ids on
// real text (R-intro.pdf through pdftotext), code, numbers, Unicode, white space and special
// tokens; the pre-tokenizers of Llama 3 / Qwen2 / GPT-2 / SmolLM / o200k (MiniMax-M2) against HF's regex splitting;
// lossless round trips; and encode speed next to HF's on the same text.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/pretokenize.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/assets.h"
#include "core/util/paths.h"
#include "tests/common/test_support.h"

namespace {

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

std::filesystem::path venv_python() {
    const char* v = std::getenv("SIGHTLINE_VENV");
    const std::filesystem::path venv =
        (v && *v) ? std::filesystem::path(v) : sl::paths::cache_dir() / "venv";
    return venv / "bin" / "python";
}

// Runs encode_hf.py with `args`; fails the test (naming the set-up script) when it cannot.
bool run_reference(const QStringList& args, QString* err) {
    const std::filesystem::path py = venv_python();
    if (!std::filesystem::exists(py)) {
        *err = q(py.string() + " is missing: run " + sl::paths::setup_command());
        return false;
    }
    QProcess p;
    p.start(q(py.string()), QStringList{QStringLiteral(SIGHTLINE_SOURCE_DIR
                                                       "/tests/reference/tokenizer/encode_hf.py")} +
                                args);
    if (!p.waitForFinished(600000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        *err = QStringLiteral(
                   "encode_hf.py %1 failed (run %2 if the tokenizers package is missing): %3")
                   .arg(args.value(0), QString::fromLatin1(sl::paths::setup_command()),
                        QString::fromUtf8(p.readAllStandardError()));
        return false;
    }
    return true;
}

QJsonObject read_json(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

bool write_json(const QString& path, const QJsonObject& o) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly) &&
           f.write(QJsonDocument(o).toJson(QJsonDocument::Compact)) > 0;
}

std::string s(const QJsonValue& v) {
    return v.toString().toStdString();
}

// The reference's metadata dump -> TokenizerData (what the GGUF adapter will fill in).
sl::TokenizerData data_from_json(const QJsonObject& o, const std::string& name) {
    sl::TokenizerData d;
    d.name = name;
    d.model = s(o[QStringLiteral("model")]);
    d.pre = s(o[QStringLiteral("pre")]);
    for (const auto& t : o[QStringLiteral("tokens")].toArray()) d.tokens.push_back(s(t));
    for (const auto& t : o[QStringLiteral("token_types")].toArray())
        d.token_types.push_back(t.toInt());
    for (const auto& t : o[QStringLiteral("scores")].toArray())
        d.scores.push_back(float(t.toDouble()));
    for (const auto& t : o[QStringLiteral("merges")].toArray()) d.merges.push_back(s(t));
    d.bos_id = o[QStringLiteral("bos_id")].toInt();
    d.eos_id = o[QStringLiteral("eos_id")].toInt();
    d.eot_id = o[QStringLiteral("eot_id")].toInt();
    d.unk_id = o[QStringLiteral("unk_id")].toInt();
    d.pad_id = o[QStringLiteral("pad_id")].toInt();
    d.add_bos = o[QStringLiteral("add_bos")].toBool();
    d.add_eos = o[QStringLiteral("add_eos")].toBool();
    d.add_space_prefix = o[QStringLiteral("add_space_prefix")].toBool();
    d.chat_template = s(o[QStringLiteral("chat_template")]);
    return d;
}

QString show_ids(const std::vector<int32_t>& v, size_t from) {
    QStringList l;
    for (size_t i = from; i < v.size() && i < from + 12; ++i) l << QString::number(v[i]);
    return l.join(QLatin1Char(' '));
}

struct Case {
    std::string text;
    bool parse_special;
};

std::vector<Case> hand_cases() {
    std::vector<Case> c;
    for (const char* t : {
             "Hello world",
             "Hello, world! It's a test; they're here, we've been, I'm, you'll, he'd.",
             "IT'S SHOUTING",
             "don't 's 't ''s",
             "1234567",
             "x = 3.14159 * 2e10 - 0x1F;",
             "v2.10.3",
             "Call 555-0100 at 10:30 on 2024-07-26",
             "  leading and trailing  ",
             "a  b   c    d",
             "tabs\tand\t\ttabs",
             "line\nbreak\n\nparagraph\n\n\n",
             "windows\r\nline\r\nends\r\n",
             "\n\n  \n\t\n",
             " ",
             "",
             "      x",
             "def f(x):\n    return x**2  # square\n",
             "for (int i = 0; i < n; ++i) { sum += a[i]; }",
             "<html><body class=\"x\">&amp;</body></html>",
             "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe",
             "e\u0301 a\u0308 combining marks",
             "\u4e2d\u6587\u5b57\u7b26 \u65e5\u672c\u8a9e\u306e\u6587\u7ae0",
             "\ud55c\uad6d\uc5b4 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 "
             "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea",
             "emoji \U0001F600\U0001F44D\U0001F3FD family "
             "\U0001F468\u200D\U0001F469\u200D\U0001F467",
             "\u0663\u0664 \u00bd \u2167 \u2460 numbers",
             "no\u00a0break\u3000ideographic\u2009thin",
             "\u001c\u001d\u001e\u001f info separators",
             "ﬁ ligature ＦＵＬＬ width",
             "\U00040000 plane-4 and \u00c0 and \u00ff need bytes the vocab lacks",
             "price: $1,234.56 (approx.) -- 50% off!!!",
             "He said \"yes\"... 'no' \u201cquoted\u201d \u2014 dash",
             "https://example.com/path?q=1&r=two#frag",
             "user@example.com",
             "snake_case camelCase",
         }) {
        c.push_back({t, false});
    }
    c.push_back({"<|im_start|>user\nWhat is R?<|im_end|>\n<|im_start|>assistant\n", true});
    c.push_back({"<|im_start|>user\nWhat is R?<|im_end|>\n", false});
    c.push_back({"<|endoftext|><|im_end|><|im_start|><repo_name>x<file_sep>", true});
    c.push_back({"<|im_start|<|im_end|>>", true});
    return c;
}

}  // namespace

class TstTokenizerHf : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void sameIdsAsHf();
    void pretokenizersMatchHf();
    void roundTrip();
    void encodeSpeed();
    void chatTemplateOfModel();

private:
    bool ready_ = false;
    QTemporaryDir tmp_;
    std::filesystem::path model_;
    std::unique_ptr<sl::Tokenizer> tok_;
    std::string rintro_;              // R-intro.pdf as text
    std::vector<std::string> paras_;  // its paragraphs
    double hf_seconds_ = 0, hf_para_seconds_ = 0;
    qint64 hf_tokens_ = 0, hf_para_tokens_ = 0;
    QString hf_version_;
};

void TstTokenizerHf::initTestCase() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    model_ = model;
    QVERIFY(tmp_.isValid());
    QString err;
    const QString vocab = tmp_.filePath(QStringLiteral("vocab.json"));
    QVERIFY2(run_reference({QStringLiteral("vocab"), q(model.string()), vocab}, &err),
             qPrintable(err));
    tok_ = sl::Tokenizer::create(data_from_json(read_json(vocab), model.string()));
    QCOMPARE(tok_->vocab_size(), 49152);
    QCOMPARE(tok_->data().pre, std::string("smollm"));

    QProcess p;
    const QString txt = tmp_.filePath(QStringLiteral("r-intro.txt"));
    p.start(QStringLiteral("pdftotext"),
            {QStringLiteral("-enc"), QStringLiteral("UTF-8"), q(pdf.string()), txt});
    QVERIFY2(p.waitForFinished(120000) && p.exitCode() == 0,
             qPrintable(QStringLiteral("pdftotext failed (poppler-utils: run %1)")
                            .arg(QString::fromLatin1(sl::paths::setup_command()))));
    std::ifstream f(txt.toStdString(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    rintro_ = ss.str();
    QVERIFY(rintro_.size() > 100000);
    for (size_t at = 0; at < rintro_.size();) {
        size_t end = rintro_.find("\n\n", at);
        if (end == std::string::npos) end = rintro_.size();
        if (end > at) paras_.push_back(rintro_.substr(at, end - at));
        at = end + 2;
    }
    ready_ = true;
}

void TstTokenizerHf::sameIdsAsHf() {
    QVERIFY(ready_);
    std::vector<Case> cases = hand_cases();
    for (const auto& p : paras_) cases.push_back({p, false});
    cases.push_back({rintro_.substr(0, 60000), false});  // a long text in one call
    QJsonArray arr;
    for (const auto& c : cases) {
        arr.append(QJsonObject{{QStringLiteral("text"), q(c.text)},
                               {QStringLiteral("parse_special"), c.parse_special}});
    }
    const QString in = tmp_.filePath(QStringLiteral("in.json")),
                  out = tmp_.filePath(QStringLiteral("out.json"));
    QVERIFY(write_json(
        in, QJsonObject{{QStringLiteral("cases"), arr}, {QStringLiteral("bench"), q(rintro_)}}));
    QString err;
    QVERIFY2(run_reference({QStringLiteral("encode"), q(model_.string()), in, out}, &err),
             qPrintable(err));
    const QJsonObject res = read_json(out);
    const QJsonArray ids = res[QStringLiteral("ids")].toArray();
    QCOMPARE(size_t(ids.size()), cases.size());
    hf_seconds_ = res[QStringLiteral("bench_seconds")].toDouble();
    hf_tokens_ = res[QStringLiteral("bench_tokens")].toInteger();
    hf_para_seconds_ = res[QStringLiteral("bench_para_seconds")].toDouble();
    hf_para_tokens_ = res[QStringLiteral("bench_para_tokens")].toInteger();
    size_t tokens = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        std::vector<int32_t> want;
        for (const auto& v : ids[qsizetype(i)].toArray()) want.push_back(v.toInt());
        const std::vector<int32_t> got = tok_->encode(cases[i].text, false, cases[i].parse_special);
        tokens += got.size();
        if (got != want) {
            size_t k = 0;
            while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
            QFAIL(qPrintable(
                QStringLiteral(
                    "case %1 (%2 tokens) differs at token %3: got [%4] want [%5]; text: %6")
                    .arg(i)
                    .arg(want.size())
                    .arg(k)
                    .arg(show_ids(got, k), show_ids(want, k), q(cases[i].text.substr(0, 200)))));
        }
    }
    hf_version_ = res[QStringLiteral("tokenizers")].toString();
    qInfo("%zu cases, %zu tokens: identical to HF tokenizers %s", cases.size(), tokens,
          qPrintable(hf_version_));
}

void TstTokenizerHf::pretokenizersMatchHf() {
    QVERIFY(ready_);
    // Text that exercises each rule of the four patterns, plus random mixes of tricky pieces.
    std::vector<std::string> texts;
    for (const auto& c : hand_cases()) texts.push_back(c.text);
    for (size_t i = 0; i < paras_.size() && i < 150; ++i)
        texts.push_back(paras_[i * 7 % paras_.size()]);
    const std::vector<std::string> bits{
        " ",      "  ",     "\n",         "\r\n",   "\t", "a",    "Z",      "7",      "123",
        "'s",     "'LL",    "'",          "\"",     "(",  "...",  "\u00e9", "\u4e2d", "\u0663",
        "\u00a0", "\u3000", "\U0001F600", "\u0301", "\r", " \n ", "x1y",    "__",
        // letter cases for the o200k pattern: upper, title (U+01C5), modifier (U+02B0), Greek,
        // Cyrillic, a combining mark after a capital, contractions after capitals, slashes
        "HELLO",  "Hello",  "iPhone",     "\u01c5", "\u02b0", "\u03a9\u03c9", "\u0416\u0436", "A\u0308",
        "'S",     "'Re",    "/",          "//\n",  "\u0903", "\u00df", "\u1e9e"};
    std::uniform_int_distribution<size_t> pick(0, bits.size() - 1), len(1, 40);
    for (int r = 0; r < 400; ++r) {
        std::string t;
        for (size_t n = len(sl::test::rng()); n > 0; --n) t += bits[pick(sl::test::rng())];
        texts.push_back(t);
    }
    const std::vector<std::pair<std::string, sl::PreTokenizer>> kinds{
        {"gpt2", sl::PreTokenizer::Gpt2},
        {"smollm", sl::PreTokenizer::DigitsGpt2},
        {"llama-bpe", sl::PreTokenizer::Llama3},
        {"qwen2", sl::PreTokenizer::Qwen2},
        {"minimax-m2", sl::PreTokenizer::O200k}};
    QJsonArray arr;
    for (const auto& [name, kind] : kinds) {
        for (const auto& t : texts)
            arr.append(
                QJsonObject{{QStringLiteral("text"), q(t)}, {QStringLiteral("pre"), q(name)}});
    }
    const QString in = tmp_.filePath(QStringLiteral("pin.json")),
                  out = tmp_.filePath(QStringLiteral("pout.json"));
    QVERIFY(write_json(in, QJsonObject{{QStringLiteral("cases"), arr}}));
    QString err;
    QVERIFY2(run_reference({QStringLiteral("pretok"), in, out}, &err), qPrintable(err));
    const QJsonArray words = read_json(out)[QStringLiteral("words")].toArray();
    QCOMPARE(size_t(words.size()), kinds.size() * texts.size());
    size_t k = 0;
    for (const auto& [name, kind] : kinds) {
        for (const auto& t : texts) {
            std::vector<std::string_view> got;
            sl::pretokenize(kind, t, got);
            QStringList g, w;
            for (auto v : got) g << q(std::string(v));
            for (const auto& v : words[qsizetype(k++)].toArray()) w << v.toString();
            if (g != w) {
                QFAIL(qPrintable(QStringLiteral("%1 splits %2 as [%3], HF as [%4]")
                                     .arg(q(name), q(t.substr(0, 120)), g.join(QStringLiteral("|")),
                                          w.join(QStringLiteral("|")))));
            }
        }
    }
}

void TstTokenizerHf::roundTrip() {
    QVERIFY(ready_);
    // Everything comes back except the bytes SmolLM2's vocabulary has no token for (HF drops
    // those too): 21 of 256, e.g. 0x14, which R-intro's text holds once.
    std::vector<bool> has(256);
    for (int b = 0; b < 256; ++b) has[size_t(b)] = !tok_->encode(std::string(1, char(b))).empty();
    int missing = 0;
    for (bool h : has) missing += h ? 0 : 1;
    QCOMPARE(missing, 21);
    auto representable = [&](const std::string& text) {
        std::string kept;
        for (char c : text) {
            if (has[uint8_t(c)]) kept += c;
        }
        return kept;
    };
    QCOMPARE(tok_->decode(tok_->encode(rintro_)), representable(rintro_));
    // Random bytes, invalid UTF-8 included.
    std::uniform_int_distribution<int> byte(0, 255), len(0, 200);
    for (int r = 0; r < 500; ++r) {
        std::string text;
        for (int n = len(sl::test::rng()); n > 0; --n) text += char(byte(sl::test::rng()));
        const std::string kept = representable(text);
        const std::vector<int32_t> ids = tok_->encode(text);
        QCOMPARE(tok_->decode(ids), kept);
        std::string streamed;  // piece by piece, as a streaming caller sees it
        for (int32_t id : ids) streamed += tok_->piece(id);
        QCOMPARE(streamed, kept);
    }
}

void TstTokenizerHf::encodeSpeed() {
    QVERIFY(ready_);
    using clock = std::chrono::steady_clock;
    size_t n = 0;
    const auto t0 = clock::now();
    for (int i = 0; i < 3; ++i) n = tok_->encode(rintro_).size();
    const double sec = std::chrono::duration<double>(clock::now() - t0).count() / 3;
    // Words repeat across a document; one call per paragraph uses a fresh word cache each time.
    const auto t1 = clock::now();
    size_t np = 0;
    for (const auto& p : paras_) np += tok_->encode(p).size();
    const double sec_p = std::chrono::duration<double>(clock::now() - t1).count();
    const auto rate = [](double tokens, double seconds) {
        return seconds > 0 ? tokens / seconds / 1e6 : 0.0;
    };
    qInfo(
        "encode R-intro (%zu bytes, %zu tokens), M tokens/s: %.2f in one call, %.2f paragraph "
        "by paragraph; HF tokenizers %s on one thread: %.2f in one call, %.2f paragraph by "
        "paragraph",
        rintro_.size(), n, rate(double(n), sec), rate(double(np), sec_p), qPrintable(hf_version_),
        rate(double(hf_tokens_), hf_seconds_), rate(double(hf_para_tokens_), hf_para_seconds_));
    QCOMPARE(qint64(n), hf_tokens_);
    QCOMPARE(qint64(np), hf_para_tokens_);
}

void TstTokenizerHf::chatTemplateOfModel() {
    QVERIFY(ready_);
    const sl::ChatTemplate t = sl::ChatTemplate::for_tokenizer(*tok_);
    QCOMPARE(t.family(), sl::ChatFamily::ChatML);
    QCOMPARE(t.default_system(),
             std::string("You are a helpful AI assistant named SmolLM, trained by Hugging Face"));
    const std::vector<sl::ChatMessage> m{{"user", "What is R?"}};
    const std::string prompt = t.render(m, true);
    const std::vector<int32_t> ids = tok_->encode(prompt, false, true);
    QCOMPARE(ids.front(), tok_->find_token("<|im_start|>"));
    QCOMPARE(ids.front(), 1);
    QCOMPARE(tok_->decode(ids, true), prompt);
    QVERIFY(tok_->is_end_of_generation(tok_->find_token("<|im_end|>")));
    QCOMPARE(tok_->decode(ids, false).find("<|im_start|>"), std::string::npos);
}

QTEST_APPLESS_MAIN(TstTokenizerHf)
#include "tst_tokenizer_hf.moc"
