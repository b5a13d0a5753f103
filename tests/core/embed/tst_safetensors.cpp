// The safetensors reader and the strict JSON parser under it: hand-built files of every float
// dtype (values read back exactly, unaligned data sections included), the header rules one by one
// (each hostile file refused with FormatError naming the file and the problem), and the real
// all-MiniLM-L6-v2 weights when scripts/setup.sh has installed them.
#include <QTest>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/embed/json.h"
#include "core/embed/safetensors.h"
#include "core/embed/sentence_embedder.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"
#include "tests/common/test_support.h"

using Bytes = std::vector<uint8_t>;

namespace {

// A file: the header text (padded with spaces to `pad` bytes alignment of the data section when
// pad > 0) followed by `data`.
Bytes make_file(const std::string& header, const Bytes& data, size_t pad = 8) {
    std::string h = header;
    if (pad)
        while ((8 + h.size()) % pad) h += ' ';
    Bytes out;
    out.reserve(8 + h.size() + data.size());
    const uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    for (const char c : h) out.push_back(static_cast<uint8_t>(c));
    for (const uint8_t b : data) out.push_back(b);
    return out;
}

template <typename T>
void append(Bytes& b, const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    b.insert(b.end(), p, p + v.size() * sizeof(T));
}

// Three tensors (F32 2x3, F16 4, BF16 [2,1,2]) + metadata: the seed of most tests.
Bytes good_file(size_t pad, std::vector<float>* f32_out = nullptr) {
    const std::vector<float> f32{1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e-3f};
    std::vector<uint16_t> f16, bf16;
    for (float v : {0.5f, -1.0f, 65504.0f, 2.0f}) f16.push_back(sl::kernels::f32_to_f16(v));
    for (float v : {1.0f, -3.0f, 0.25f, 128.0f}) bf16.push_back(sl::kernels::f32_to_bf16(v));
    Bytes data;
    append(data, f32);
    append(data, f16);
    append(data, bf16);
    if (f32_out) *f32_out = f32;
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
        R"("b":{"dtype":"F16","shape":[4],"data_offsets":[24,32]},)"
        R"("c":{"dtype":"BF16","shape":[2,1,2],"data_offsets":[32,40]}})";
    return make_file(header, data, pad);
}

sl::SafetensorsFile parse(const Bytes& b) {
    return sl::SafetensorsFile::parse(std::span<const uint8_t>(b.data(), b.size()),
                                      "t.safetensors");
}

// Expects parse to throw FormatError whose message names the file and contains `needle`.
void expect_refused(const Bytes& b, const char* needle) {
    try {
        parse(b);
        QFAIL(qPrintable(QStringLiteral("accepted a file that should fail with '%1'")
                             .arg(QLatin1String(needle))));
    } catch (const sl::FormatError& e) {
        const std::string msg = e.what();
        if (msg.rfind("t.safetensors", 0) != 0 || msg.find(needle) == std::string::npos)
            QFAIL(qPrintable(QStringLiteral("message '%1' lacks '%2'")
                                 .arg(QString::fromStdString(msg), QLatin1String(needle))));
    }
}

Bytes tensor_file(const std::string& tensor_json, size_t data_bytes) {
    return make_file("{\"t\":" + tensor_json + "}", Bytes(data_bytes, 0x11));
}

}  // namespace

class TstSafetensors : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void readsEveryFloatDtype_data();
    void readsEveryFloatDtype();
    void refusesHostileHeaders_data();
    void refusesHostileHeaders();
    void json();
    void jsonRefuses_data();
    void jsonRefuses();
    void realModel();
    void writeFuzzSeeds();
};

void TstSafetensors::readsEveryFloatDtype_data() {
    QTest::addColumn<int>("pad");
    QTest::newRow("aligned") << 8;
    QTest::newRow("unaligned data section") << 0;
}

void TstSafetensors::readsEveryFloatDtype() {
    QFETCH(int, pad);
    std::vector<float> f32;
    const Bytes b = good_file(static_cast<size_t>(pad), &f32);
    const auto f = parse(b);
    QCOMPARE(f.tensors().size(), size_t(3));
    QCOMPARE(f.metadata().size(), size_t(1));
    QCOMPARE(f.metadata()[0].second, std::string("pt"));
    const auto& a = f.get("a.weight");
    QCOMPARE(a.dtype, sl::SafetensorsDtype::F32);
    QCOMPARE(a.shape, (std::vector<uint64_t>{2, 3}));
    QCOMPARE(a.n_bytes, uint64_t(24));
    QCOMPARE(f.to_f32(a), f32);
    QCOMPARE(f.to_f32(f.get("b")), (std::vector<float>{0.5f, -1.0f, 65504.0f, 2.0f}));
    const auto& c = f.get("c");
    QCOMPARE(c.shape, (std::vector<uint64_t>{2, 1, 2}));
    QCOMPARE(f.to_f32(c), (std::vector<float>{1.0f, -3.0f, 0.25f, 128.0f}));
    QVERIFY(f.find("missing") == nullptr);
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, f.get("missing"));
    // Tensors are views into the caller's bytes.
    QCOMPARE(static_cast<const void*>(a.data), static_cast<const void*>(b.data() + b.size() - 40));
}

