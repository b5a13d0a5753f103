// Byte-level BPE on small vocabularies built by hand: the byte mapping, merge order, special
// tokens, decoding, the pre-tokenizers on cases worked out from their regexes, UTF-8 helpers.
#include <QTest>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/tokenizer/bpe_gpt2.h"
#include "core/tokenizer/pretokenize.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using sl::PreTokenizer;
using sl::Tokenizer;
using sl::TokenizerData;
using sl::TokenType;

Q_DECLARE_METATYPE(PreTokenizer)
Q_DECLARE_METATYPE(std::string)
Q_DECLARE_METATYPE(std::vector<std::string>)

namespace {

// The 256 byte tokens (ids 0..255, id == byte), then `extra` tokens, then `merges`.
TokenizerData tiny_vocab(const std::vector<std::string>& extra,
                         const std::vector<std::string>& merges, const std::string& pre = "gpt2") {
    TokenizerData d;
    d.name = "tiny";
    d.model = "gpt2";
    d.pre = pre;
    for (int b = 0; b < 256; ++b)
        d.tokens.push_back(sl::bpe::bytes_to_vocab_text(std::string(1, char(b))));
    d.token_types.assign(256, int32_t(TokenType::Normal));
    for (const auto& t : extra) {
        d.tokens.push_back(t);
        d.token_types.push_back(int32_t(TokenType::Normal));
    }
    d.merges = merges;
    return d;
}

std::vector<std::string> texts_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(tok.token_text(id));
    return out;
}

QString show(const std::vector<std::string>& v) {
    QStringList l;
    for (const auto& s : v) l << QString::fromStdString(s);
    return QLatin1Char('[') + l.join(QStringLiteral("|")) + QLatin1Char(']');
}

}  // namespace

class TstTokenizer : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void byteMapping();
    void mergeOrder();
    void leftmostMergeFirst();
    void mergesAcrossSpace();
    void specialTokens();
    void decodeAndPieces();
    void missingByteTokensAreDropped();
    void roundTripRandomBytes();
    void pretokenize_data();
    void pretokenize();
    void utf8Helpers();
    void factoryErrors();
    void sentencePiece();
    void byteTokensParsedStrictly();
};

void TstTokenizer::byteMapping() {
    QCOMPARE(sl::bpe::byte_to_cp('A'), uint32_t('A'));
    QCOMPARE(sl::bpe::byte_to_cp(' '), 0x120u);   // Ġ
    QCOMPARE(sl::bpe::byte_to_cp('\n'), 0x10Au);  // Ċ
    QCOMPARE(sl::bpe::byte_to_cp(0), 0x100u);
    QCOMPARE(sl::bpe::byte_to_cp(0x7F), 0x121u);  // after the 33 control bytes 0..32
    QCOMPARE(sl::bpe::byte_to_cp(0xAD), 0x143u);  // the last one: soft hyphen
    std::vector<bool> seen(400);
    for (int b = 0; b < 256; ++b) {
        const uint32_t cp = sl::bpe::byte_to_cp(uint8_t(b));
        QVERIFY(cp < 400 && !seen[cp]);
        seen[cp] = true;
        QCOMPARE(sl::bpe::byte_from_cp(cp), b);
    }
    QCOMPARE(sl::bpe::byte_from_cp(0x3000), -1);
    QCOMPARE(sl::bpe::bytes_to_vocab_text(" the\n"), std::string("\xC4\xA0the\xC4\x8A"));
    QCOMPARE(sl::bpe::vocab_text_to_bytes("\xC4\xA0the\xC4\x8A"), std::string(" the\n"));
}

void TstTokenizer::mergeOrder() {
    // "abc": with "b c" ranked first BPE gives a|bc; with "a b" first ab|c and then abc.
    const auto bc_first =
        Tokenizer::create(tiny_vocab({"ab", "bc", "abc"}, {"b c", "a b", "ab c"}));
    QCOMPARE(texts_of(*bc_first, bc_first->encode("abc")), (std::vector<std::string>{"a", "bc"}));
    const auto ab_first =
        Tokenizer::create(tiny_vocab({"ab", "bc", "abc"}, {"a b", "b c", "ab c"}));
    QCOMPARE(texts_of(*ab_first, ab_first->encode("abc")), (std::vector<std::string>{"abc"}));
    QCOMPARE(ab_first->encode("abc"), (std::vector<int32_t>{258}));
    // A whole-word token that the merges never build is not used (no ignore_merges for gpt2).
    const auto unreachable = Tokenizer::create(tiny_vocab({"abc"}, {}));
    QCOMPARE(texts_of(*unreachable, unreachable->encode("abc")),
             (std::vector<std::string>{"a", "b", "c"}));
}

