// The CTranslate2 model.bin reader: a hand-built file of every dtype (values read back exactly,
// int8/int16 dequantized with their scales, aliases resolved), the format's rules one by one (each
// hostile file refused with FormatError naming the file and the problem, every truncation
// refused), and the real Whisper tiny.en of scripts/setup.sh against an independent numpy reading
// (tests/reference/whisper/ct2_dump.py): same names, shapes, dtypes and value sums.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/whisper/ct2_model.h"
#include "kernels/cpu/convert.h"
#include "tests/common/test_support.h"
#include "tests/core/whisper/ct2_test_writer.h"

using Bytes = std::vector<uint8_t>;
using sl::test::Ct2Writer;

namespace {

const std::vector<float> kF32{1.5f, -2.0f, 3.25f, 0.0f, -0.125f, 1e-3f};
const std::vector<float> kHalf{0.5f, -1.0f, 65504.0f, 2.0f};
const std::vector<float> kBf16{1.0f, -3.0f, 0.25f, 128.0f};

// Every dtype, a per-row int8 weight and a per-tensor int16 one with their scales, scalar flags,
// and one alias. Variables in name order, as CTranslate2 writes them.
Ct2Writer good_writer(bool with_aliases = true) {
    std::vector<uint16_t> f16, bf16;
    for (float v : kHalf) f16.push_back(sl::kernels::f32_to_f16(v));
    for (float v : kBf16) bf16.push_back(sl::kernels::f32_to_bf16(v));
    Ct2Writer w;
    w.header();
    w.u32(10);
    w.var("a/weight", {2, 3}, 0, Ct2Writer::of(kF32));
    w.var("b/half", {4}, 4, Ct2Writer::of(f16));
    w.var("c/bf16", {2, 1, 2}, 5, Ct2Writer::of(bf16));
    w.var("d/weight", {2, 2}, 1, Ct2Writer::of(std::vector<int8_t>{127, -64, 2, -1}));
    w.var("d/weight_scale", {2}, 0, Ct2Writer::of(std::vector<float>{2.0f, 0.5f}));
    w.var("e/weight", {3}, 2, Ct2Writer::of(std::vector<int16_t>{1024, -512, 7}));
    w.var("e/weight_scale", {}, 0, Ct2Writer::of(std::vector<float>{1024.0f}));
    w.var("f/ids", {2}, 3, Ct2Writer::of(std::vector<int32_t>{-7, 50257}));
    w.var("g/flag", {}, 1, Ct2Writer::of(std::vector<int8_t>{3}));
    w.var("h/num_heads", {}, 2, Ct2Writer::of(std::vector<int16_t>{6}));
    if (with_aliases) {
        w.u32(2);
        w.str("z/tied").str("a/weight");
        w.str("z/tied_int8").str("d/weight");
    }
    return w;
}

sl::Ct2Model parse(const Bytes& b) {
    return sl::Ct2Model::parse(std::span<const uint8_t>(b.data(), b.size()), "t/model.bin");
}

std::filesystem::path model_dir() {
    return sl::paths::cache_dir() / "models" / "whisper-tiny.en";
}

}  // namespace

class TstCt2Model : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void readsEveryDtype();
    void refusesHostileFiles_data();
    void refusesHostileFiles();
    void refusesEveryTruncation();
    void conversionErrors();
    void realModel();
    void realModelMatchesNumpy();
    void writeFuzzSeeds();
};