void TstSafetensors::refusesHostileHeaders_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<QString>("needle");
    auto row = [](const char* name, const Bytes& b, const char* needle) {
        QTest::newRow(name) << QByteArray(reinterpret_cast<const char*>(b.data()),
                                          static_cast<qsizetype>(b.size()))
                            << QString::fromLatin1(needle);
    };
    row("empty", Bytes{}, "too short");
    row("seven bytes", Bytes(7, 0), "too short");
    {
        Bytes b = good_file(8);
        b[7] = 0x7f;  // header size ~ 9e18
        row("huge header size", b, "over the limit");
        Bytes c = good_file(8);
        const uint64_t n = c.size() - 8 + 1;  // one byte more than the file holds
        for (int i = 0; i < 8; ++i) c[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
        row("header past the end", c, "past the end");
    }
    row("not an object", make_file("[1,2]", {}), "does not start with '{'");
    row("bad json", make_file("{\"t\":}", {}), "JSON at byte");
    row("trailing garbage", make_file("{} x", {}), "after the value");
    row("unknown dtype", tensor_file(R"({"dtype":"F13","shape":[1],"data_offsets":[0,4]})", 4),
        "unknown dtype 'F13'");
    row("dtype not a string", tensor_file(R"({"dtype":4,"shape":[1],"data_offsets":[0,4]})", 4),
        "no dtype");
    row("no shape", tensor_file(R"({"dtype":"F32","data_offsets":[0,4]})", 4), "no shape");
    row("negative dim", tensor_file(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", 4),
        "non-negative integer");
    row("fractional dim", tensor_file(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", 4),
        "non-negative integer");
    row("nine dims",
        tensor_file(R"({"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]})", 4),
        "9 dims");
    row("shape overflow",
        tensor_file(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})", 4),
        "overflows");
    row("byte overflow",
        tensor_file(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]})", 4),
        "overflows");
    row("offset past data", tensor_file(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 4),
        "not inside");
    row("offsets reversed", tensor_file(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})", 4),
        "not inside");
    row("offset beyond u64",
        tensor_file(R"({"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]})", 4),
        "not non-negative integers");
    row("size mismatch", tensor_file(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 16),
        "which needs 12");
    row("one offset", tensor_file(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", 4),
        "data_offsets");
    row("overlap",
        make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                  Bytes(12, 0)),
        "overlap");
    row("duplicate tensor",
        make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  Bytes(8, 0)),
        "appears twice");
    row("metadata not strings", make_file(R"({"__metadata__":{"k":1}})", {}), "not a string");
    row("tensor not an object", make_file(R"({"a":[1]})", {}), "is not an object");
}

void TstSafetensors::refusesHostileHeaders() {
    QFETCH(QByteArray, file);
    QFETCH(QString, needle);
    const Bytes b(file.begin(), file.end());
    expect_refused(b, needle.toUtf8().constData());
}

void TstSafetensors::json() {
    using sl::JsonValue;
    const JsonValue v = JsonValue::parse(
        R"( {"a": [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00\n"], "big": 18446744073709551615,
             "eps": 1e-12, "o": {}} )",
        "t.json");
    QVERIFY(v.is_object());
    const JsonValue* a = v.find("a");
    QVERIFY(a && a->is_array());
    QCOMPARE(a->items().size(), size_t(6));
    QCOMPARE(a->items()[0].as_u64().value(), uint64_t(1));
    QCOMPARE(a->items()[1].as_double(), -2500.0);
    QVERIFY(!a->items()[1].as_u64());
    QVERIFY(a->items()[2].as_bool());
    QCOMPARE(a->items()[4].type(), JsonValue::Type::Null);
    QCOMPARE(a->items()[5].text(), std::string("x\xc3\xa9\xf0\x9f\x98\x80\n"));
    QCOMPARE(v.find("big")->as_u64().value(), UINT64_MAX);
    QCOMPARE(static_cast<float>(v.find("eps")->as_double()), 1e-12f);
    QVERIFY(v.find("o")->is_object());
    QVERIFY(v.find("nope") == nullptr);
}