void TstTokenizer::leftmostMergeFirst() {
    const auto tok = Tokenizer::create(tiny_vocab({"aa", "aaaa"}, {"a a", "aa aa"}));
    QCOMPARE(texts_of(*tok, tok->encode("aaa")), (std::vector<std::string>{"aa", "a"}));
    QCOMPARE(texts_of(*tok, tok->encode("aaaaa")), (std::vector<std::string>{"aaaa", "a"}));
    // The same word twice in one call comes from the word cache: same ids.
    QCOMPARE(texts_of(*tok, tok->encode("aaa aaa aaa")),
             (std::vector<std::string>{"aa", "a", "\xC4\xA0", "aa", "a", "\xC4\xA0", "aa", "a"}));
}

void TstTokenizer::mergesAcrossSpace() {
    const std::string G = "\xC4\xA0";  // the space byte's character
    const auto tok =
        Tokenizer::create(tiny_vocab({G + "t", "he", G + "the"}, {G + " t", "h e", G + "t he"}));
    QCOMPARE(texts_of(*tok, tok->encode("the the")),
             (std::vector<std::string>{"t", "he", G + "the"}));
    QCOMPARE(tok->decode(tok->encode("the the")), std::string("the the"));
}

void TstTokenizer::specialTokens() {
    TokenizerData d = tiny_vocab({}, {});
    const auto add = [&](const std::string& s, TokenType t) {
        d.tokens.push_back(s);
        d.token_types.push_back(int32_t(t));
        return int32_t(d.tokens.size() - 1);
    };
    const int32_t start = add("<|im_start|>", TokenType::Control);
    const int32_t start_long = add("<|im_start|>x", TokenType::Control);
    const int32_t end = add("<|im_end|>", TokenType::Control);
    const int32_t tool = add("<tool>", TokenType::UserDefined);
    d.bos_id = start;
    d.eos_id = end;
    const auto tok = Tokenizer::create(d);

    const std::vector<int32_t> with =
        tok->encode("<|im_start|>user<|im_end|><|im_start|>x!", false, true);
    QCOMPARE(with, (std::vector<int32_t>{start, 'u', 's', 'e', 'r', end, start_long, '!'}));
    const std::vector<int32_t> plain = tok->encode("<|im_end|>", false, false);
    QCOMPARE(plain.size(), size_t(10));  // "<|", "im", ... all bytes: nothing merges
    QCOMPARE(tok->decode(plain), std::string("<|im_end|>"));
    // User-defined tokens are matched either way and decode as their text.
    QCOMPARE(tok->encode("a<tool>", false, false), (std::vector<int32_t>{'a', tool}));
    QCOMPARE(tok->decode(tok->encode("a<tool>")), std::string("a<tool>"));
    // add_special follows add_bos / add_eos.
    QCOMPARE(tok->encode("a", true, false), (std::vector<int32_t>{'a'}));
    d.add_bos = true;
    d.add_eos = true;
    const auto tok2 = Tokenizer::create(d);
    QCOMPARE(tok2->encode("a", true, false), (std::vector<int32_t>{start, 'a', end}));
    QVERIFY(tok2->is_end_of_generation(end));
    QVERIFY(!tok2->is_end_of_generation('a'));
    QCOMPARE(tok2->find_token("<|im_end|>"), end);
    QCOMPARE(tok2->find_token("<|nope|>"), -1);
}

void TstTokenizer::decodeAndPieces() {
    TokenizerData d = tiny_vocab({sl::bpe::bytes_to_vocab_text(" \xC3\xA9")}, {});  // "Ġé"
    d.tokens.push_back("<|im_end|>");
    d.token_types.push_back(int32_t(TokenType::Control));
    const auto tok = Tokenizer::create(d);
    QCOMPARE(tok->piece(256), std::string_view(" \xC3\xA9"));
    QCOMPARE(tok->piece(0xC3), std::string_view("\xC3"));  // half a character: raw byte
    const std::vector<int32_t> ids{'h', 'i', 257, 0xC3};
    QCOMPARE(tok->decode(ids), std::string("hi\xC3"));  // invalid UTF-8 is returned, not fixed
    QCOMPARE(tok->decode(ids, true), std::string("hi<|im_end|>\xC3"));
    QVERIFY_THROWS_EXCEPTION(sl::Error, tok->piece(-1));
    QVERIFY_THROWS_EXCEPTION(sl::Error, tok->decode(std::vector<int32_t>{258}));
}

