// The WordPiece tokenizer on a hand-built vocabulary: each step of BERT's uncased pipeline
// (clean text, CJK split, accent stripping, lowercase, punctuation split, greedy longest match,
// [UNK] rules, literal special tokens, truncation) and the vocabulary file's errors. The real
// vocabulary against Hugging Face is tst_wordpiece_hf.
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <string>
#include <vector>

#include "core/embed/bert_unicode.h"
#include "core/embed/wordpiece_tokenizer.h"
#include "core/util/error.h"

namespace {

sl::WordpieceTokenizer tiny() {
    return sl::WordpieceTokenizer(std::vector<std::string>{"[PAD]",
                                                           "[UNK]",
                                                           "[CLS]",
                                                           "[SEP]",
                                                           "[MASK]",  // 0-4
                                                           "un",
                                                           "##aff",
                                                           "##able",
                                                           "a",
                                                           "##ff",  // 5-9
                                                           "hello",
                                                           "world",
                                                           "!",
                                                           ",",
                                                           "cafe",  // 10-14
                                                           "\xe6\x97\xa5",
                                                           "\xe6\x9c\xac",
                                                           "i",
                                                           "##s",
                                                           "is",  // 15-19: 日 本
                                                           "\xcf\x83",
                                                           ".",
                                                           "'",
                                                           "s",
                                                           "x",
                                                           "##x"});  // 20-25: σ
}

std::vector<int32_t> ids(std::initializer_list<int32_t> l) {
    return std::vector<int32_t>(l);
}

// "x" then "##x" for the rest: n x's.
std::vector<int32_t> xs(size_t n) {
    std::vector<int32_t> v(n, 25);
    v[0] = 24;
    return v;
}

}  // namespace

class TstWordpiece : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void pieces_data();
    void pieces();
    void truncation();
    void normalizer();
    void unicodeData();
    void vocabErrors();
};

void TstWordpiece::pieces_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<std::vector<int32_t>>("want");
    QTest::newRow("greedy longest") << QByteArray("unaffable") << ids({5, 6, 7});
    QTest::newRow("case and punct") << QByteArray("Hello, WORLD!") << ids({10, 13, 11, 12});
    QTest::newRow("accents stripped") << QByteArray("Caf\xc3\xa9") << ids({14});
    QTest::newRow("combining accent") << QByteArray("Cafe\xcc\x81") << ids({14});
    QTest::newRow("cjk split") << QByteArray("\xe6\x97\xa5\xe6\x9c\xac") << ids({15, 16});
    QTest::newRow("cjk glued to latin") << QByteArray("x\xe6\x97\xa5x") << ids({24, 15, 24});
    QTest::newRow("unknown word") << QByteArray("hello zzz world") << ids({10, 1, 11});
    QTest::newRow("partial match is unk") << QByteArray("unaffz") << ids({1});
    QTest::newRow("apostrophe") << QByteArray("it's")
                                << ids({1, 22, 23});  // "i" matches, "##t" does not: [UNK]
    QTest::newRow("controls dropped") << QByteArray("hel\x01lo\xc2\xad") << ids({10});
    QTest::newRow("zero width space dropped") << QByteArray("hel\xe2\x80\x8blo") << ids({10});
    QTest::newRow("nbsp splits") << QByteArray("hello\xc2\xa0world") << ids({10, 11});
    QTest::newRow("tabs and newlines") << QByteArray("\thello\r\nworld\n") << ids({10, 11});
    QTest::newRow("invalid utf-8 dropped") << QByteArray("hel\xfflo") << ids({10});
    QTest::newRow("capital sigma") << QByteArray("\xce\xa3") << ids({20});
    QTest::newRow("literal special tokens")
        << QByteArray("hello[SEP]world [MASK]") << ids({10, 3, 11, 4});
    QTest::newRow("special token needs exact case") << QByteArray("[sep]") << ids({1, 1, 1});
    QTest::newRow("empty") << QByteArray("") << ids({});
    QTest::newRow("only spaces") << QByteArray(" \t ") << ids({});
    QTest::newRow("word of 100 chars") << QByteArray(100, 'x') << xs(100);
    QTest::newRow("word of 101 chars") << QByteArray(101, 'x') << ids({1});
}

void TstWordpiece::pieces() {
    QFETCH(QByteArray, text);
    QFETCH(std::vector<int32_t>, want);
    const auto t = tiny();
    QCOMPARE(t.encode_pieces(std::string_view(text.constData(), static_cast<size_t>(text.size()))),
             want);
}