void TstCt2Model::readsEveryDtype() {
    const Bytes b = good_writer().bytes;
    const sl::Ct2Model m = parse(b);
    QCOMPARE(m.binary_version(), 6u);
    QCOMPARE(m.spec_name(), std::string_view("WhisperSpec"));
    QCOMPARE(m.spec_revision(), 3u);
    QCOMPARE(m.variables().size(), size_t{10});
    QCOMPARE(m.aliases().size(), size_t{2});

    const auto& a = m.get("a/weight", std::vector<uint32_t>{2, 3});
    QCOMPARE(a.dtype, sl::Ct2Dtype::F32);
    QCOMPARE(a.n_elements, uint64_t{6});
    QCOMPARE(a.n_bytes, uint64_t{24});
    QCOMPARE(m.to_f32("a/weight"), kF32);
    QCOMPARE(m.to_f32("b/half"), kHalf);
    QCOMPARE(m.to_f32("c/bf16"), kBf16);
    QCOMPARE(m.get("c/bf16").shape, (std::vector<uint32_t>{2, 1, 2}));
    // int8, one scale per row: q / scale.
    QCOMPARE(m.to_f32("d/weight"), (std::vector<float>{63.5f, -32.0f, 4.0f, -2.0f}));
    // int16, one scale for the whole weight.
    QCOMPARE(m.to_f32("e/weight"), (std::vector<float>{1.0f, -0.5f, 7.0f / 1024.0f}));
    QCOMPARE(m.to_f32("f/ids"), (std::vector<float>{-7.0f, 50257.0f}));
    QCOMPARE(m.scalar_int("g/flag"), int64_t{3});
    QCOMPARE(m.scalar_int("h/num_heads"), int64_t{6});
    QCOMPARE(m.scalar_f32("e/weight_scale"), 1024.0f);
    // Aliases resolve to their target, quantization scale included.
    QCOMPARE(m.find("z/tied"), &a);
    QCOMPARE(m.to_f32("z/tied"), kF32);
    QCOMPARE(m.to_f32("z/tied_int8"), m.to_f32("d/weight"));
    QVERIFY(m.find("missing") == nullptr);
    // Views into the caller's bytes.
    QVERIFY(a.data > b.data() && a.data + a.n_bytes <= b.data() + b.size());
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, m.get("missing"));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, m.get("a/weight", std::vector<uint32_t>{3, 2}));
}

void TstCt2Model::refusesHostileFiles_data() {
    QTest::addColumn<QByteArray>("file");
    QTest::addColumn<QString>("needle");
    auto row = [](const char* name, const Ct2Writer& w, const char* needle) {
        QTest::newRow(name) << QByteArray(reinterpret_cast<const char*>(w.bytes.data()),
                                          static_cast<qsizetype>(w.bytes.size()))
                            << QString::fromLatin1(needle);
    };
    auto body = [](Ct2Writer w) -> Ct2Writer { return w; };
    const Bytes f4 = Ct2Writer::of(std::vector<float>{1, 2, 3, 4});

    row("empty", Ct2Writer{}, "too short");
    row("old version", Ct2Writer{}.header(3).u32(0).u32(0), "too old");
    row("future version", Ct2Writer{}.header(7).u32(0).u32(0), "unsupported binary version 7");
    row("gguf magic", Ct2Writer{}.raw("GGUF", 4).u32(3), "not a CTranslate2 model");
    row("big-endian", Ct2Writer{}.u32(0x06000000u).str("S").u32(1).u32(0).u32(0), "big-endian");
    row("spec name without NUL", Ct2Writer{}.u32(6).u16(3).raw("abc", 3), "does not end in a NUL");
    row("spec name length 0", Ct2Writer{}.u32(6).u16(0), "length 0");
    row("spec name empty", Ct2Writer{}.u32(6).u16(1).u8(0).u32(1).u32(0).u32(0), "is empty");
    row("spec name past the end", Ct2Writer{}.u32(6).u16(200).raw("ab\0", 3), "truncated file");
    row("variable count too large", Ct2Writer{}.header().u32(1000000), "variables, but");
    row("control byte in a name", Ct2Writer{}.header().u32(1).var("a\nb", {4}, 0, f4).u32(0),
        "control byte");
    row("NUL inside a name",
        Ct2Writer{}.header().u32(1).u16(4).raw("a\0b\0", 4).u8(0).u8(0).u32(0).u32(0),
        "control byte");
    row("rank 9", Ct2Writer{}.header().u32(1).var("r", {1, 1, 1, 1, 1, 1, 1, 1, 4}, 0, f4).u32(0),
        "rank 9");
    row("unknown dtype", Ct2Writer{}.header().u32(1).var("t", {4}, 6, f4).u32(0),
        "unknown dtype id 6");
    row("bytes differ from shape", Ct2Writer{}.header().u32(1).var("t", {5}, 0, f4).u32(0),
        "stores 16 bytes");
    row("bytes differ from dtype", Ct2Writer{}.header().u32(1).var("t", {4}, 4, f4).u32(0),
        "(8 bytes) but stores 16");
    row("element count overflows",
        Ct2Writer{}
            .header()
            .u32(1)
            .var("t", {0xffffffffu, 0xffffffffu, 0xffffffffu}, 0, {}, 0)
            .u32(0),
        "overflows");
    row("bytes over 2^64",
        Ct2Writer{}.header().u32(1).var("t", {0xffffffffu, 0xffffffffu}, 0, {}, 0).u32(0),
        "over 2^64");
    row("data past the end", Ct2Writer{}.header().u32(1).var("t", {4}, 0, Bytes(8, 0), 16),
        "truncated file");
    row("duplicate variable",
        Ct2Writer{}.header().u32(2).var("t", {4}, 0, f4).var("t", {4}, 0, f4).u32(0),
        "duplicate variable 't'");
    row("no alias count", Ct2Writer{}.header().u32(1).var("t", {4}, 0, f4), "alias count");
    row("alias count too large", Ct2Writer{}.header().u32(1).var("t", {4}, 0, f4).u32(0x10000),
        "aliases, but");
    row("alias of a missing variable",
        Ct2Writer{}.header().u32(1).var("t", {4}, 0, f4).u32(1).str("x").str("nope"),
        "not a variable");
    row("alias of an alias",
        Ct2Writer{}.header().u32(1).var("t", {4}, 0, f4).u32(2).str("x").str("t").str("y").str("x"),
        "not a variable");
    row("alias clashes with a variable",
        Ct2Writer{}
            .header()
            .u32(2)
            .var("t", {4}, 0, f4)
            .var("u", {4}, 0, f4)
            .u32(1)
            .str("u")
            .str("t"),
        "clashes");
    row("trailing bytes", body(good_writer()).u8(0), "unexpected bytes after the alias table");
}

