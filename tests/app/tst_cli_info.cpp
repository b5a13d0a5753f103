// `sightline-cli info` on the real default model: the hyperparameters, tokenizer, tensor types and
// chat template family, as text and as JSON; and clear errors for missing or non-GGUF files.
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

#include "core/util/assets.h"
#include "tests/common/test_support.h"

class TstCliInfo : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void textReport_data();
    void textReport();
    void jsonReport();
    void badFilesFail();
    void gemma3RunsOnTheCpu();
    void minimaxM3Described();
};

namespace {

QByteArray run(const QStringList& args, int* status) {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(60000)) return {};
    *status = p.exitCode();
    return p.readAllStandardOutput() + p.readAllStandardError();
}

QString model_arg(const std::filesystem::path& p) {
    return QString::fromStdString(p.string());
}

}  // namespace

void TstCliInfo::textReport_data() {
    QTest::addColumn<QByteArray>("label");
    QTest::addColumn<QByteArray>("value");
    const auto row = [](const char* label, const char* value) {
        QTest::newRow(label) << QByteArray(label) << QByteArray(value);
    };
    row("architecture", "llama");
    row("name", "Smollm2 135M 8k Lc100K Mix1 Ep2");
    row("GGUF version", "3");
    row("layers", "30");
    row("heads", "9");
    row("KV heads", "3");
    row("head dim", "64");
    row("embedding", "576");
    row("FFN", "1536");
    row("context", "8192");
    row("rope base", "100000");
    row("rope scaling", "none");
    row("vocab size", "49152");
    row("tokenizer", "gpt2 (pre-tokenizer smollm)");
    row("chat template", "ChatML");
    row("tensors", "272 (q4_1: 210, f32: 61, q8_0: 1)");
    row("file size", "93.8 MiB (98362432 bytes)");
    row("alignment", "32 (data at byte 1785664)");
    row("supported", "yes");
}

void TstCliInfo::textReport() {
    QFETCH(QByteArray, label);
    QFETCH(QByteArray, value);
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    int status = -1;
    const QByteArray out = run({QStringLiteral("info"), model_arg(model)}, &status);
    QVERIFY2(status == 0, out.constData());
    QByteArray found;
    for (const QByteArray& line : out.split('\n')) {
        if (line.startsWith(label + "  ") || line.startsWith(label + ' '))
            found = line.mid(label.size()).trimmed();
    }
    QVERIFY2(found == value, qPrintable(QStringLiteral("%1: got '%2' in:\n%3")
                                            .arg(QString::fromUtf8(label), QString::fromUtf8(found),
                                                 QString::fromUtf8(out))));
}

void TstCliInfo::jsonReport() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    int status = -1;
    const QByteArray out =
        run({QStringLiteral("info"), QStringLiteral("--json"), model_arg(model)}, &status);
    QCOMPARE(status, 0);
    QJsonParseError error{};
    const QJsonObject o = QJsonDocument::fromJson(out, &error).object();
    QVERIFY2(error.error == QJsonParseError::NoError, out.constData());
    QCOMPARE(o.value(QStringLiteral("architecture")).toString(), QStringLiteral("llama"));
    QCOMPARE(o.value(QStringLiteral("layers")).toInt(), 30);
    QCOMPARE(o.value(QStringLiteral("heads")).toInt(), 9);
    QCOMPARE(o.value(QStringLiteral("kv_heads")).toInt(), 3);
    QCOMPARE(o.value(QStringLiteral("embedding_length")).toInt(), 576);
    QCOMPARE(o.value(QStringLiteral("vocab_size")).toInt(), 49152);
    QCOMPARE(o.value(QStringLiteral("chat_template")).toString(), QStringLiteral("ChatML"));
    QCOMPARE(o.value(QStringLiteral("tensor_count")).toInt(), 272);
    const QJsonObject types = o.value(QStringLiteral("tensor_types")).toObject();
    QCOMPARE(types.value(QStringLiteral("q4_1")).toInt(), 210);
    QCOMPARE(types.value(QStringLiteral("q8_0")).toInt(), 1);
    QCOMPARE(o.value(QStringLiteral("file_size")).toDouble(), 98362432.0);
}

