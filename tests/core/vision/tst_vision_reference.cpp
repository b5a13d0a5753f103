// The vision encoder against the independent numpy reference (tests/reference/vision): tiny
// random-weight Idefics3 mmproj files in f32, f16 and q8_0, odd shapes, one normalized tile and
// whole images (tile plan, resampling, normalization, every tile), by normalized error.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <random>
#include <vector>

#include "core/runtime/thread_pool.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"
#include "tests/core/vision/vision_test_util.h"

namespace {

QJsonObject last_json(const QByteArray& out) {
    QJsonObject o;
    for (const QByteArray& line : out.split('\n'))
        if (line.startsWith('{')) o = QJsonDocument::fromJson(line).object();
    return o;
}

QString seed_arg() { return QString::number(static_cast<unsigned>(sl::test::rng()() % 100000)); }

}  // namespace

class TstVisionReference : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void tileMatchesReference_data();
    void tileMatchesReference();
    void imageMatchesReference_data();
    void imageMatchesReference();
    void pixelShuffleOrder();
    void averagePoolOrder();
};

void TstVisionReference::tileMatchesReference_data() {
    QTest::addColumn<QStringList>("gen_args");
    QTest::addColumn<double>("tolerance");
    QTest::addColumn<bool>("gemm_attention");
    QTest::newRow("f32") << QStringList{QStringLiteral("--wtype"), QStringLiteral("f32")} << 1e-5 << true;
    QTest::newRow("f32 row attention") << QStringList{QStringLiteral("--wtype"), QStringLiteral("f32")} << 1e-5 << false;
    QTest::newRow("f16") << QStringList{QStringLiteral("--wtype"), QStringLiteral("f16")} << 1e-5 << true;
    // Odd shapes: 30 px tiles of 5 px patches (grid 6), shuffle 3, 5 heads of 8, FFN 72, 3 layers.
    QTest::newRow("f32 odd shapes") << QStringList{QStringLiteral("--image-size"), QStringLiteral("30"), QStringLiteral("--patch-size"), QStringLiteral("5"),
                                                   QStringLiteral("--scale"), QStringLiteral("3"), QStringLiteral("--embd"), QStringLiteral("40"),
                                                   QStringLiteral("--heads"), QStringLiteral("5"), QStringLiteral("--ffn"), QStringLiteral("72"),
                                                   QStringLiteral("--layers"), QStringLiteral("3"), QStringLiteral("--out-embd"), QStringLiteral("24")}
                                    << 1e-5 << true;
    // 1,024 patches per tile: many query blocks and long softmax rows.
    QTest::newRow("f32 1024 patches") << QStringList{QStringLiteral("--image-size"), QStringLiteral("64"), QStringLiteral("--patch-size"), QStringLiteral("2"),
                                                     QStringLiteral("--scale"), QStringLiteral("4"), QStringLiteral("--embd"), QStringLiteral("32"),
                                                     QStringLiteral("--heads"), QStringLiteral("2"), QStringLiteral("--ffn"), QStringLiteral("48"),
                                                     QStringLiteral("--layers"), QStringLiteral("1")}
                                      << 1e-5 << true;
    // Older converters' swapped ffn_up / ffn_down names.
    QTest::newRow("f16 legacy ffn names") << QStringList{QStringLiteral("--wtype"), QStringLiteral("f16"), QStringLiteral("--legacy-ffn-names")} << 1e-5 << true;
    QTest::newRow("f16 no shuffle") << QStringList{QStringLiteral("--wtype"), QStringLiteral("f16"), QStringLiteral("--scale"), QStringLiteral("1")} << 1e-5 << true;
    // Q8_0 matrices quantize the activations to 8 bits (as llama.cpp does): looser.
    QTest::newRow("q8_0") << QStringList{QStringLiteral("--wtype"), QStringLiteral("q8_0"), QStringLiteral("--embd"), QStringLiteral("64"),
                                         QStringLiteral("--heads"), QStringLiteral("4"), QStringLiteral("--ffn"), QStringLiteral("96")}
                          << 3e-2 << true;
    // Gemma 3's projector: average pool, RMS norm, the transposed input projection.
    const QString g3 = QStringLiteral("gemma3");
    QTest::newRow("gemma3 f32 pool 2") << QStringList{QStringLiteral("--family"), g3} << 1e-5 << true;
    QTest::newRow("gemma3 f16 pool 4 (no key)") << QStringList{QStringLiteral("--family"), g3, QStringLiteral("--wtype"), QStringLiteral("f16"),
                                                              QStringLiteral("--scale"), QStringLiteral("4")}
                                                << 1e-5 << true;
    QTest::newRow("gemma3 odd shapes pool 3") << QStringList{QStringLiteral("--family"), g3, QStringLiteral("--image-size"), QStringLiteral("30"),
                                                            QStringLiteral("--patch-size"), QStringLiteral("5"), QStringLiteral("--scale"), QStringLiteral("3"),
                                                            QStringLiteral("--embd"), QStringLiteral("40"), QStringLiteral("--heads"), QStringLiteral("5"),
                                                            QStringLiteral("--ffn"), QStringLiteral("72"), QStringLiteral("--layers"), QStringLiteral("3"),
                                                            QStringLiteral("--out-embd"), QStringLiteral("24")}
                                              << 1e-5 << false;
    // 1,024 patches pooled 4 x 4 into 64 tokens (the real model: 4,096 into 256).
    QTest::newRow("gemma3 1024 patches") << QStringList{QStringLiteral("--family"), g3, QStringLiteral("--image-size"), QStringLiteral("64"),
                                                       QStringLiteral("--patch-size"), QStringLiteral("2"), QStringLiteral("--scale"), QStringLiteral("4"),
                                                       QStringLiteral("--embd"), QStringLiteral("32"), QStringLiteral("--heads"), QStringLiteral("2"),
                                                       QStringLiteral("--ffn"), QStringLiteral("48"), QStringLiteral("--layers"), QStringLiteral("1")}
                                         << 1e-5 << true;
    QTest::newRow("gemma3 q8_0") << QStringList{QStringLiteral("--family"), g3, QStringLiteral("--wtype"), QStringLiteral("q8_0"),
                                               QStringLiteral("--embd"), QStringLiteral("64"), QStringLiteral("--heads"), QStringLiteral("4"),
                                               QStringLiteral("--ffn"), QStringLiteral("96")}
                                 << 3e-2 << true;
}