void TstCt2Model::refusesHostileFiles() {
    QFETCH(QByteArray, file);
    QFETCH(QString, needle);
    const Bytes b(file.begin(), file.end());
    try {
        parse(b);
        QFAIL(qPrintable(QStringLiteral("accepted a file that should fail with '%1'").arg(needle)));
    } catch (const sl::FormatError& e) {
        const QString msg = QString::fromStdString(e.what());
        QVERIFY2(msg.startsWith(QStringLiteral("t/model.bin: ")), qPrintable(msg));
        QVERIFY2(msg.contains(needle),
                 qPrintable(QStringLiteral("'%1' lacks '%2'").arg(msg, needle)));
    }
}

void TstCt2Model::refusesEveryTruncation() {
    const Bytes b = good_writer().bytes;
    QVERIFY(!parse(b).variables().empty());
    for (size_t n = 0; n < b.size(); ++n) {
        const Bytes cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
        QVERIFY_THROWS_EXCEPTION(sl::FormatError, parse(cut));
    }
}

void TstCt2Model::conversionErrors() {
    const Bytes q4 = Ct2Writer::of(std::vector<int8_t>{1, 2, 3, 4});
    auto expect = [](const sl::Ct2Model& m, const char* var, const char* needle) {
        try {
            (void)m.to_f32(var);
            QFAIL(qPrintable(QStringLiteral("converted %1").arg(QLatin1String(var))));
        } catch (const sl::FormatError& e) {
            QVERIFY2(std::string(e.what()).find(needle) != std::string::npos, e.what());
        }
    };
    Ct2Writer w;
    w.header().u32(7);
    w.var("no_scale", {2, 2}, 1, q4);
    w.var("scale0", {2, 2}, 1, q4);
    w.var("scale0_scale", {2}, 0, Ct2Writer::of(std::vector<float>{1.0f, 0.0f}));
    w.var("scale3", {2, 2}, 1, q4);
    w.var("scale3_scale", {3}, 0, Ct2Writer::of(std::vector<float>{1, 1, 1}));
    w.var("scalef16", {2, 2}, 1, q4);
    w.var("scalef16_scale", {1}, 4, Bytes(2, 0x3c));
    w.u32(0);
    const sl::Ct2Model m = parse(w.bytes);
    expect(m, "no_scale", "has no scale variable 'no_scale_scale'");
    expect(m, "scale0", "is not a finite positive number");
    expect(m, "scale3", "expected 1 or one per row (2)");
    expect(m, "scalef16", "is float16, expected float32");
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, m.scalar_int("scale0_scale"));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, m.scalar_f32("scale0_scale"));
}

