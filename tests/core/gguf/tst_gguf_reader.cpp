// The GGUF reader on small files made by the test writer: every value type round-trips, tensors
// land where they should, and hostile files (truncated, huge counts, overflowing dims, overlaps,
// bad types and alignments) throw FormatError naming what is wrong, never crash.
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/gguf/gguf_reader.h"
#include "core/util/error.h"
#include "kernels/cpu/tensor_types.h"
#include "tests/common/test_support.h"
#include "tests/core/gguf/gguf_test_writer.h"

using sl::GgufFile;
using sl::GgufType;
using sl::test::Bytes;
using sl::test::GgufTestWriter;
namespace gv = sl::test::gv;

class TstGgufReader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void everyValueTypeRoundTrips_data();
    void everyValueTypeRoundTrips();
    void tensorsLandAligned_data();
    void tensorsLandAligned();
    void typedGetters();
    void emptyTypedArrays();
    void archHelpers();
    void openReadsAFileAndNamesItInErrors();
    void hostileFilesThrow_data();
    void hostileFilesThrow();
    void truncatedAtEveryOffsetThrows();
    void corruptedBytesNeverCrash();
    void writeFuzzSeeds();
};

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_1 = 3, kQ8_0 = 8;

QByteArray to_qba(const Bytes& b) {
    return QByteArray(reinterpret_cast<const char*>(b.data()), static_cast<qsizetype>(b.size()));
}

// A small file with every value type, nested arrays and four tensors of four types.
GgufTestWriter every_type_file(uint32_t version) {
    GgufTestWriter w;
    w.version(version)
        .kv("general.architecture", gv::str("llama"))
        .kv("t.u8", gv::u8(200))
        .kv("t.i8", gv::i8(-5))
        .kv("t.u16", gv::u16(60000))
        .kv("t.i16", gv::i16(-300))
        .kv("t.u32", gv::u32(4000000000u))
        .kv("t.i32", gv::i32(-7))
        .kv("t.f32", gv::f32(1.5f))
        .kv("t.bool", gv::boolean(true))
        .kv("t.string", gv::str("h\xc3\xa9llo"))
        .kv("t.empty_string", gv::str(""))
        .kv("t.u64", gv::u64((uint64_t{1} << 63) + 5))
        .kv("t.i64", gv::i64(-(int64_t{1} << 40)))
        .kv("t.f64", gv::f64(3.25))
        .kv("t.arr_u8", gv::array(GgufType::Uint8, {gv::u8(1), gv::u8(2), gv::u8(255)}))
        .kv("t.arr_i32", gv::array(GgufType::Int32, {gv::i32(-1), gv::i32(0), gv::i32(1 << 30)}))
        .kv("t.arr_f32", gv::array(GgufType::Float32, {gv::f32(0.25f), gv::f32(-2.0f)}))
        .kv("t.arr_f64", gv::array(GgufType::Float64, {gv::f64(1e300)}))
        .kv("t.arr_bool", gv::array(GgufType::Bool, {gv::boolean(false), gv::boolean(true)}))
        .kv("t.arr_str", gv::str_array({"a", "", "ccc"}))
        .kv("t.arr_empty", gv::array(GgufType::Int32, {}))
        .kv("t.nested",
            gv::array(GgufType::Array,
                      {gv::array(GgufType::Uint32, {gv::u32(1), gv::u32(2)}),
                       gv::array(GgufType::Uint32, {}), gv::array(GgufType::Uint32, {gv::u32(3)})}))
        .kv("t.nested_str",
            gv::array(GgufType::Array, {gv::str_array({"x"}), gv::str_array({"y", "z"})}))
        .tensor("token_embd.weight", kQ8_0, {64, 10})
        .tensor("output_norm.weight", kF32, {64})
        .tensor("blk.0.w", kQ4_1, {32, 3, 2})
        .tensor("blk.0.h", kF16, {5, 7, 1, 2});
    return w;
}

std::vector<std::string> to_strings(std::span<const std::string_view> v) {
    return {v.begin(), v.end()};
}

