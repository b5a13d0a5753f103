// `sightline-cli generate --mmproj VISION.gguf --image FILE` end to end for both vision families,
// on tiny random-weight files (make_tiny_model.py, make_tiny_mmproj.py): the image is decoded,
// encoded and placed in the prompt (the stats line names its tiles and embedding positions), the
// model generates, `info --mmproj` describes the tower; a Gemma 3 image runs with --attention msa
// too (its tokens attend both ways: MSA attends the run exactly); an mmproj of the wrong width is
// refused by name.
#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <random>

#include "tests/common/test_support.h"

class TstCliGenerateImage : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void generatesWithAnImage_data();
    void generatesWithAnImage();
    void gemma3ImageWithMsa();
    void wrongWidthRefused();

private:
    QByteArray run(const QStringList& args, int* status) const;
    bool make(const QString& script, const QStringList& args) const;

    QTemporaryDir dir_;
    QString py_, image_;
};

QByteArray TstCliGenerateImage::run(const QStringList& args, int* status) const {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(120000)) return {};
    *status = p.exitCode();
    return p.readAllStandardOutput() + p.readAllStandardError();
}

bool TstCliGenerateImage::make(const QString& script, const QStringList& args) const {
    return sl::test::run_process(py_, QStringList{sl::test::reference_script(script)} + args, nullptr);
}

void TstCliGenerateImage::initTestCase() {
    py_ = sl::test::require_venv_python();
    if (py_.isEmpty()) return;
    const auto f = [this](const char* n) { return dir_.filePath(QString::fromLatin1(n)); };
    QVERIFY(make(QStringLiteral("model/make_tiny_model.py"), {f("llama.gguf"), QStringLiteral("--d-model"), QStringLiteral("64")}));
    QVERIFY(make(QStringLiteral("model/make_tiny_model.py"),
                 {f("gemma3.gguf"), QStringLiteral("--arch"), QStringLiteral("gemma3"), QStringLiteral("--d-model"), QStringLiteral("64")}));
    QVERIFY(make(QStringLiteral("vision/make_tiny_mmproj.py"), {f("idefics3-mm.gguf"), QStringLiteral("--out-embd"), QStringLiteral("64")}));
    QVERIFY(make(QStringLiteral("vision/make_tiny_mmproj.py"),
                 {f("gemma3-mm.gguf"), QStringLiteral("--family"), QStringLiteral("gemma3"), QStringLiteral("--out-embd"), QStringLiteral("64")}));
    QVERIFY(make(QStringLiteral("vision/make_tiny_mmproj.py"), {f("wide-mm.gguf"), QStringLiteral("--out-embd"), QStringLiteral("96")}));
    QImage img(40, 30, QImage::Format_RGB888);
    std::mt19937 gen(7);
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) img.setPixel(x, y, qRgb(static_cast<int>(gen() % 256), static_cast<int>(gen() % 256), 40));
    image_ = f("picture.png");
    QVERIFY(img.save(image_));
}

void TstCliGenerateImage::generatesWithAnImage_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("mmproj");
    QTest::addColumn<QString>("describe");
    QTest::addColumn<QString>("stats");
    // Idefics3: 32 px tiles, shuffle 2 -> 16 tokens; one tile (no tiling key). Gemma 3: 2 x 2 pool
    // of the 8 x 8 patches -> 16 tokens.
    QTest::newRow("idefics3") << QStringLiteral("llama.gguf") << QStringLiteral("idefics3-mm.gguf")
                              << QStringLiteral("idefics3: SigLIP 2 x 48") << QStringLiteral("[image 40 x 30: 1 tile(s), 16 embedding positions");
    QTest::newRow("gemma3") << QStringLiteral("gemma3.gguf") << QStringLiteral("gemma3-mm.gguf")
                            << QStringLiteral("gemma3: SigLIP 2 x 48") << QStringLiteral("[image 40 x 30: 1 tile(s), 16 embedding positions");
}

void TstCliGenerateImage::generatesWithAnImage() {
    QFETCH(QString, model);
    QFETCH(QString, mmproj);
    QFETCH(QString, describe);
    QFETCH(QString, stats);
    if (py_.isEmpty()) QSKIP("no venv");
    int status = -1;
    const QByteArray info = run({QStringLiteral("info"), QStringLiteral("--mmproj"), dir_.filePath(mmproj), dir_.filePath(model)}, &status);
    QVERIFY2(status == 0 && info.contains(describe.toUtf8()), info.constData());
    const QByteArray out = run({QStringLiteral("generate"), QStringLiteral("--model"), dir_.filePath(model), QStringLiteral("--mmproj"),
                                dir_.filePath(mmproj), QStringLiteral("--image"), image_, QStringLiteral("--prompt"),
                                QStringLiteral("What is in the picture?"), QStringLiteral("--greedy"), QStringLiteral("-n"),
                                QStringLiteral("4"), QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--stats")},
                               &status);
    QVERIFY2(status == 0, out.constData());
    QVERIFY2(out.contains(stats.toUtf8()), out.constData());
}

void TstCliGenerateImage::gemma3ImageWithMsa() {
    if (py_.isEmpty()) QSKIP("no venv");
    int status = -1;
    const QByteArray out = run({QStringLiteral("generate"), QStringLiteral("--model"), dir_.filePath(QStringLiteral("gemma3.gguf")),
                                QStringLiteral("--mmproj"), dir_.filePath(QStringLiteral("gemma3-mm.gguf")), QStringLiteral("--image"), image_,
                                QStringLiteral("--prompt"), QStringLiteral("Hi"), QStringLiteral("-n"), QStringLiteral("2"),
                                QStringLiteral("--attention"), QStringLiteral("msa"), QStringLiteral("--device"), QStringLiteral("cpu"),
                                QStringLiteral("--stats")},
                               &status);
    QVERIFY2(status == 0, out.constData());
    QVERIFY2(out.contains("[image 40 x 30: 1 tile(s), 16 embedding positions"), out.constData());
}

void TstCliGenerateImage::wrongWidthRefused() {
    if (py_.isEmpty()) QSKIP("no venv");
    int status = -1;
    const QString mm = dir_.filePath(QStringLiteral("wide-mm.gguf"));
    const QByteArray out = run({QStringLiteral("generate"), QStringLiteral("--model"), dir_.filePath(QStringLiteral("llama.gguf")),
                                QStringLiteral("--mmproj"), mm, QStringLiteral("--image"), image_, QStringLiteral("--prompt"), QStringLiteral("Hi")},
                               &status);
    QVERIFY(status != 0);
    QVERIFY2(out.contains(mm.toUtf8()) && out.contains("width 96") && out.contains("width is 64"), out.constData());
}

QTEST_GUILESS_MAIN(TstCliGenerateImage)
#include "tst_cli_generate_image.moc"