void TstTokenizer::missingByteTokensAreDropped() {
    TokenizerData d = tiny_vocab({}, {});
    d.tokens[0xF1] = "unused-slot";  // the vocabulary has no token for byte 0xF1
    const auto tok = Tokenizer::create(d);
    QCOMPARE(tok->encode("a\xF1"
                         "b"),
             (std::vector<int32_t>{'a', 'b'}));
}

void TstTokenizer::roundTripRandomBytes() {
    const std::string G = "\xC4\xA0";
    const auto tok =
        Tokenizer::create(tiny_vocab({"th", "the", G + "t", G + "th", "\xC3\xA3\xC2\x81"},
                                     {"t h", "th e", G + " t", G + "t h"}));
    std::uniform_int_distribution<int> len(0, 300), byte(0, 255), kind(0, 3);
    for (int round = 0; round < 300; ++round) {
        std::string s;
        const int n = len(sl::test::rng());
        for (int i = 0; i < n; ++i) {
            const int k = kind(sl::test::rng());
            s += k == 0   ? " the"
                 : k == 1 ? std::string(1, char(byte(sl::test::rng())))
                 : k == 2 ? "\xE3\x81\x82"
                          : "a1 ";
        }
        for (const PreTokenizer p : {PreTokenizer::Gpt2, PreTokenizer::DigitsGpt2,
                                     PreTokenizer::Llama3, PreTokenizer::Qwen2, PreTokenizer::O200k}) {
            std::vector<std::string_view> words;
            sl::pretokenize(p, s, words);
            std::string joined;
            for (auto w : words) {
                QVERIFY(!w.empty());
                joined += w;
            }
            QCOMPARE(joined, s);
        }
        QCOMPARE(tok->decode(tok->encode(s)), s);
    }
}

void TstTokenizer::pretokenize_data() {
    QTest::addColumn<PreTokenizer>("kind");
    QTest::addColumn<std::string>("text");
    QTest::addColumn<std::vector<std::string>>("words");
    using V = std::vector<std::string>;
    const auto G = PreTokenizer::Gpt2, D = PreTokenizer::DigitsGpt2, L = PreTokenizer::Llama3,
               Q = PreTokenizer::Qwen2;
    QTest::newRow("gpt2 words") << G << std::string("Hello world") << V{"Hello", " world"};
    QTest::newRow("gpt2 contraction")
        << G << std::string("it's we'LL") << V{"it", "'s", " we", "'", "LL"};
    QTest::newRow("gpt2 two spaces") << G << std::string("a  b") << V{"a", " ", " b"};
    QTest::newRow("gpt2 tab before word") << G << std::string("a\n\tb") << V{"a", "\n", "\t", "b"};
    QTest::newRow("gpt2 trailing spaces") << G << std::string("a   ") << V{"a", "   "};
    QTest::newRow("gpt2 numbers") << G << std::string("x 123456") << V{"x", " 123456"};
    QTest::newRow("gpt2 punctuation")
        << G << std::string("f(x) = {y};") << V{"f", "(", "x", ")", " =", " {", "y", "};"};
    QTest::newRow("gpt2 space apostrophe") << G << std::string("a 's") << V{"a", " '", "s"};
    QTest::newRow("gpt2 accented")
        << G << std::string("caf\u00e9 na\u00efve") << V{"caf\u00e9", " na\u00efve"};
    QTest::newRow("smollm digits") << D << std::string("x 1234") << V{"x", " ", "1", "2", "3", "4"};
    QTest::newRow("smollm space before digit") << D << std::string("a  1") << V{"a", "  ", "1"};
    QTest::newRow("smollm version") << D << std::string("v2.10") << V{"v", "2", ".", "1", "0"};
    QTest::newRow("llama3 digits") << L << std::string("1234567") << V{"123", "456", "7"};
    QTest::newRow("llama3 contraction") << L << std::string("IT'S") << V{"IT", "'S"};
    QTest::newRow("llama3 newlines") << L << std::string("x  \n  y") << V{"x", "  \n", " ", " y"};
    QTest::newRow("llama3 punct word")
        << L << std::string("(hello) \"x\"\n\n") << V{"(hello", ")", " \"", "x", "\"\n\n"};
    QTest::newRow("llama3 crlf") << L << std::string("a\r\nb") << V{"a", "\r\n", "b"};
    QTest::newRow("qwen2 digits") << Q << std::string("x 42") << V{"x", " ", "4", "2"};
    // o200k (MiniMax-M2/M3, GPT-4o): the rows below are Hugging Face tokenizers' splits of the same
    // texts with the pattern from MiniMax's tokenizer.json (encode_hf.py split_only("minimax-m2")).
    const auto O = PreTokenizer::O200k;
    QTest::newRow("o200k case") << O << std::string("Hello WORLD iPhone") << V{"Hello", " WORLD", " i", "Phone"};
    QTest::newRow("o200k camel") << O << std::string("CamelCaseWord") << V{"Camel", "Case", "Word"};
    QTest::newRow("o200k contraction slash")
        << O << std::string("  They're HERE\n\n x/y ...//\n") << V{" ", " They're", " HERE", "\n\n", " x", "/y", " ...//\n"};
    QTest::newRow("o200k titlecase modifier greek")
        << O << std::string("\u01c5ungla \u02b0a \u03a9mega") << V{"\u01c5ungla", " \u02b0a", " \u03a9mega"};
    QTest::newRow("o200k marks digits")
        << O << std::string("a\u0301b \u00dc\u0308ber 123456") << V{"a\u0301b", " \u00dc\u0308ber", " ", "123", "456"};
    QTest::newRow("o200k leading mark") << O << std::string(" \u0301abc") << V{" \u0301abc"};
}

