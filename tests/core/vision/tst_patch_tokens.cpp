// Tile plans and image-token layouts for page renders, slide pictures and video frames under a
// SmolVLM-sized config (512 px tiles, 16 px patches, pixel shuffle 4 -> 64 tokens per tile,
// longest edge 2048), counted by hand from Idefics3's processor rules; the text-only mode line.
#include <QTest>

#include "core/util/error.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"

namespace {

sl::VisionConfig smolvlm() {
    sl::VisionConfig c;
    c.image_size = 512;
    c.patch_size = 16;
    c.n_embd = 768;
    c.n_ff = 3072;
    c.n_layer = 12;
    c.n_head = 12;
    c.scale_factor = 4;
    c.n_embd_out = 576;
    c.longest_edge = 2048;
    return c;
}

}  // namespace

class TstPatchTokens : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void plans_data();
    void plans();
    void layoutOrder();
    void frameTimestamp();
    void untiledConfig();
    void budgetKnob();
    void badSizes();
    void validation_data();
    void validation();
    void textOnlyMode();
};

void TstPatchTokens::plans_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("cols");
    QTest::addColumn<int>("positions");
    // Letter page rendered at 150 dpi: 1275x1650 -> 1582x2048 -> 2048x2048: 4x4 tiles + global.
    // 17 x 64 embeddings + 16 x 2 tile wrappers + 4 row ends + "\n" + 3 global wrappers = 1128.
    QTest::newRow("page 1275x1650") << 1275 << 1650 << 4 << 4 << 17 * 64 + 32 + 4 + 1 + 3;
    // 16:9 slide picture 1280x720 -> 2048x1152 -> 2048x1536: 3 rows x 4 cols + global = 863.
    QTest::newRow("slide 1280x720") << 1280 << 720 << 3 << 4 << 13 * 64 + 24 + 3 + 1 + 3;
    // vtest.avi frame 768x576 -> 2048x1536: 3 x 4 + global (plus the frame prefix when timed).
    QTest::newRow("frame 768x576") << 768 << 576 << 3 << 4 << 13 * 64 + 24 + 3 + 1 + 3;
    // A 512x512 picture is upscaled to 2048 too (as HF does): 4 x 4.
    QTest::newRow("square 512") << 512 << 512 << 4 << 4 << 17 * 64 + 32 + 4 + 1 + 3;
    // Tall and thin: 100x2000 -> 102x2048 -> 512x2048: 4 rows x 1 col.
    QTest::newRow("tall 100x2000") << 100 << 2000 << 4 << 1 << 5 * 64 + 8 + 4 + 1 + 3;
}

void TstPatchTokens::plans() {
    QFETCH(int, width);
    QFETCH(int, height);
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, positions);
    const sl::VisionConfig c = smolvlm();
    QCOMPARE(c.tokens_per_tile(), 64);
    const sl::TilePlan p = sl::plan_tiles(c, width, height);
    QCOMPARE(p.rows, rows);
    QCOMPARE(p.cols, cols);
    QCOMPARE(p.resized_width, cols * 512);
    QCOMPARE(p.resized_height, rows * 512);
    QCOMPARE(sl::image_tokens(c, width, height), positions);
    const sl::ImageTokenLayout l = sl::image_token_layout(c, width, height);
    QCOMPARE(l.n_embeddings, (rows * cols + 1) * 64);
    int counted = 0;
    for (const auto& piece : l.pieces) counted += piece.kind == sl::ImagePiece::Kind::Text ? 1 : piece.count;
    QCOMPARE(counted, positions);
}

void TstPatchTokens::layoutOrder() {
    // Slide: the first pieces are <fake><row_1_col_1><img>x64 <fake><row_1_col_2>..., each row
    // ends with "\n", and the global tile (index 12) comes last between its wrappers.
    const sl::ImageTokenLayout l = sl::image_token_layout(smolvlm(), 1280, 720);
    QCOMPARE(QString::fromStdString(l.pieces[0].text), QStringLiteral("<fake_token_around_image>"));
    QCOMPARE(QString::fromStdString(l.pieces[1].text), QStringLiteral("<row_1_col_1>"));
    QCOMPARE(l.pieces[2].kind, sl::ImagePiece::Kind::Embeddings);
    QCOMPARE(l.pieces[2].tile, 0);
    QCOMPARE(QString::fromStdString(l.pieces[4].text), QStringLiteral("<row_1_col_2>"));
    QCOMPARE(QString::fromStdString(l.pieces[12].text), QStringLiteral("\n"));  // end of row 1
    QCOMPARE(QString::fromStdString(l.pieces[14].text), QStringLiteral("<row_2_col_1>"));
    QCOMPARE(l.pieces[15].tile, 4);
    const auto n = l.pieces.size();
    QCOMPARE(QString::fromStdString(l.pieces[n - 5].text), QStringLiteral("\n"));
    QCOMPARE(QString::fromStdString(l.pieces[n - 4].text), QStringLiteral("<fake_token_around_image>"));
    QCOMPARE(QString::fromStdString(l.pieces[n - 3].text), QStringLiteral("<global-img>"));
    QCOMPARE(l.pieces[n - 2].tile, 12);
    QCOMPARE(QString::fromStdString(l.pieces[n - 1].text), QStringLiteral("<fake_token_around_image>"));
    // Tiles appear in plan order, each once.
    int next = 0;
    for (const auto& piece : l.pieces)
        if (piece.kind == sl::ImagePiece::Kind::Embeddings) QCOMPARE(piece.tile, next++);
    QCOMPARE(next, 13);
}

