// all-MiniLM-L6-v2's WordPiece tokenizer against Hugging Face tokenizers (tokenizer.json, run by
// tests/reference/embed/minilm_ref.py from the venv of scripts/setup.sh): identical ids on real
// text (R-intro.pdf through pdftotext, line by line and in paragraphs long enough to truncate at
// 256), accents, punctuation, CJK, emoji, controls and literal special tokens; and the normalizer
// on every code point, where the only differences allowed are the few hundred code points whose
// Unicode data differs between Python's unicodedata (our tables) and the Rust crates HF uses.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <string>
#include <vector>

#include "core/embed/sentence_embedder.h"
#include "core/embed/wordpiece_tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "tests/common/test_support.h"

namespace {

std::vector<std::string> r_intro_texts() {
    QByteArray text;
    const auto pdf = sl::test::require_asset("samples/pdf/R-intro.pdf");
    if (pdf.empty()) return {};
    if (!sl::test::run_process(
            QStringLiteral("pdftotext"),
            {QStringLiteral("-f"), QStringLiteral("1"), QStringLiteral("-l"), QStringLiteral("40"),
             QString::fromStdString(pdf.string()), QStringLiteral("-")},
            &text))
        return {};
    std::vector<std::string> out;
    std::string para;
    for (const QByteArray& line : text.split('\n')) {
        const std::string l = line.toStdString();
        if (!l.empty()) out.push_back(l);
        if (l.empty() || l.find('\f') != std::string::npos) {
            if (!para.empty()) out.push_back(para);
            para.clear();
        } else {
            para += l + "\n";
        }
    }
    // A few long runs of text, to cross the 256-token cut.
    std::string all;
    for (const auto& l : out) all += l + " ";
    for (size_t at = 0; at + 4000 < all.size() && at < 40000; at += 4000)
        out.push_back(all.substr(at, 4000));
    return out;
}

const std::vector<std::string> kHandPicked = {
    "The quick brown fox jumps over the lazy dog.",
    "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m \xc3\x9f\xe1\xba\x9e "
    "\xc4\xb0stanbul",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83"
    "\x88 \xe4\xb8\xad\xe6\x96\x87 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "\xce\x9a\xce\xb1\xce\xbb\xce\xb7\xce\xbc\xce\xad\xcf\x81\xce\xb1 "
    "\xce\xa3\xce\x9f\xce\xa6\xce\x99\xce\x91 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
    "x <- c(1.5, 2, NA); f(x)[[2]] == 'a' && y != \"b\" # comment {}|~`^",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and \xe2\x80\x9cquotes\xe2\x80\x9d "
    "\xe2\x80\x94 dash\xe2\x80\xa6",
    "tabs\tand\nnewlines\r\nand\xc2\xa0nbsp and zero\xe2\x80\x8bwidth and soft\xc2\xadhyphen",
    "controls \x01\x02\x7f and private \xee\x80\x80 use",
    "[CLS] literal [SEP] special [MASK] tokens [UNK][PAD]",
    "supercalifragilisticexpialidocious antidisestablishmentarianism "
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    std::string(120, 'a') + " long word",
    "",
    "   ",
    "\xef\xac\x81nance \xe2\x84\xab \xe2\x84\xa6 \xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 \xc2\xbd "
    "\xe2\x91\xa0",
    "Arabic \xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 Hebrew "
    "\xd7\xa2\xd7\x91\xd7\xa8\xd7\x99\xd7\xaa Hindi "
    "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80",
};

QJsonArray to_json(const std::vector<std::string>& texts) {
    QJsonArray a;
    for (const auto& t : texts)
        a.append(QString::fromUtf8(t.data(), static_cast<qsizetype>(t.size())));
    return a;
}

}  // namespace

class TstWordpieceHf : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase();
    void idsMatchHf();
    void normalizerSweep();

private:
    std::filesystem::path dir_;
    QString python_;
};

void TstWordpieceHf::initTestCase() {
    dir_ = sl::SentenceEmbedder::default_dir();
    if (!std::filesystem::exists(dir_ / "vocab.txt") ||
        !std::filesystem::exists(dir_ / "tokenizer.json"))
        QSKIP(qPrintable(QStringLiteral("%1 lacks vocab.txt / tokenizer.json: run scripts/setup.sh")
                             .arg(QString::fromStdString(dir_.string()))));
    python_ = sl::test::require_venv_python();
    QVERIFY(!python_.isEmpty());
}