void TstTokenizer::pretokenize() {
    QFETCH(PreTokenizer, kind);
    QFETCH(std::string, text);
    QFETCH(std::vector<std::string>, words);
    const std::string& s = text;
    std::vector<std::string_view> got;
    sl::pretokenize(kind, s, got);
    const std::vector<std::string> got_s(got.begin(), got.end());
    QVERIFY2(got_s == words, qPrintable(show(got_s) + QStringLiteral(" != ") + show(words)));
}

void TstTokenizer::utf8Helpers() {
    using sl::unicode::utf8_complete_prefix;
    QCOMPARE(utf8_complete_prefix("abc"), size_t(3));
    QCOMPARE(utf8_complete_prefix("ab\xE3\x81"), size_t(2));  // 3-byte sequence, 2 bytes so far
    QCOMPARE(utf8_complete_prefix("ab\xE3\x81\x82"), size_t(5));
    QCOMPARE(utf8_complete_prefix("\xF0\x9F\x98"), size_t(0));
    QCOMPARE(utf8_complete_prefix("a\x80"), size_t(2));  // stray continuation: nothing to wait for
    QCOMPARE(sl::unicode::utf8_sanitize("a\xFF"
                                        "b\xC3"),
             std::string("a\xEF\xBF\xBD"
                         "b\xEF\xBF\xBD"));
    QCOMPARE(sl::unicode::cp_class('a'), sl::unicode::CpClass::Letter);
    QCOMPARE(sl::unicode::cp_class(0x4E2D), sl::unicode::CpClass::Letter);  // 中
    QCOMPARE(sl::unicode::cp_class(0x0663), sl::unicode::CpClass::Number);  // Arabic-Indic 3
    QCOMPARE(sl::unicode::cp_class(0x3000), sl::unicode::CpClass::Space);
    QCOMPARE(sl::unicode::cp_class(0x1C), sl::unicode::CpClass::Other);     // not White_Space
    QCOMPARE(sl::unicode::cp_class(0x0301), sl::unicode::CpClass::Other);   // combining mark
    QCOMPARE(sl::unicode::cp_class(0x1F600), sl::unicode::CpClass::Other);  // emoji
    // Overlong, surrogate and truncated sequences are invalid bytes, one at a time.
    QCOMPARE(sl::unicode::decode_utf8("\xC0\xAF", 0).cp, sl::unicode::kInvalid);
    QCOMPARE(sl::unicode::decode_utf8("\xED\xA0\x80", 0).cp, sl::unicode::kInvalid);
    QCOMPARE(sl::unicode::decode_utf8("\xE3\x81", 0).len, 1u);
}

void TstTokenizer::factoryErrors() {
    TokenizerData d = tiny_vocab({}, {});
    d.name = "model.gguf";
    d.model = "bert";
    try {
        Tokenizer::create(d);
        QFAIL("an unknown tokenizer model was accepted");
    } catch (const sl::FormatError& e) {
        QCOMPARE(std::string(e.what()), std::string("model.gguf: unknown tokenizer model 'bert'"));
    }
    d.model = "gpt2";
    d.pre = "no-such-pre";
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, Tokenizer::create(d));
    d.pre = "gpt2";
    d.bos_id = 100000;
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, Tokenizer::create(d));
    d.bos_id = -1;
    d.token_types.pop_back();
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, Tokenizer::create(d));
}