void TstPatchTokens::frameTimestamp() {
    const sl::ImageTokenLayout l = sl::image_token_layout(smolvlm(), 768, 576, 65.4);
    QCOMPARE(QString::fromStdString(l.pieces[0].text), QStringLiteral("Frame from 01:05:"));
    QCOMPARE(l.n_positions, sl::image_tokens(smolvlm(), 768, 576) + 1);
    QCOMPARE(QString::fromStdString(sl::frame_prefix(3725.9)), QStringLiteral("Frame from 62:05:"));
    QCOMPARE(QString::fromStdString(sl::frame_prefix(0.0)), QStringLiteral("Frame from 00:00:"));
}

void TstPatchTokens::untiledConfig() {
    // Without preproc_image_size every visual is one 512 px tile: 64 + 3 wrappers.
    sl::VisionConfig c = smolvlm();
    c.longest_edge = 0;
    for (const auto& [w, h] : {std::pair{1275, 1650}, std::pair{1280, 720}, std::pair{768, 576}, std::pair{3, 4000}}) {
        QCOMPARE(sl::image_tokens(c, w, h), 67);
        QCOMPARE(sl::plan_tiles(c, w, h).n_tiles(), 1);
    }
}

void TstPatchTokens::budgetKnob() {
    // The planner can lower the longest edge: 1024 px gives the page 2x2 tiles + global.
    const sl::ImageTokenLayout l = sl::image_token_layout(smolvlm(), 1275, 1650, std::nullopt, 1024);
    QCOMPARE(l.plan.rows, 2);
    QCOMPARE(l.plan.cols, 2);
    QCOMPARE(l.n_positions, 5 * 64 + 8 + 2 + 1 + 3);
    // 512 (one tile's size) leaves the global tile alone; 0 disables tiling.
    QCOMPARE(sl::image_token_layout(smolvlm(), 1275, 1650, std::nullopt, 512).n_positions, 67);
    QCOMPARE(sl::image_token_layout(smolvlm(), 1275, 1650, std::nullopt, 0).n_positions, 67);
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::plan_tiles(smolvlm(), 100, 100, 300));  // below the tile size
}

void TstPatchTokens::badSizes() {
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::image_tokens(smolvlm(), 0, 100));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::image_tokens(smolvlm(), 100, -1));
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::image_tokens(smolvlm(), 1 << 20, 100));
    sl::RgbImage img;
    img.width = 4;
    img.height = 4;
    img.rgb.resize(47);  // one byte short
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, sl::preprocess(smolvlm(), img, sl::TilePlan{}));
}

void TstPatchTokens::validation_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<int>("value");
    QTest::addColumn<QString>("message");
    QTest::newRow("patch does not divide") << QStringLiteral("patch_size") << 15 << QStringLiteral("not a multiple of patch_size");
    QTest::newRow("heads do not divide") << QStringLiteral("n_head") << 7 << QStringLiteral("not a multiple of head_count");
    QTest::newRow("shuffle does not divide") << QStringLiteral("scale_factor") << 3 << QStringLiteral("projector.scale_factor");
    QTest::newRow("absurd image") << QStringLiteral("image_size") << 1000000 << QStringLiteral("image_size");
    QTest::newRow("absurd width") << QStringLiteral("n_embd") << (1 << 30) << QStringLiteral("embedding_length");
    QTest::newRow("zero layers") << QStringLiteral("n_layer") << 0 << QStringLiteral("block_count");
}

void TstPatchTokens::validation() {
    QFETCH(QString, field);
    QFETCH(int, value);
    QFETCH(QString, message);
    sl::VisionConfig c = smolvlm();
    if (field == QLatin1String("patch_size")) c.patch_size = value;
    if (field == QLatin1String("n_head")) c.n_head = value;
    if (field == QLatin1String("scale_factor")) c.scale_factor = value;
    if (field == QLatin1String("image_size")) c.image_size = value;
    if (field == QLatin1String("n_embd")) c.n_embd = value;
    if (field == QLatin1String("n_layer")) c.n_layer = value;
    sl::validate_vision_config(smolvlm(), "ok.gguf");  // the base config is valid
    try {
        sl::validate_vision_config(c, "bad.gguf");
        QFAIL("accepted");
    } catch (const sl::FormatError& e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.startsWith(QStringLiteral("bad.gguf: ")) && what.contains(message), qPrintable(what));
    }
}

void TstPatchTokens::textOnlyMode() {
    const sl::VisionModeInfo none = sl::vision_mode(nullptr);
    QCOMPARE(none.mode, sl::VisualMode::OcrText);
    QCOMPARE(QString::fromStdString(none.description), QStringLiteral("text-only model: visuals as OCR text"));
    sl::VisionModel vm;
    vm.config = smolvlm();
    const sl::VisionModeInfo v = sl::vision_mode(&vm);
    QCOMPARE(v.mode, sl::VisualMode::ImagePatches);
    QVERIFY2(QString::fromStdString(v.description).contains(QStringLiteral("64 tokens per tile")), v.description.c_str());
}

QTEST_GUILESS_MAIN(TstPatchTokens)
#include "tst_patch_tokens.moc"