// What parse() throws, or "" when it does not throw.
QString parse_error(const Bytes& bytes) {
    try {
        GgufFile::parse(bytes, "hostile.gguf");
    } catch (const sl::FormatError& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

}  // namespace

void TstGgufReader::everyValueTypeRoundTrips_data() {
    QTest::addColumn<uint32_t>("version");
    QTest::newRow("v2") << 2u;
    QTest::newRow("v3") << 3u;
}

void TstGgufReader::everyValueTypeRoundTrips() {
    QFETCH(uint32_t, version);
    const Bytes bytes = every_type_file(version).build();
    const GgufFile f = GgufFile::parse(bytes);
    QCOMPARE(f.version(), version);
    QCOMPARE(f.name(), std::string("<memory>"));
    QCOMPARE(f.file_size(), uint64_t{bytes.size()});
    QCOMPARE(f.metadata().size(), size_t{23});
    QCOMPARE(f.metadata()[1].key, std::string_view("t.u8"));  // file order kept
    QCOMPARE(f.architecture(), std::string_view("llama"));

    QCOMPARE(f.find("t.u8")->type(), GgufType::Uint8);
    QCOMPARE(*f.find("t.u8")->to_u64(), uint64_t{200});
    QCOMPARE(*f.find("t.i8")->to_i64(), int64_t{-5});
    QVERIFY(!f.find("t.i8")->to_u64());
    QCOMPARE(*f.get_u32("t.u16"), 60000u);
    QCOMPARE(*f.find("t.i16")->to_i64(), int64_t{-300});
    QCOMPARE(*f.get_u32("t.u32"), 4000000000u);
    QCOMPARE(*f.get_i32("t.i32"), -7);
    QCOMPARE(*f.get_f32("t.f32"), 1.5f);
    QCOMPARE(*f.get_bool("t.bool"), true);
    QCOMPARE(*f.get_string("t.string"), std::string_view("h\xc3\xa9llo"));
    QCOMPARE(*f.get_string("t.empty_string"), std::string_view());
    QCOMPARE(*f.get_u64("t.u64"), (uint64_t{1} << 63) + 5);
    QCOMPARE(*f.find("t.i64")->to_i64(), -(int64_t{1} << 40));
    QCOMPARE(*f.find("t.f64")->to_f64(), 3.25);

    const sl::GgufValue* a = f.find("t.arr_u8");
    QVERIFY(a && a->is_array());
    QCOMPARE(a->elem_type(), GgufType::Uint8);
    QCOMPARE(a->size(), uint64_t{3});
    QCOMPARE(a->raw().size(), size_t{3});
    QCOMPARE(*a->at(2).to_u64(), uint64_t{255});
    QCOMPARE(*f.get_i32_array("t.arr_i32"), (std::vector<int32_t>{-1, 0, 1 << 30}));
    QCOMPARE(*f.get_i32_array("t.arr_u8"), (std::vector<int32_t>{1, 2, 255}));
    QCOMPARE(*f.get_f32_array("t.arr_f32"), (std::vector<float>{0.25f, -2.0f}));
    QCOMPARE(*f.find("t.arr_f64")->at(0).to_f64(), 1e300);
    QCOMPARE(*f.find("t.arr_bool")->at(1).to_bool(), true);
    QCOMPARE(to_strings(*f.get_string_array("t.arr_str")),
             (std::vector<std::string>{"a", "", "ccc"}));
    QCOMPARE(f.find("t.arr_empty")->size(), uint64_t{0});
    QVERIFY(f.get_i32_array("t.arr_empty")->empty());

    const sl::GgufValue* n = f.find("t.nested");
    QCOMPARE(n->elem_type(), GgufType::Array);
    QCOMPARE(n->arrays().size(), size_t{3});
    QCOMPARE(n->arrays()[0].size(), uint64_t{2});
    QCOMPARE(*n->arrays()[0].at(1).to_u64(), uint64_t{2});
    QCOMPARE(n->arrays()[1].size(), uint64_t{0});
    QCOMPARE(*n->at(2).at(0).to_u64(), uint64_t{3});
    const sl::GgufValue* ns = f.find("t.nested_str");
    QCOMPARE(to_strings(ns->arrays()[1].strings()), (std::vector<std::string>{"y", "z"}));

    // Strings are views into the caller's bytes, not copies.
    const auto s = *f.get_string("t.string");
    QVERIFY(reinterpret_cast<const uint8_t*>(s.data()) > bytes.data());
    QVERIFY(reinterpret_cast<const uint8_t*>(s.data()) < bytes.data() + bytes.size());

    QCOMPARE(f.tensors().size(), size_t{4});
    QCOMPARE(f.alignment(), 32u);
    QCOMPARE(f.data_offset() % 32, uint64_t{0});
    const sl::GgufTensorInfo* t = f.find_tensor("token_embd.weight");
    QVERIFY(t);
    QCOMPARE(t->type, kQ8_0);
    QCOMPARE(t->dims, (std::vector<uint64_t>{64, 10}));
    QCOMPARE(t->n_elements, uint64_t{640});
    QCOMPARE(t->n_bytes, uint64_t{640 / 32 * 34});
    QCOMPARE(t->offset, uint64_t{0});
    QCOMPARE(f.find_tensor("blk.0.w")->dims, (std::vector<uint64_t>{32, 3, 2}));
    QCOMPARE(f.find_tensor("blk.0.w")->n_bytes, uint64_t{6 * 20});
    QCOMPARE(f.find_tensor("blk.0.h")->dims.size(), size_t{4});
    QCOMPARE(f.find_tensor("blk.0.h")->n_bytes, uint64_t{70 * 2});
    QVERIFY(!f.find_tensor("missing"));
    for (const auto& ti : f.tensors()) {
        QCOMPARE(ti.offset % 32, uint64_t{0});
        QCOMPARE(ti.data, bytes.data() + f.data_offset() + ti.offset);
        QCOMPARE(ti.data[0], GgufTestWriter::data_byte(ti.offset));
        QVERIFY(ti.data + ti.n_bytes <= bytes.data() + bytes.size());
    }
    QVERIFY(!f.find("no.such.key"));
    QVERIFY(!f.get_u32("no.such.key"));
}

void TstGgufReader::tensorsLandAligned_data() {
    QTest::addColumn<uint32_t>("alignment");
    for (const uint32_t a : {1u, 8u, 32u, 64u, 4096u})
        QTest::newRow(qPrintable(QString::number(a))) << a;
}

void TstGgufReader::tensorsLandAligned() {
    QFETCH(uint32_t, alignment);
    GgufTestWriter w;
    w.alignment(alignment)
        .tensor("a", kF32, {3})
        .tensor("b", kQ4_1, {32, 5})
        .tensor("c", kF16, {7});
    const Bytes bytes = w.build();
    const GgufFile f = GgufFile::parse(bytes);
    QCOMPARE(f.alignment(), alignment);
    QCOMPARE(f.data_offset() % alignment, uint64_t{0});
    for (const auto& t : f.tensors()) {
        QCOMPARE(t.offset % alignment, uint64_t{0});
        QCOMPARE(t.data, bytes.data() + f.data_offset() + t.offset);
    }
    QCOMPARE(f.find_tensor("c")->data + f.find_tensor("c")->n_bytes, bytes.data() + bytes.size());
}

void TstGgufReader::typedGetters() {
    GgufTestWriter w;
    w.kv("neg", gv::i32(-1))
        .kv("pos_i32", gv::i32(12))
        .kv("big", gv::u64(uint64_t{1} << 40))
        .kv("s", gv::str("text"))
        .kv("f64", gv::f64(0.5))
        .kv("ints", gv::array(GgufType::Uint32, {gv::u32(1), gv::u32(3000000000u)}))
        .kv("strs", gv::str_array({"q"}));
    const Bytes bytes = w.build();
    const GgufFile f = GgufFile::parse(bytes, "getters.gguf");
    QCOMPARE(*f.get_u32("pos_i32"), 12u);  // a non-negative int32 reads as uint32
    QCOMPARE(*f.get_f32("f64"), 0.5f);
    QCOMPARE(*f.get_f32("pos_i32"), 12.0f);
    QCOMPARE(*f.get_u64("big"), uint64_t{1} << 40);
    QCOMPARE(f.get_u32("absent").value_or(7u), 7u);

    const auto throws = [](auto&& fn, const char* needle) {
        try {
            fn();
        } catch (const sl::FormatError& e) {
            const QString msg = QString::fromUtf8(e.what());
            return msg.startsWith(QLatin1String("getters.gguf: ")) &&
                   msg.contains(QLatin1String(needle));
        }
        return false;
    };
    QVERIFY(throws([&] { (void)f.get_u32("neg"); }, "key 'neg' has type int32"));
    QVERIFY(throws([&] { (void)f.get_u32("big"); }, "out of the uint32 range"));
    QVERIFY(throws([&] { (void)f.get_i32("big"); }, "out of the int32 range"));
    QVERIFY(throws([&] { (void)f.get_string("pos_i32"); }, "expected string"));
    QVERIFY(throws([&] { (void)f.get_bool("s"); }, "key 's' has type string, expected bool"));
    QVERIFY(throws([&] { (void)f.get_string_array("ints"); }, "an array of uint32"));
    QVERIFY(throws([&] { (void)f.get_i32_array("ints"); }, "element 1"));
    QVERIFY(throws([&] { (void)f.get_f32_array("strs"); }, "an array of string"));
    QVERIFY(throws([&] { (void)f.get_i32_array("s"); }, "expected an array"));
    QVERIFY(throws([&] { (void)sl::arch_u32(f, "block_count"); }, "general.architecture"));
    QCOMPARE(f.architecture(), std::string_view());
}

// Arrays of count 0 of every kind parse as empty arrays, and the typed getters return empty
// vectors (their one-copy path used to hand memcpy an empty vector's null data(): UBSan).
void TstGgufReader::emptyTypedArrays() {
    GgufTestWriter w;
    w.kv("i32s", gv::array(GgufType::Int32, {}))
        .kv("f32s", gv::array(GgufType::Float32, {}))
        .kv("u8s", gv::array(GgufType::Uint8, {}))
        .kv("f64s", gv::array(GgufType::Float64, {}))
        .kv("strs", gv::str_array({}))
        .kv("nested", gv::array(GgufType::Array, {}))
        .kv("last_i32s", gv::array(GgufType::Int32, {}));  // its payload ends the header
    const Bytes bytes = w.build();
    const GgufFile f = GgufFile::parse(bytes, "empty.gguf");
    QCOMPARE(f.metadata().size(), size_t{7});
    for (const auto& kv : f.metadata()) {
        QVERIFY(kv.value.is_array());
        QCOMPARE(kv.value.size(), uint64_t{0});
    }
    for (const char* key : {"i32s", "u8s", "last_i32s"}) {
        const auto v = f.get_i32_array(key);
        QVERIFY(v.has_value());
        QVERIFY(v->empty());
    }
    for (const char* key : {"f32s", "f64s", "i32s"}) {
        const auto v = f.get_f32_array(key);
        QVERIFY(v.has_value());
        QVERIFY(v->empty());
    }
    const auto strs = f.get_string_array("strs");
    QVERIFY(strs.has_value());
    QVERIFY(strs->empty());
    QVERIFY(f.find("nested")->arrays().empty());
}

void TstGgufReader::archHelpers() {
    GgufTestWriter w;
    w.kv("general.architecture", gv::str("qwen2"))
        .kv("qwen2.block_count", gv::u32(24))
        .kv("qwen2.rope.freq_base", gv::f32(1e6f));
    const Bytes bytes = w.build();
    const GgufFile f = GgufFile::parse(bytes, "arch.gguf");
    QCOMPARE(sl::arch_key(f, "block_count"), std::string("qwen2.block_count"));
    QCOMPARE(sl::arch_u32(f, "block_count"), 24u);
    QCOMPARE(sl::arch_f32(f, "rope.freq_base"), 1e6f);
    QCOMPARE(sl::arch_u32(f, "attention.key_length", 64u), 64u);
    QCOMPARE(sl::arch_f32(f, "attention.layer_norm_rms_epsilon", 1e-5f), 1e-5f);
    try {
        (void)sl::arch_u32(f, "context_length");
        QFAIL("a missing required key did not throw");
    } catch (const sl::FormatError& e) {
        QCOMPARE(QString::fromUtf8(e.what()),
                 QStringLiteral("arch.gguf: no key 'qwen2.context_length'"));
    }
}

void TstGgufReader::openReadsAFileAndNamesItInErrors() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::filesystem::path good = dir.filePath(QStringLiteral("good.gguf")).toStdString();
    every_type_file(3).write(good);
    GgufFile f = GgufFile::open(good);
    QCOMPARE(f.name(), good.string());
    QCOMPARE(f.file_size(), uint64_t{std::filesystem::file_size(good)});
    // Moving keeps every view valid: the mapping does not move.
    const GgufFile moved = std::move(f);
    QCOMPARE(*moved.get_string("t.string"), std::string_view("h\xc3\xa9llo"));
    QCOMPARE(moved.find_tensor("output_norm.weight")->data[0],
             GgufTestWriter::data_byte(moved.find_tensor("output_norm.weight")->offset));
    QCOMPARE(reinterpret_cast<uintptr_t>(moved.tensors()[0].data) % 32, uintptr_t{0});

    const std::filesystem::path bad = dir.filePath(QStringLiteral("bad.gguf")).toStdString();
    GgufTestWriter().version(1).write(bad);
    try {
        (void)GgufFile::open(bad);
        QFAIL("a v1 file opened");
    } catch (const sl::FormatError& e) {
        QVERIFY2(
            QString::fromUtf8(e.what()).startsWith(QString::fromStdString(bad.string() + ": ")),
            e.what());
    }
    QVERIFY_THROWS_EXCEPTION(sl::IoError,
                             GgufFile::open(dir.filePath(QStringLiteral("none")).toStdString()));
    const std::filesystem::path empty = dir.filePath(QStringLiteral("empty.gguf")).toStdString();
    { std::ofstream touch(empty); }
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, GgufFile::open(empty));
}