void TstCt2Model::realModel() {
    const std::filesystem::path path = model_dir() / "model.bin";
    if (!std::filesystem::exists(path))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh (Whisper tiny.en)")
                             .arg(QString::fromStdString(path.string()))));
    QElapsedTimer timer;
    timer.start();
    const sl::Ct2Model m = sl::Ct2Model::open(path);
    qInfo("opened and parsed %s in %.2f ms", path.c_str(), timer.nsecsElapsed() / 1e6);
    QCOMPARE(m.binary_version(), 6u);
    QCOMPARE(m.spec_name(), std::string_view("WhisperSpec"));
    QCOMPARE(m.spec_revision(), 3u);
    QCOMPARE(m.variables().size(), size_t{148});
    // Whisper tiny: d_model 384, 6 heads, 4 encoder and 4 decoder layers, 80 mels, 1500 audio
    // positions, 448 text positions, vocabulary 51864 (English-only).
    using S = std::vector<uint32_t>;
    QCOMPARE(m.get("encoder/conv1/weight").shape, (S{384, 80, 3}));
    QCOMPARE(m.get("encoder/conv2/weight").shape, (S{384, 384, 3}));
    QCOMPARE(m.get("encoder/position_encodings/encodings").shape, (S{1500, 384}));
    QCOMPARE(m.get("encoder/layer_3/self_attention/linear_0/weight").shape, (S{1152, 384}));
    QVERIFY(m.find("encoder/layer_4/self_attention/linear_0/weight") == nullptr);
    QCOMPARE(m.get("decoder/embeddings/weight").shape, (S{51864, 384}));
    QCOMPARE(m.get("decoder/position_encodings/encodings").shape, (S{448, 384}));
    QCOMPARE(m.get("decoder/layer_3/attention/linear_1/weight").shape, (S{768, 384}));
    QCOMPARE(m.get("decoder/layer_0/ffn/linear_0/weight").shape, (S{1536, 384}));
    QVERIFY(m.find("decoder/layer_4/ffn/linear_0/weight") == nullptr);
    QCOMPARE(m.get("decoder/embeddings/weight").dtype, sl::Ct2Dtype::F16);
    QCOMPARE(m.scalar_int("encoder/num_heads"), int64_t{6});
    QCOMPARE(m.scalar_int("decoder/num_heads"), int64_t{6});
    QCOMPARE(m.scalar_int("decoder/pre_norm"), int64_t{1});
    // The output projection is tied to the embeddings.
    QCOMPARE(m.aliases().size(), size_t{1});
    QCOMPARE(m.find("decoder/projection/weight"), m.find("decoder/embeddings/weight"));
    timer.restart();
    size_t n = 0;
    for (const auto& v : m.variables())
        if (v.dtype == sl::Ct2Dtype::F16 || v.dtype == sl::Ct2Dtype::F32)
            n += m.to_f32(v.name).size();
    qInfo("converted %zu values to float32 in %.1f ms", n, timer.nsecsElapsed() / 1e6);
    QCOMPARE(n, size_t{37764864});
}