// SentencePiece on a hand-made vocabulary: highest score merges first, byte fallback, the space
// prefix (again after a special token), and decoding that drops it.
void TstTokenizer::sentencePiece() {
    TokenizerData d;
    d.name = "spm";
    d.model = "llama";
    d.add_space_prefix = true;
    d.add_bos = true;
    const auto add = [&](const std::string& t, TokenType type, float score) {
        d.tokens.push_back(t);
        d.token_types.push_back(int32_t(type));
        d.scores.push_back(score);
        return int32_t(d.tokens.size() - 1);
    };
    d.unk_id = add("<unk>", TokenType::Unknown, 0);
    d.bos_id = add("<s>", TokenType::Control, 0);
    d.eos_id = add("</s>", TokenType::Control, 0);
    std::vector<int32_t> byte(256);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte[size_t(b)] = add(name, TokenType::Byte, 0);
    }
    const std::string S = "\xE2\x96\x81";  // U+2581
    const int32_t sp = add(S, TokenType::Normal, -5);
    for (const char* c : {"h", "e", "l", "o"}) add(c, TokenType::Normal, -6);
    const int32_t sp_h = add(S + "h", TokenType::Normal, -1);
    add("ll", TokenType::Normal, -2);
    add(S + "he", TokenType::Normal, -3);
    add("llo", TokenType::Normal, -3.5f);
    const int32_t hello = add(S + "hello", TokenType::Normal, -4);
    const int32_t e_acute = add("\xC3\xA9", TokenType::Normal, -6);
    const auto tok = Tokenizer::create(d);

    QCOMPARE(tok->encode("hello"), (std::vector<int32_t>{hello}));
    QCOMPARE(tok->encode("hello", true), (std::vector<int32_t>{d.bos_id, hello}));
    QCOMPARE(tok->encode("hi hello"), (std::vector<int32_t>{sp_h, byte['i'], hello}));
    QCOMPARE(tok->encode("\xC3\xA9\xC3\xBC"),
             (std::vector<int32_t>{sp, e_acute, byte[0xC3], byte[0xBC]}));
    QCOMPARE(tok->encode("<s>hello", false, true), (std::vector<int32_t>{d.bos_id, hello}));
    QCOMPARE(tok->piece(hello), std::string_view(" hello"));
    QCOMPARE(tok->piece(byte[0xC3]), std::string_view("\xC3"));
    for (const std::string text : {"hi hello", "hello  \xC3\xBC\xC3\xA9 ho", "  lead"}) {
        QCOMPARE(tok->decode(tok->encode(text, true)), text);
    }
}

// Byte-fallback tokens are "<0xAB>" with exactly two hex digits; other Byte-typed texts ("<0x-1>",
// which sscanf read as 0xFFFFFFFF and indexed out of bounds: fuzz_tokenizer) are kept as text.
void TstTokenizer::byteTokensParsedStrictly() {
    TokenizerData d;
    d.name = "spm-bytes";
    d.model = "llama";
    const char* texts[] = {"<unk>", "<0x-1>", "<0x+F>", "<0xG0>", "<0x4142", "<0x41>", "<0x7a>"};
    for (const char* t : texts) {
        d.tokens.emplace_back(t);
        d.token_types.push_back(int32_t(TokenType::Byte));
    }
    d.token_types[0] = int32_t(TokenType::Unknown);
    d.unk_id = 0;
    const auto tok = Tokenizer::create(d);
    QCOMPARE(tok->piece(1), std::string_view("<0x-1>"));
    QCOMPARE(tok->piece(3), std::string_view("<0xG0>"));
    QCOMPARE(tok->piece(4), std::string_view("<0x4142"));
    QCOMPARE(tok->piece(5), std::string_view("A"));
    QCOMPARE(tok->piece(6), std::string_view("z"));
    QCOMPARE(tok->encode("Az"), (std::vector<int32_t>{5, 6}));
    QCOMPARE(tok->encode("\xff"), (std::vector<int32_t>{0}));  // no byte token: unk
}

QTEST_APPLESS_MAIN(TstTokenizer)
#include "tst_tokenizer.moc"