void TstWordpieceHf::idsMatchHf() {
    std::vector<std::string> texts = kHandPicked;
    const auto real = r_intro_texts();
    QVERIFY(real.size() > 500);
    texts.insert(texts.end(), real.begin(), real.end());
    // Texts go through JSON as UTF-16: keep them valid UTF-8.
    for (auto& t : texts) t = sl::unicode::utf8_sanitize(t);

    QTemporaryDir tmp;
    const QString in = tmp.filePath(QStringLiteral("in.json")),
                  out = tmp.filePath(QStringLiteral("out.json"));
    QFile f(in);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(to_json(texts)).toJson(QJsonDocument::Compact));
    f.close();
    QByteArray ignored;
    QVERIFY(sl::test::run_process(
        python_,
        {sl::test::reference_script(QStringLiteral("embed/minilm_ref.py")),
         QStringLiteral("tokenize"), QString::fromStdString(dir_.string()), in, out},
        &ignored));
    QFile r(out);
    QVERIFY(r.open(QIODevice::ReadOnly));
    const QJsonArray want = QJsonDocument::fromJson(r.readAll()).array();
    QCOMPARE(static_cast<size_t>(want.size()), texts.size());

    const auto tok = sl::WordpieceTokenizer::from_vocab_file(dir_ / "vocab.txt");
    size_t tokens = 0, truncated = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        const auto got = tok.encode(texts[i], 256);
        std::vector<int32_t> exp;
        for (const auto& v : want[static_cast<qsizetype>(i)].toArray()) exp.push_back(v.toInt());
        if (got != exp) {
            std::string g, e;
            for (auto id : got) g += tok.token(id) + " ";
            for (auto id : exp) e += tok.token(id) + " ";
            QFAIL(qPrintable(QStringLiteral("text %1 '%2'\n ours: %3\n   HF: %4")
                                 .arg(i)
                                 .arg(QString::fromStdString(texts[i].substr(0, 200)),
                                      QString::fromStdString(g), QString::fromStdString(e))));
        }
        tokens += got.size();
        truncated += got.size() == 256;
    }
    qInfo("%zu texts, %zu tokens, %zu cut at 256: identical ids", texts.size(), tokens, truncated);
    QVERIFY(truncated >= 3);
}

void TstWordpieceHf::normalizerSweep() {
    QTemporaryDir tmp;
    const QString out = tmp.filePath(QStringLiteral("sweep.json"));
    QByteArray ignored;
    QVERIFY(
        sl::test::run_process(python_,
                              {sl::test::reference_script(QStringLiteral("embed/minilm_ref.py")),
                               QStringLiteral("sweep"), QString::fromStdString(dir_.string()), out},
                              &ignored));
    QFile r(out);
    QVERIFY(r.open(QIODevice::ReadOnly));
    const QJsonObject hf = QJsonDocument::fromJson(r.readAll()).object();
    QVERIFY(hf.size() > 3000);
    const auto tok = sl::WordpieceTokenizer::from_vocab_file(dir_ / "vocab.txt");
    size_t differ = 0, latin_greek_cyrillic_cjk = 0;
    QStringList examples;
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        std::string s;
        sl::unicode::append_utf8(s, cp);
        const QString key = QString::number(cp, 16).toUpper();
        const std::string want = hf.contains(key) ? hf.value(key).toString().toStdString() : s;
        if (tok.normalize(s) == want) continue;
        ++differ;
        // The scripts documents are mostly in must agree everywhere.
        if (cp < 0x0530 || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3040 && cp <= 0x30FF))
            ++latin_greek_cyrillic_cjk;
        if (examples.size() < 12) examples << QStringLiteral("U+%1").arg(key);
    }
    qInfo(
        "normalizer: %zu of 1,112,064 code points differ from HF (Unicode-version differences), "
        "e.g. %s",
        differ, qPrintable(examples.join(QLatin1Char(' '))));
    QCOMPARE(latin_greek_cyrillic_cjk, size_t(0));
    QVERIFY2(differ < 600, "more code points differ than the Unicode-version differences explain");
}

QTEST_GUILESS_MAIN(TstWordpieceHf)
#include "tst_wordpiece_hf.moc"