void TstWordpiece::truncation() {
    const auto t = tiny();
    QCOMPARE(t.encode("hello world hello"), ids({2, 10, 11, 10, 3}));
    QCOMPARE(t.encode("hello world hello", 4), ids({2, 10, 11, 3}));
    QCOMPARE(t.encode("hello world hello", 2), ids({2, 3}));
    QCOMPARE(t.encode(""), ids({2, 3}));
    QVERIFY_THROWS_EXCEPTION(sl::Error, t.encode("x", 1));
    // 300 words -> [CLS] + 254 + [SEP] at the default 256.
    std::string many;
    for (int i = 0; i < 300; ++i) many += "hello ";
    const auto e = t.encode(many);
    QCOMPARE(e.size(), size_t(256));
    QCOMPARE(e.front(), 2);
    QCOMPARE(e.back(), 3);
}

void TstWordpiece::normalizer() {
    const auto t = tiny();
    QCOMPARE(t.normalize("\xc3\x85ngstr\xc3\xb6m"), std::string("angstrom"));
    QCOMPARE(t.normalize("\xc4\xb0"), std::string("i"));             // İ: NFD I + dot, dot dropped
    QCOMPARE(t.normalize("\xe1\xba\x9e"), std::string("\xc3\x9f"));  // ẞ -> ß
    QCOMPARE(t.normalize("\xea\xb0\x80"), std::string("\xe1\x84\x80\xe1\x85\xa1"));  // 가 -> jamo
    QCOMPARE(t.normalize("a\xe4\xb8\x80"
                         "b"),
             std::string("a \xe4\xb8\x80 b"));
    QCOMPARE(t.normalize("\xef\xac\x81"), std::string("\xef\xac\x81"));  // ﬁ: compatibility only
}

void TstWordpiece::unicodeData() {
    using sl::bert_unicode::Class;
    using sl::bert_unicode::classify;
    QCOMPARE(classify('a'), Class::Other);
    QCOMPARE(classify('!'), Class::Punct);
    QCOMPARE(classify('$'), Class::Punct);     // ASCII punctuation, though Sc
    QCOMPARE(classify(0x2014), Class::Punct);  // em dash
    QCOMPARE(classify(0x300), Class::Mark);
    QCOMPARE(classify(0x3000), Class::Space);
    QCOMPARE(classify(0x85), Class::Remove);    // NEL is a control first
    QCOMPARE(classify(0xE000), Class::Remove);  // private use
    QCOMPARE(classify(0xFEFF), Class::Remove);
    QVERIFY(sl::bert_unicode::is_cjk(0x4E00));
    QVERIFY(!sl::bert_unicode::is_cjk(0x3042));   // hiragana is not split
    QVERIFY(!sl::bert_unicode::is_cjk(0x2B820));  // HF's range starts at U+2B920
    QVERIFY(sl::bert_unicode::is_cjk(0x2B920));
    uint32_t out[3];
    QCOMPARE(sl::bert_unicode::strip_accents(0x1EA5, out), 1);  // ấ -> a
    QCOMPARE(out[0], uint32_t('a'));
    QCOMPARE(sl::bert_unicode::strip_accents(0x301, out), 0);
    QCOMPARE(sl::bert_unicode::to_lower(0x410, out), 1);  // Cyrillic А
    QCOMPARE(out[0], uint32_t(0x430));
    QCOMPARE(sl::bert_unicode::to_lower(0x1E9E, out), 1);
    QCOMPARE(out[0], uint32_t(0xDF));
}

void TstWordpiece::vocabErrors() {
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::WordpieceTokenizer(std::vector<std::string>{}));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::WordpieceTokenizer(std::vector<std::string>{
                                                  "[UNK]", "[CLS]", "[SEP]"}));
    QTemporaryDir dir;
    const std::string path = dir.filePath(QStringLiteral("vocab.txt")).toStdString();
    QVERIFY_THROWS_EXCEPTION(sl::IoError, sl::WordpieceTokenizer::from_vocab_file(path));
    std::ofstream(path) << "[PAD]\r\n[UNK]\n[CLS]\n[SEP]\nhello\nhello\n";
    try {
        sl::WordpieceTokenizer::from_vocab_file(path);
        QFAIL("accepted a duplicate");
    } catch (const sl::FormatError& e) {
        QVERIFY2(std::string(e.what()).find(path + ": line 6: token 'hello' is a duplicate") == 0,
                 e.what());
    }
    std::ofstream(path) << "[PAD]\r\n[UNK]\n[CLS]\n[SEP]\nhello\n";
    const auto t = sl::WordpieceTokenizer::from_vocab_file(path);
    QCOMPARE(t.vocab_size(), size_t(5));
    QCOMPARE(t.find("[PAD]"), 0);  // "\r\n" endings
    QCOMPARE(t.encode("Hello"), ids({2, 4, 3}));
}

QTEST_GUILESS_MAIN(TstWordpiece)
#include "tst_wordpiece.moc"
