// The GGUF reader on the real default model (SmolLM2-135M-Instruct Q4_1): hyperparameters,
// tokenizer arrays, tensor shapes and extents as llama.cpp's gguf-py reports them.
#include <QElapsedTimer>
#include <QTest>

#include <map>

#include "core/gguf/gguf_reader.h"
#include "core/util/assets.h"
#include "kernels/cpu/tensor_types.h"
#include "tests/common/test_support.h"

class TstGgufModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void hyperparameters();
    void tokenizer();
    void tensorShapes_data();
    void tensorShapes();
    void everyTensorInsideTheFile();
};

void TstGgufModel::hyperparameters() {
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    QElapsedTimer timer;
    timer.start();
    const sl::GgufFile f = sl::GgufFile::open(path);
    qInfo("opened and parsed in %lld ms", static_cast<long long>(timer.elapsed()));
    QCOMPARE(f.version(), 3u);
    QCOMPARE(f.architecture(), std::string_view("llama"));
    QCOMPARE(f.alignment(), 32u);
    QCOMPARE(f.data_offset(), uint64_t{1785664});
    QCOMPARE(f.metadata().size(), size_t{33});
    QCOMPARE(sl::arch_u32(f, "block_count"), 30u);
    QCOMPARE(sl::arch_u32(f, "embedding_length"), 576u);
    QCOMPARE(sl::arch_u32(f, "feed_forward_length"), 1536u);
    QCOMPARE(sl::arch_u32(f, "context_length"), 8192u);
    QCOMPARE(sl::arch_u32(f, "attention.head_count"), 9u);
    QCOMPARE(sl::arch_u32(f, "attention.head_count_kv"), 3u);
    QCOMPARE(sl::arch_u32(f, "rope.dimension_count"), 64u);
    QCOMPARE(sl::arch_u32(f, "attention.key_length", 576u / 9u), 64u);
    QCOMPARE(sl::arch_f32(f, "rope.freq_base"), 100000.0f);
    QCOMPARE(sl::arch_f32(f, "attention.layer_norm_rms_epsilon"), 1e-5f);
    QCOMPARE(*f.get_string("general.name"), std::string_view("Smollm2 135M 8k Lc100K Mix1 Ep2"));
}

void TstGgufModel::tokenizer() {
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    const sl::GgufFile f = sl::GgufFile::open(path);
    QCOMPARE(*f.get_string("tokenizer.ggml.model"), std::string_view("gpt2"));
    QCOMPARE(*f.get_string("tokenizer.ggml.pre"), std::string_view("smollm"));
    const auto tokens = *f.get_string_array("tokenizer.ggml.tokens");
    QCOMPARE(tokens.size(), size_t{49152});
    QCOMPARE(tokens[0], std::string_view("<|endoftext|>"));
    QCOMPARE(tokens[1], std::string_view("<|im_start|>"));
    QCOMPARE(tokens[2], std::string_view("<|im_end|>"));
    const auto merges = *f.get_string_array("tokenizer.ggml.merges");
    QCOMPARE(merges.size(), size_t{48900});
    QCOMPARE(merges[0], std::string_view("\xc4\xa0 t"));  // "Ġ t"
    QCOMPARE(f.get_i32_array("tokenizer.ggml.token_type")->size(), size_t{49152});
    QCOMPARE(*f.get_u32("tokenizer.ggml.bos_token_id"), 1u);
    QCOMPARE(*f.get_u32("tokenizer.ggml.eos_token_id"), 2u);
    QCOMPARE(*f.get_bool("tokenizer.ggml.add_bos_token"), false);
    QVERIFY(f.get_string("tokenizer.chat_template")->find("<|im_start|>") !=
            std::string_view::npos);
}

void TstGgufModel::tensorShapes_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("type");
    QTest::addColumn<QList<quint64>>("dims");
    const auto row = [](const char* tag, const char* name, const char* type, QList<quint64> dims) {
        QTest::newRow(tag) << QString::fromLatin1(name) << QString::fromLatin1(type) << dims;
    };
    row("token_embd", "token_embd.weight", "q8_0", {576, 49152});
    row("output_norm", "output_norm.weight", "f32", {576});
    row("attn_norm", "blk.0.attn_norm.weight", "f32", {576});
    row("attn_q", "blk.0.attn_q.weight", "q4_1", {576, 576});
    row("attn_k", "blk.17.attn_k.weight", "q4_1", {576, 192});
    row("attn_v", "blk.29.attn_v.weight", "q4_1", {576, 192});
    row("attn_output", "blk.3.attn_output.weight", "q4_1", {576, 576});
    row("ffn_gate", "blk.0.ffn_gate.weight", "q4_1", {576, 1536});
    row("ffn_up", "blk.0.ffn_up.weight", "q4_1", {576, 1536});
    row("ffn_down", "blk.0.ffn_down.weight", "q4_1", {1536, 576});
    row("ffn_norm", "blk.29.ffn_norm.weight", "f32", {576});
}

void TstGgufModel::tensorShapes() {
    QFETCH(QString, name);
    QFETCH(QString, type);
    QFETCH(QList<quint64>, dims);
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    const sl::GgufFile f = sl::GgufFile::open(path);
    const sl::GgufTensorInfo* t = f.find_tensor(name.toStdString());
    QVERIFY2(t, qPrintable(name));
    QCOMPARE(QString::fromLatin1(sl::kernels::tensor_type_info(t->type).name), type);
    QCOMPARE(QList<quint64>(t->dims.begin(), t->dims.end()), dims);
}

void TstGgufModel::everyTensorInsideTheFile() {
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    const sl::GgufFile f = sl::GgufFile::open(path);
    QCOMPARE(f.tensors().size(), size_t{272});
    QVERIFY(!f.find_tensor("output.weight"));  // tied to token_embd
    std::map<std::string, int> by_type;
    const uint8_t* begin = f.bytes().data();
    const uint8_t* end = begin + f.file_size();
    for (const auto& t : f.tensors()) {
        ++by_type[sl::kernels::tensor_type_info(t.type).name];
        QVERIFY(t.data >= begin + f.data_offset());
        QVERIFY(t.data + t.n_bytes <= end);
        QCOMPARE(reinterpret_cast<uintptr_t>(t.data) % f.alignment(), uintptr_t{0});
    }
    QCOMPARE(by_type["q4_1"], 210);
    QCOMPARE(by_type["f32"], 61);
    QCOMPARE(by_type["q8_0"], 1);
    for (int layer = 0; layer < 30; ++layer) {
        for (const char* part : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}) {
            const std::string name = "blk." + std::to_string(layer) + "." + part + ".weight";
            QVERIFY2(f.find_tensor(name), name.c_str());
        }
    }
}

QTEST_APPLESS_MAIN(TstGgufModel)
#include "tst_gguf_model.moc"