void TstCt2Model::realModelMatchesNumpy() {
    const std::filesystem::path path = model_dir() / "model.bin";
    if (!std::filesystem::exists(path))
        QSKIP(qPrintable(QStringLiteral("%1 is missing: run scripts/setup.sh (Whisper tiny.en)")
                             .arg(QString::fromStdString(path.string()))));
    const QString python = sl::test::require_venv_python();
    QVERIFY(!python.isEmpty());
    QTemporaryDir tmp;
    const QString out = tmp.filePath(QStringLiteral("dump.json"));
    QVERIFY(
        sl::test::run_process(python,
                              {sl::test::reference_script(QStringLiteral("whisper/ct2_dump.py")),
                               QString::fromStdString(path.string()), out},
                              nullptr));
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject ref = QJsonDocument::fromJson(f.readAll()).object();
    const sl::Ct2Model m = sl::Ct2Model::open(path);
    QCOMPARE(ref.value(QStringLiteral("version")).toInt(), static_cast<int>(m.binary_version()));
    QCOMPARE(ref.value(QStringLiteral("spec")).toString().toStdString(),
             std::string(m.spec_name()));
    const QJsonArray vars = ref.value(QStringLiteral("variables")).toArray();
    QCOMPARE(static_cast<size_t>(vars.size()), m.variables().size());
    for (qsizetype i = 0; i < vars.size(); ++i) {
        const QJsonObject r = vars[i].toObject();
        const sl::Ct2Variable& v = m.variables()[static_cast<size_t>(i)];
        const std::string name = r.value(QStringLiteral("name")).toString().toStdString();
        QCOMPARE(std::string(v.name), name);
        std::vector<uint32_t> shape;
        for (const auto& d : r.value(QStringLiteral("shape")).toArray())
            shape.push_back(static_cast<uint32_t>(d.toInteger()));
        QCOMPARE(v.shape, shape);
        QCOMPARE(std::string(sl::ct2_dtype_name(v.dtype)),
                 r.value(QStringLiteral("dtype")).toString().toStdString());
        if (v.shape.empty() && v.dtype != sl::Ct2Dtype::F32) {
            QCOMPARE(static_cast<double>(m.scalar_int(v.name)),
                     r.value(QStringLiteral("first")).toDouble());
            continue;
        }
        const std::vector<float> x = m.to_f32(v.name);
        double sum = 0, sumsq = 0;
        for (const float e : x) sum += e, sumsq += double(e) * e;
        const double want = r.value(QStringLiteral("sum")).toDouble();
        const double want_sq = r.value(QStringLiteral("sumsq")).toDouble();
        // Both sum the same float values in float64, in different orders.
        QVERIFY2(std::abs(sum - want) <= 1e-9 * want_sq + 1e-12,
                 qPrintable(QStringLiteral("%1: sum %2, numpy %3")
                                .arg(QString::fromStdString(name))
                                .arg(sum)
                                .arg(want)));
        QVERIFY2(std::abs(sumsq - want_sq) <= 1e-9 * want_sq,
                 qPrintable(QString::fromStdString(name)));
        QCOMPARE(static_cast<double>(x.front()), r.value(QStringLiteral("first")).toDouble());
    }
    const QJsonArray aliases = ref.value(QStringLiteral("aliases")).toArray();
    QCOMPARE(static_cast<size_t>(aliases.size()), m.aliases().size());
    for (qsizetype i = 0; i < aliases.size(); ++i) {
        const QJsonArray a = aliases[i].toArray();
        QCOMPARE(std::string(m.aliases()[static_cast<size_t>(i)].first),
                 a[0].toString().toStdString());
        QCOMPARE(std::string(m.aliases()[static_cast<size_t>(i)].second),
                 a[1].toString().toStdString());
    }
}

void TstCt2Model::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_ct2_model: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir>
    // tst_ct2_model
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    auto write = [&](const char* name, const Bytes& b) {
        std::ofstream(out / name, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    };
    write("every_dtype.bin", good_writer().bytes);
    // A miniature Whisper layout: scalars, a fused QKV, an alias (shapes shrunk to a few values).
    Ct2Writer w;
    w.header(6, "WhisperSpec", 3).u32(6);
    w.var("decoder/embeddings/weight", {3, 2}, 4, Bytes(12, 0x3c));
    w.var("decoder/num_heads", {}, 2, Ct2Writer::of(std::vector<int16_t>{2}));
    w.var("decoder/pre_norm", {}, 1, Bytes{1});
    w.var("encoder/conv1/weight", {2, 1, 3}, 0, Bytes(24, 0));
    w.var("encoder/layer_0/self_attention/linear_0/weight", {6, 2}, 1, Bytes(12, 7));
    w.var("encoder/layer_0/self_attention/linear_0/weight_scale", {6}, 0, Bytes(24, 0x3f));
    w.u32(1).str("decoder/projection/weight").str("decoder/embeddings/weight");
    write("whisper_like.bin", w.bytes);
    write("version4_empty.bin", Ct2Writer{}.header(4, "TransformerSpec", 1).u32(0).u32(0).bytes);
}

QTEST_APPLESS_MAIN(TstCt2Model)
#include "tst_ct2_model.moc"