void TstVisionReference::tileMatchesReference() {
    QFETCH(QStringList, gen_args);
    QFETCH(double, tolerance);
    QFETCH(bool, gemm_attention);
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QTemporaryDir dir;
    const QString mmproj = dir.filePath(QStringLiteral("mmproj.gguf"));
    QVERIFY(sl::test::make_mmproj(mmproj, QStringList{QStringLiteral("--seed"), seed_arg()} + gen_args));
    const auto vm = sl::load_mmproj(mmproj.toStdString());
    const sl::VisionConfig& c = vm->model.config;

    const std::vector<float> tile = sl::test::random_floats(3 * static_cast<size_t>(c.image_size) * static_cast<size_t>(c.image_size), -1.5f, 1.5f);
    const QString tile_path = dir.filePath(QStringLiteral("tile.f32")), out = dir.filePath(QStringLiteral("emb.f32"));
    QVERIFY(sl::test::write_floats(tile_path, tile.data(), tile.size() * sizeof(float)));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("vision/vision_ref.py")), mmproj, QStringLiteral("--tile"), tile_path,
                                       QStringLiteral("--out"), out}, nullptr));
    const std::vector<float> want = sl::test::read_floats(out);

    sl::ThreadPool pool(2);
    sl::VisionEncoderOptions options;
    options.gemm_attention = gemm_attention;
    sl::VisionEncoder enc(vm->model, pool, options);
    std::vector<float> got(static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.n_embd_out));
    enc.encode_tile(tile.data(), got.data());
    QCOMPARE(got.size(), want.size());
    const double err = sl::test::normalized_error(got.data(), want.data(), got.size());
    qInfo("%s: %d tokens x %d, normalized error %.2e", qPrintable(sl::describe(c).c_str()), c.tokens_per_tile(), c.n_embd_out, err);
    QVERIFY2(err < tolerance, qPrintable(QStringLiteral("normalized error %1 >= %2").arg(err).arg(tolerance)));
    // Encoding is deterministic and reuses its scratch: a second run is bitwise the same.
    std::vector<float> again(got.size());
    enc.encode_tile(tile.data(), again.data());
    QVERIFY(again == got);
}

void TstVisionReference::imageMatchesReference_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("longest_edge");
    QTest::addColumn<int>("tiles");
    QTest::addColumn<QString>("family");
    const QString id3 = QStringLiteral("idefics3"), g3 = QStringLiteral("gemma3");
    QTest::newRow("landscape, tiled 3x3 + global") << 70 << 50 << 96 << 10 << id3;
    QTest::newRow("portrait, tiled 3x2 + global") << 41 << 90 << 96 << 7 << id3;
    QTest::newRow("downscaled, one tile") << 157 << 61 << 0 << 1 << id3;
    QTest::newRow("upscaled, one tile") << 11 << 19 << 0 << 1 << id3;
    // Gemma 3 never tiles: a longest edge asked for is ignored.
    QTest::newRow("gemma3 landscape, one tile") << 70 << 50 << 96 << 1 << g3;
    QTest::newRow("gemma3 portrait, one tile") << 23 << 90 << 0 << 1 << g3;
}