void TstGgufReader::hostileFilesThrow_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expected");  // a part of the message
    const auto row = [](const char* name, const GgufTestWriter& w, const char* expected) {
        QTest::newRow(name) << to_qba(w.build()) << QString::fromUtf8(expected);
    };
    const auto base = [] {
        GgufTestWriter w;
        w.kv("general.architecture", gv::str("llama"));
        return w;
    };
    constexpr uint64_t kHuge = uint64_t{1} << 60;

    QTest::newRow("empty") << QByteArray() << QStringLiteral("too short");
    row("bad magic", base().magic("GGML"), "not a GGUF file (magic 'GGML'");
    row("v1", base().version(1), "version 1 is not supported");
    row("v4", base().version(4), "unsupported GGUF version 4");
    row("big-endian", base().version(0x03000000), "big-endian");
    row("huge kv count", base().kv_count_override(kHuge),
        "claims 1152921504606846976 metadata keys");
    row("huge tensor count", base().tensor_count_override(kHuge),
        "claims 1152921504606846976 tensors");
    row("kv count too big by one", base().kv_count_override(2), "truncated file: metadata key #1");
    row("unknown value type", base().kv("x", gv::raw(13, {0, 0, 0, 0})),
        "key 'x' has unknown value type 13");
    row("string too long", base().kv("x", gv::raw(8, {100, 0, 0, 0, 0, 0, 0, 0, 'a'})),
        "key 'x': string claims 100 bytes");
    row("string length 2^63", base().kv("x", gv::raw(8, {0, 0, 0, 0, 0, 0, 0, 0x80})),
        "claims 9223372036854775808 bytes");
    row("empty key", GgufTestWriter().kv("", gv::u8(0)), "metadata key #0 is empty");
    {
        Bytes arr = {4, 0, 0, 0};                                      // uint32 elements
        for (int i = 0; i < 8; ++i) arr.push_back(i == 7 ? 0x10 : 0);  // count 2^60
        row("huge array", base().kv("tokenizer.ggml.tokens", gv::raw(9, arr)),
            "key 'tokenizer.ggml.tokens' is an array of 1152921504606846976 uint32 values");
    }
    {
        Bytes arr = {8, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255};
        row("huge string array", base().kv("s", gv::raw(9, arr)),
            "array of 18446744073709551615 string");
    }
    row("unknown array type", base().kv("x", gv::raw(9, {77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})),
        "key 'x' is an array of unknown value type 77");
    {
        auto v = gv::array(GgufType::Uint8, {gv::u8(1)});
        for (int i = 0; i < 10; ++i) v = gv::array(GgufType::Array, {v});
        row("arrays nested too deep", base().kv("deep", v), "nests arrays deeper than 8");
    }
    row("truncated string element",
        base().kv("s", gv::raw(9, {8, 0, 0, 0, 2, 0, 0, 0, 0,   0,   0,   0,  // 2 strings
                                   5, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd', 'e', 5, 0, 0})),
        "truncated file: key 's' element 1: string needs 8 bytes");
    row("duplicate key", base().kv("general.architecture", gv::str("x")),
        "duplicate key 'general.architecture'");
    row("alignment zero", base().kv("general.alignment", gv::u32(0)), "is 0, not a power of two");
    row("alignment three", base().kv("general.alignment", gv::u32(3)), "is 3, not a power of two");
    row("alignment wrong type", base().kv("general.alignment", gv::u64(32)),
        "'general.alignment' has type uint64, expected uint32");
    row("unknown tensor type", base().tensor_at("w", 999, {32}, 0, 128),
        "tensor 'w' has unknown tensor type 999");
    row("type 4 (removed q4_2)", base().tensor_at("w", 4, {32}, 0, 128), "unknown tensor type 4");
    row("zero dim", base().tensor_at("w", kF32, {4, 0}, 0, 16), "dimension 1 = 0");
    row("negative dim", base().tensor_at("w", kF32, {-4}, 0, 16), "dimension 0 = -4");
    row("five dims", base().tensor_raw_dims("w", 5, {1, 1, 1, 1, 1}, kF32, 0),
        "has 5 dimensions (expected 1 to 4)");
    row("zero dims", base().tensor_raw_dims("w", 0, {}, kF32, 0), "has 0 dimensions");
    row("huge n_dims", base().tensor_raw_dims("w", 0xffffffff, {1}, kF32, 0), "has 4294967295 dim");
    row("dims product overflows",
        base().tensor_raw_dims("w", 3, {int64_t{1} << 40, int64_t{1} << 40, 1}, kF32, 0),
        "the product of its dimensions overflows");
    row("dims product over int64", base().tensor_raw_dims("w", 2, {int64_t{1} << 62, 2}, kF32, 0),
        "overflows");
    row("huge but not overflowing",
        base().tensor_raw_dims("w", 2, {int64_t{1} << 30, 1 << 20}, kF32, 0),
        "tensor 'w' extends past the end of the file (offset ");
    row("row not a block multiple", base().tensor_at("w", kQ4_1, {33, 2}, 0, 40),
        "row length 33, not a multiple of q4_1's block size 32");
    row("misaligned offset", base().tensor("a", kF32, {8}).tensor_at("w", kF32, {8}, 48, 32),
        "tensor 'w' has offset 48, not a multiple of the alignment 32");
    row("misaligned for custom alignment", base().alignment(64).tensor_at("w", kF32, {8}, 32, 32),
        "alignment 64");
    row("past the end", base().tensor_raw_dims("w", 1, {64}, kF32, 0),
        "tensor 'w' extends past the end of the file");
    row("offset near 2^64", base().tensor_raw_dims("w", 1, {8}, kF32, uint64_t{0} - 32),
        "extends past the end of the file");
    row("overlap", base().tensor_at("a", kF32, {16}, 0, 64).tensor_at("b", kF32, {16}, 32, 64),
        "tensors 'a' (bytes 0..64 of the data section) and 'b' (from byte 32) overlap");
    row("same offset", base().tensor_at("a", kF32, {8}, 0, 32).tensor_at("b", kF32, {8}, 0, 32),
        "overlap");
    // q4_1 {32} is 20 bytes; 128 bytes were written for it (its type field changed from f32).
    row("unused bytes after a tensor", base().tensor_at("a", kQ4_1, {32}, 0, 128).tensor_at("b", kF32, {8}, 128, 32),
        "tensor 'a' (20 bytes by its type and shape) is followed by 108 unused bytes before 'b'");
    row("duplicate tensor", base().tensor("w", kF32, {8}).tensor("w", kF32, {8}),
        "duplicate tensor 'w'");
    row("empty tensor name", base().tensor("", kF32, {8}), "tensor #0 has an empty name");
    row("tensor count too big by one", base().tensor("w", kF32, {8}).tensor_count_override(2),
        "tensor #1");
}

void TstGgufReader::hostileFilesThrow() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    const Bytes b(bytes.begin(), bytes.end());
    const QString msg = parse_error(b);
    QVERIFY2(!msg.isEmpty(), "the file parsed");
    QVERIFY2(msg.startsWith(QLatin1String("hostile.gguf: ")), qPrintable(msg));
    QVERIFY2(msg.contains(expected), qPrintable(msg));
}

void TstGgufReader::truncatedAtEveryOffsetThrows() {
    const Bytes full = every_type_file(3).build();
    QVERIFY(parse_error(full).isEmpty());
    for (size_t n = 0; n < full.size(); ++n) {
        const Bytes prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));  // exact size
        const QString msg = parse_error(prefix);
        QVERIFY2(!msg.isEmpty(), qPrintable(QStringLiteral("a prefix of %1 bytes parsed").arg(n)));
    }
}