void TstCliInfo::badFilesFail() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    int status = -1;
    const QString missing = dir.filePath(QStringLiteral("missing.gguf"));
    QByteArray out = run({QStringLiteral("info"), missing}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(out.contains(missing.toUtf8() + ": cannot open"), out.constData());

    const QString not_gguf = dir.filePath(QStringLiteral("not.gguf"));
    std::ofstream(not_gguf.toStdString()) << "PK\x03\x04 not a model";
    out = run({QStringLiteral("info"), not_gguf}, &status);
    QCOMPARE(status, 1);
    QVERIFY2(out.contains(not_gguf.toUtf8() + ": not a GGUF file (magic 'PK\\x03\\x04'"),
             out.constData());

    out = run({QStringLiteral("info"), QStringLiteral("--bogus")}, &status);
    QCOMPARE(status, 2);
    QVERIFY(out.contains("usage: sightline-cli info"));
}

// Gemma 3 loads, and says where it runs (the CUDA kernels lack its pieces).
void TstCliInfo::gemma3RunsOnTheCpu() {
    REQUIRE_ASSET(model, sl::assets::kGemma3Model);
    int status = -1;
    const QByteArray out = run({QStringLiteral("info"), model_arg(model)}, &status);
    QVERIFY2(status == 0, out.constData());
    QVERIFY2(out.contains("architecture   gemma3"), out.constData());
    QVERIFY2(out.contains("supported      yes, on the CPU only (the CUDA kernels lack gemma3's norms, GELU and sliding window)"),
             out.constData());
}

// A tiny MiniMax-M3 (written by the reference generator): its experts, active parameters, indexer
// and memory, as text and JSON.
void TstCliInfo::minimaxM3Described() {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QTemporaryDir dir;
    const QString model = dir.filePath(QStringLiteral("m3.gguf"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), model,
                                       QStringLiteral("--arch"), QStringLiteral("minimax-m3"), QStringLiteral("--n-layers"),
                                       QStringLiteral("3"), QStringLiteral("--experts"), QStringLiteral("8"),
                                       QStringLiteral("--experts-used"), QStringLiteral("2")},
                                  nullptr));
    int status = -1;
    const QByteArray out = run({QStringLiteral("info"), model}, &status);
    QVERIFY2(status == 0, out.constData());
    QVERIFY2(out.contains("architecture   minimax-m3"), out.constData());
    QVERIFY2(out.contains("experts        8 routed, 2 per token, 1 shared; FFN 96 each; sigmoid router, weights renormalised x2.5; layers 1-2 (2)"),
             out.constData());
    QVERIFY2(out.contains("indexer        native MSA: 2 index heads x 16, top 4 blocks of 16 tokens, layers 1-2"), out.constData());
    // 2 MoE layers x 6 unused experts x 3 matrices of 64 x 96 are not active per token.
    const QList<QByteArray> lines = out.split('\n');
    QByteArray params;
    for (const QByteArray& l : lines)
        if (l.startsWith("parameters")) params = l;
    QVERIFY2(params.contains(" active per token"), out.constData());
    const QList<QByteArray> nums = params.mid(15).split(',');
    const long long total = nums[0].trimmed().toLongLong();
    const long long active = nums[1].trimmed().split(' ')[0].toLongLong();
    QCOMPARE(total - active, 2LL * 6 * 3 * 64 * 96);
    QVERIFY2(out.contains("supported      yes, on the CPU only (the CUDA kernels lack mixture-of-experts layers and the swiglu_oai FFN)"),
             out.constData());
    QVERIFY2(out.contains("memory         weights ") && out.contains("(experts read on demand)"), out.constData());
    QVERIFY2(out.contains("visuals        MiniMax-M3's vision tower is not in this file (no v.* tensors); text-only model"), out.constData());
    const QByteArray json = run({QStringLiteral("info"), QStringLiteral("--json"), model}, &status);
    QCOMPARE(status, 0);
    const QJsonObject o = QJsonDocument::fromJson(json).object();
    QVERIFY2(o.value(QStringLiteral("experts")).toString().startsWith(QStringLiteral("8 routed")), json.constData());
    QVERIFY(o.value(QStringLiteral("indexer")).toString().contains(QStringLiteral("native MSA")));
}

QTEST_GUILESS_MAIN(TstCliInfo)
#include "tst_cli_info.moc"