void TstVisionReference::imageMatchesReference() {
    QFETCH(int, width);
    QFETCH(int, height);
    QFETCH(int, longest_edge);
    QFETCH(int, tiles);
    QFETCH(QString, family);
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    QTemporaryDir dir;
    const QString mmproj = dir.filePath(QStringLiteral("mmproj.gguf"));
    QVERIFY(sl::test::make_mmproj(mmproj, {QStringLiteral("--seed"), seed_arg(), QStringLiteral("--family"), family}));
    const auto vm = sl::load_mmproj(mmproj.toStdString());

    sl::RgbImage img;
    img.width = width;
    img.height = height;
    img.rgb.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : img.rgb) b = static_cast<uint8_t>(byte(sl::test::rng()));
    const QString img_path = dir.filePath(QStringLiteral("img.u8")), out = dir.filePath(QStringLiteral("emb.f32")),
                  tiles_path = dir.filePath(QStringLiteral("tiles.f32"));
    QVERIFY(sl::test::write_floats(img_path, img.rgb.data(), img.rgb.size()));
    QByteArray stdout_bytes;
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("vision/vision_ref.py")), mmproj, QStringLiteral("--image"), img_path,
                                       QStringLiteral("--width"), QString::number(width), QStringLiteral("--height"), QString::number(height),
                                       QStringLiteral("--longest-edge"), QString::number(longest_edge), QStringLiteral("--out"), out,
                                       QStringLiteral("--tiles-out"), tiles_path},
                                  &stdout_bytes));
    const QJsonObject info = last_json(stdout_bytes);
    QCOMPARE(info.value(QStringLiteral("tiles")).toInt(), tiles);

    const sl::TilePlan plan = sl::plan_tiles(vm->model.config, width, height, longest_edge);
    QCOMPARE(plan.n_tiles(), tiles);
    if (plan.rows) {
        const QJsonObject p = info.value(QStringLiteral("plan")).toObject();
        QCOMPARE(plan.rows, p.value(QStringLiteral("rows")).toInt());
        QCOMPARE(plan.cols, p.value(QStringLiteral("cols")).toInt());
        QCOMPARE(plan.resized_width, p.value(QStringLiteral("resized_width")).toInt());
        QCOMPARE(plan.resized_height, p.value(QStringLiteral("resized_height")).toInt());
    }
    // Preprocessing alone, then the whole pipeline.
    const std::vector<float> want_tiles = sl::test::read_floats(tiles_path);
    const std::vector<float> got_tiles = sl::preprocess(vm->model.config, img, plan);
    QCOMPARE(got_tiles.size(), want_tiles.size());
    const double tile_err = sl::test::normalized_error(got_tiles.data(), want_tiles.data(), got_tiles.size());
    QVERIFY2(tile_err < 1e-6, qPrintable(QString::number(tile_err)));

    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(vm->model, pool);
    const sl::EncodedImage e = sl::encode_image(enc, img, longest_edge);
    const std::vector<float> want = sl::test::read_floats(out);
    QCOMPARE(e.embeddings.size(), want.size());
    const double err = sl::test::normalized_error(e.embeddings.data(), want.data(), want.size());
    qInfo("%dx%d -> %d tiles: preprocessing error %.2e, embeddings error %.2e", width, height, tiles, tile_err, err);
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
}

void TstVisionReference::pixelShuffleOrder() {
    // 4x4 grid of 1-wide features numbered by position; s = 2. Token (0, 1) gathers patches
    // (0,2) (0,3) (1,2) (1,3) in that order (HF's Idefics3 connector).
    std::vector<float> x(16);
    for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
    std::vector<float> out(16);
    sl::pixel_shuffle(x.data(), 4, 1, 2, out.data());
    const std::vector<float> want{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
    QCOMPARE(out, want);
}

void TstVisionReference::averagePoolOrder() {
    // 4x4 grid of 2-wide features (v, 10 v) numbered by position; k = 2: token (0, 1) averages
    // patches 2, 3, 6, 7 (HF's AvgPool2d over the (D, g, g) view, tokens row-major).
    std::vector<float> x(32);
    for (int i = 0; i < 16; ++i) {
        x[static_cast<size_t>(2 * i)] = static_cast<float>(i);
        x[static_cast<size_t>(2 * i + 1)] = 10.0f * static_cast<float>(i);
    }
    std::vector<float> out(8);
    sl::average_pool(x.data(), 4, 2, 2, out.data());
    const std::vector<float> want{2.5f, 25.0f, 4.5f, 45.0f, 10.5f, 105.0f, 12.5f, 125.0f};
    QCOMPARE(out, want);
}

QTEST_GUILESS_MAIN(TstVisionReference)
#include "tst_vision_reference.moc"
