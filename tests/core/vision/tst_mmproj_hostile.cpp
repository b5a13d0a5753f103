// Hostile and broken mmproj files: every one is refused with a FormatError / IoError whose message
// starts with the file's path and names what is wrong; none crashes or allocates absurdly.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "core/util/error.h"
#include "core/vision/vision_model.h"
#include "tests/core/vision/vision_test_util.h"

namespace {

// Loads `path`; returns the error message, or "" when it loaded.
QString load_error(const QString& path) {
    try {
        sl::load_mmproj(path.toStdString());
    } catch (const sl::Error& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

}  // namespace

class TstMmprojHostile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void validLoads();
    void refused_data();
    void refused();
    void truncated();
    void notAnMmproj();
    void widthMismatch();
};

void TstMmprojHostile::validLoads() {
    QTemporaryDir dir;
    const QString p = dir.filePath(QStringLiteral("ok.gguf"));
    QVERIFY(sl::test::make_mmproj(p, {QStringLiteral("--longest-edge"), QStringLiteral("96")}));
    const auto vm = sl::load_mmproj(p.toStdString());
    const sl::VisionConfig& c = vm->model.config;
    QCOMPARE(c.image_size, 32);
    QCOMPARE(c.patch_size, 4);
    QCOMPARE(c.n_embd, 48);
    QCOMPARE(c.n_layer, 2);
    QCOMPARE(c.scale_factor, 2);
    QCOMPARE(c.n_embd_out, 64);
    QCOMPARE(c.longest_edge, 96);
    QCOMPARE(c.mean[1], 0.45f);
    QCOMPARE(c.std[2], 0.6f);
    QCOMPARE(vm->model.weights.layers.size(), size_t{2});
    QCOMPARE(vm->model.weights.pos_embd.size(), size_t{64 * 48});

    // Gemma 3: no scale_factor key in the file (as real ones) means a 4 x 4 pool; a tiling key is
    // ignored (Gemma 3 takes one tile per image).
    const QString g = dir.filePath(QStringLiteral("gemma3.gguf"));
    QVERIFY(sl::test::make_mmproj(g, {QStringLiteral("--family"), QStringLiteral("gemma3"), QStringLiteral("--scale"), QStringLiteral("4"),
                                      QStringLiteral("--set-u32"), QStringLiteral("clip.vision.preproc_image_size=64")}));
    const auto gm = sl::load_mmproj(g.toStdString());
    const sl::VisionConfig& gc = gm->model.config;
    QVERIFY(gc.gemma3());
    QCOMPARE(gc.scale_factor, 4);
    QCOMPARE(gc.tokens_per_tile(), 4);  // 8 x 8 patches pooled 4 x 4
    QCOMPARE(gc.merged_width(), 48);
    QCOMPARE(gc.n_embd_out, 64);
    QCOMPARE(gc.longest_edge, 0);
    QCOMPARE(gm->model.weights.proj.ne0, int64_t{48});
    QCOMPARE(gm->model.weights.proj.ne1, int64_t{64});
    QCOMPARE(gm->model.weights.soft_norm.size(), size_t{48});
    QVERIFY(sl::describe(gc).find("4 x 4 average pool -> 4 tokens per image of width 64") != std::string::npos);
}

void TstMmprojHostile::refused_data() {
    QTest::addColumn<QStringList>("gen_args");
    QTest::addColumn<QString>("message");
    const auto L = [](const char* s) { return QString::fromLatin1(s); };
    QTest::newRow("missing tensor") << QStringList{L("--drop"), L("v.blk.1.attn_k.bias")} << L("tensor 'v.blk.1.attn_k.bias' is missing");
    QTest::newRow("missing projector") << QStringList{L("--drop"), L("mm.model.fc.weight")} << L("'mm.model.fc.weight' is missing");
    QTest::newRow("wrong position shape") << QStringList{L("--bad-shape"), L("v.position_embd.weight")}
                                          << L("'v.position_embd.weight' has shape {48, 65}, expected {48, 64}");
    QTest::newRow("wrong ffn shape") << QStringList{L("--bad-shape"), L("v.blk.0.ffn_up.weight")} << L("'v.blk.0.ffn_up.weight' has shape {48, 81}");
    QTest::newRow("wrong patch kernel") << QStringList{L("--bad-shape"), L("v.patch_embd.weight")} << L("'v.patch_embd.weight' has shape");
    QTest::newRow("projector vs projection_dim") << QStringList{L("--bad-shape"), L("mm.model.fc.weight")} << L("projection_dim = 64");
    QTest::newRow("absurd image size") << QStringList{L("--set-u32"), L("clip.vision.image_size=1000000")} << L("'clip.vision.image_size' = 1000000 is outside");
    QTest::newRow("absurd width") << QStringList{L("--set-u32"), L("clip.vision.embedding_length=4000000000")} << L("'clip.vision.embedding_length' = 4000000000");
    QTest::newRow("absurd layer count") << QStringList{L("--set-u32"), L("clip.vision.block_count=100000")} << L("block_count");
    QTest::newRow("more layers than tensors") << QStringList{L("--set-u32"), L("clip.vision.block_count=3")} << L("tensor 'v.blk.2.ln1.weight' is missing");
    QTest::newRow("patch does not divide") << QStringList{L("--set-u32"), L("clip.vision.patch_size=5")} << L("not a multiple of patch_size");
    QTest::newRow("heads do not divide") << QStringList{L("--set-u32"), L("clip.vision.attention.head_count=5")} << L("not a multiple of head_count");
    QTest::newRow("shuffle does not divide") << QStringList{L("--set-u32"), L("clip.vision.projector.scale_factor=3")} << L("projector.scale_factor 3");
    QTest::newRow("zero patch") << QStringList{L("--set-u32"), L("clip.vision.patch_size=0")} << L("'clip.vision.patch_size' = 0");
    QTest::newRow("missing key") << QStringList{L("--drop-key"), L("clip.vision.block_count")} << L("'clip.vision.block_count' is missing");
    QTest::newRow("missing mean") << QStringList{L("--drop-key"), L("clip.vision.image_mean")} << L("'clip.vision.image_mean' is missing");
    QTest::newRow("missing eps") << QStringList{L("--drop-key"), L("clip.vision.attention.layer_norm_epsilon")} << L("layer_norm_epsilon' is missing");
    QTest::newRow("other projector") << QStringList{L("--projector-type"), L("mlp")} << L("projector type 'mlp' is not supported");
    QTest::newRow("no projector type") << QStringList{L("--drop-key"), L("clip.projector_type")} << L("'clip.projector_type' is missing");
    QTest::newRow("NaN weight") << QStringList{L("--nan"), L("v.blk.0.ln2.bias")} << L("'v.blk.0.ln2.bias' holds a non-finite value");
    // Gemma 3's projector.
    QTest::newRow("gemma3 missing norm") << QStringList{L("--family"), L("gemma3"), L("--drop"), L("mm.soft_emb_norm.weight")}
                                         << L("'mm.soft_emb_norm.weight' is missing");
    QTest::newRow("gemma3 missing projection") << QStringList{L("--family"), L("gemma3"), L("--drop"), L("mm.input_projection.weight")}
                                               << L("'mm.input_projection.weight' is missing");
    QTest::newRow("gemma3 projection shape") << QStringList{L("--family"), L("gemma3"), L("--bad-shape"), L("mm.input_projection.weight")}
                                             << L("'mm.input_projection.weight' has shape {64, 49}, expected {LM width, 48}");
    QTest::newRow("gemma3 NaN projection") << QStringList{L("--family"), L("gemma3"), L("--nan"), L("mm.input_projection.weight")}
                                           << L("'mm.input_projection.weight' holds a non-finite value");
    QTest::newRow("gemma3 pool does not divide") << QStringList{L("--family"), L("gemma3"), L("--scale"), L("3")}
                                                 << L("not a multiple of projector.scale_factor 3 (gemma3's pool side)");
}

void TstMmprojHostile::refused() {
    QFETCH(QStringList, gen_args);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString p = dir.filePath(QStringLiteral("bad.gguf"));
    QVERIFY(sl::test::make_mmproj(p, gen_args));
    const QString err = load_error(p);
    QVERIFY2(err.startsWith(p + QStringLiteral(": ")), qPrintable(QStringLiteral("message does not start with the path: ") + err));
    QVERIFY2(err.contains(message), qPrintable(err));
}

void TstMmprojHostile::truncated() {
    QTemporaryDir dir;
    const QString ok = dir.filePath(QStringLiteral("ok.gguf"));
    QVERIFY(sl::test::make_mmproj(ok, {}));
    QFile f(ok);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray all = f.readAll();
    // Cut in the header, in the metadata, in the tensor table and in the data section.
    for (const qint64 len : {qint64{0}, qint64{3}, qint64{23}, qint64{200}, all.size() / 3, all.size() / 2, all.size() - 1}) {
        const QString p = dir.filePath(QStringLiteral("cut_%1.gguf").arg(len));
        QFile o(p);
        QVERIFY(o.open(QIODevice::WriteOnly));
        o.write(all.constData(), len);
        o.close();
        const QString err = load_error(p);
        QVERIFY2(!err.isEmpty(), qPrintable(QStringLiteral("a file cut at %1 bytes loaded").arg(len)));
        QVERIFY2(err.startsWith(p), qPrintable(err));
    }
    QVERIFY(load_error(dir.filePath(QStringLiteral("absent.gguf"))).contains(QStringLiteral("absent.gguf")));
}

void TstMmprojHostile::notAnMmproj() {
    // A language model (arch llama) given as the mmproj.
    QTemporaryDir dir;
    const QString p = dir.filePath(QStringLiteral("lm.gguf"));
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), p}, nullptr));
    const QString err = load_error(p);
    QVERIFY2(err.contains(QStringLiteral("not an mmproj file: general.architecture is 'llama'")), qPrintable(err));
}

void TstMmprojHostile::widthMismatch() {
    sl::VisionConfig c;
    c.n_embd_out = 64;
    sl::check_vision_fits_lm(c, 64, "m.gguf");
    try {
        sl::check_vision_fits_lm(c, 576, "m.gguf");
        QFAIL("accepted");
    } catch (const sl::FormatError& e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("width 64 but the language model's width is 576")), e.what());
    }
}

QTEST_GUILESS_MAIN(TstMmprojHostile)
#include "tst_mmproj_hostile.moc"