void TstGgufReader::corruptedBytesNeverCrash() {
    // Each header byte set to values that break lengths, counts and types: the reader either
    // accepts the file or throws FormatError, never anything else.
    const Bytes full = every_type_file(3).build();
    const GgufFile f = GgufFile::parse(full);
    int accepted = 0, rejected = 0;
    for (size_t i = 0; i < f.data_offset(); ++i) {
        for (const uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff},
                                static_cast<uint8_t>(full[i] + 1)}) {
            Bytes b = full;
            b[i] = v;
            try {
                GgufFile::parse(b);
                ++accepted;
            } catch (const sl::FormatError&) {
                ++rejected;
            }
        }
    }
    QVERIFY(rejected > 0);
    QVERIFY(accepted > 0);
}

void TstGgufReader::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_gguf: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir>
    // tst_gguf_reader
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    every_type_file(3).write(out / "every_type_v3.gguf");
    every_type_file(2).write(out / "every_type_v2.gguf");
    GgufTestWriter w;
    w.kv("general.architecture", gv::str("llama"))
        .kv("llama.block_count", gv::u32(1))
        .kv("tokenizer.ggml.tokens", gv::str_array({"<s>", "a", "b", "ab"}))
        .kv("tokenizer.ggml.token_type",
            gv::array(GgufType::Int32, {gv::i32(3), gv::i32(1), gv::i32(1), gv::i32(1)}))
        .kv("tokenizer.chat_template", gv::str("<|im_start|>"))
        .alignment(64)
        .tensor("token_embd.weight", kQ4_1, {32, 4})
        .tensor("output_norm.weight", kF32, {32});
    w.write(out / "llama_like.gguf");
    GgufTestWriter().kv("general.architecture", gv::str("x")).write(out / "metadata_only.gguf");
}

QTEST_APPLESS_MAIN(TstGgufReader)
#include "tst_gguf_reader.moc"