void TstSafetensors::jsonRefuses_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::newRow("empty") << QByteArray("");
    QTest::newRow("trailing comma") << QByteArray("[1,]");
    QTest::newRow("leading zero") << QByteArray("012");
    QTest::newRow("bare minus") << QByteArray("-");
    QTest::newRow("NaN") << QByteArray("NaN");
    QTest::newRow("unterminated") << QByteArray("\"abc");
    QTest::newRow("control char") << QByteArray("\"a\tb\"");
    QTest::newRow("lone low surrogate") << QByteArray("\"\\udc00\"");
    QTest::newRow("lone high surrogate") << QByteArray("\"\\ud800x\"");
    QTest::newRow("bad escape") << QByteArray("\"\\q\"");
    QTest::newRow("invalid utf-8") << QByteArray("\"\xff\"");
    QTest::newRow("comment") << QByteArray("[1 /* c */]");
    QTest::newRow("two values") << QByteArray("1 2");
    QTest::newRow("too deep") << QByteArray(100, '[') + QByteArray(100, ']');
}

void TstSafetensors::jsonRefuses() {
    QFETCH(QByteArray, text);
    try {
        sl::JsonValue::parse(std::string_view(text.constData(), static_cast<size_t>(text.size())),
                             "t.json");
        QFAIL("accepted");
    } catch (const sl::FormatError& e) {
        QVERIFY2(std::string(e.what()).rfind("t.json: JSON at byte", 0) == 0, e.what());
    }
}

void TstSafetensors::realModel() {
    const auto dir = sl::SentenceEmbedder::default_dir();
    if (!std::filesystem::exists(dir / "model.safetensors"))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh")
                             .arg(QString::fromStdString(dir.string()))));
    const auto f = sl::SafetensorsFile::open(dir / "model.safetensors");
    QVERIFY(f.tensors().size() >= 100);
    const auto& w = f.get("embeddings.word_embeddings.weight");
    QCOMPARE(w.dtype, sl::SafetensorsDtype::F32);
    QCOMPARE(w.shape, (std::vector<uint64_t>{30522, 384}));
    QCOMPARE(f.get("encoder.layer.5.output.dense.weight").shape,
             (std::vector<uint64_t>{384, 1536}));
    QCOMPARE(f.get("embeddings.position_ids").dtype, sl::SafetensorsDtype::I64);
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, f.to_f32(f.get("embeddings.position_ids")));
    // Every byte of the data section belongs to one tensor: they tile it exactly.
    uint64_t total = 0;
    for (const auto& t : f.tensors()) total += t.n_bytes;
    const uint64_t size = std::filesystem::file_size(dir / "model.safetensors");
    uint64_t header = 0;
    {
        std::ifstream in(dir / "model.safetensors", std::ios::binary);
        uint8_t b[8];
        in.read(reinterpret_cast<char*>(b), 8);
        for (int i = 7; i >= 0; --i) header = (header << 8) | b[i];
    }
    QCOMPARE(total, size - 8 - header);
}

void TstSafetensors::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_safetensors: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir>
    // tst_safetensors
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    auto write = [&](const char* name, const Bytes& b) {
        std::ofstream(out / name, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    };
    write("three_dtypes.safetensors", good_file(8));
    write("unaligned.safetensors", good_file(0));
    write("every_dtype.safetensors",
          make_file(R"({"b":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},)"
                    R"("u8":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
                    R"("i8":{"dtype":"I8","shape":[1],"data_offsets":[2,3]},)"
                    R"("e5":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[3,4]},)"
                    R"("e4":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[4,5]},)"
                    R"("i16":{"dtype":"I16","shape":[1],"data_offsets":[6,8]},)"
                    R"("u16":{"dtype":"U16","shape":[1],"data_offsets":[8,10]},)"
                    R"("i32":{"dtype":"I32","shape":[1],"data_offsets":[12,16]},)"
                    R"("u32":{"dtype":"U32","shape":[1],"data_offsets":[16,20]},)"
                    R"("f64":{"dtype":"F64","shape":[1],"data_offsets":[24,32]},)"
                    R"("i64":{"dtype":"I64","shape":[],"data_offsets":[32,40]},)"
                    R"("u64":{"dtype":"U64","shape":[0,3],"data_offsets":[40,40]}})",
                    Bytes(40, 0x3c)));
    write("json_escapes.safetensors",
          make_file(R"({"__metadata__":{"k\u00e9y":"v\ud83d\ude00\n","n":"[1, 2.5e-3]"},)"
                    R"("t\/x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    Bytes(4, 0)));
}

QTEST_GUILESS_MAIN(TstSafetensors)
#include "tst_safetensors.moc"
