// `sightline-cli ask --mmproj VISION.gguf` end to end with the default model and a tiny
// random-weight Idefics3 tower of its width (make_tiny_mmproj.py): a library of a PDF page with
// little text and a picture file answers with both visuals read as image tokens (the plan counts
// them, the prefill encodes them from the files: the page rendered by Poppler, the picture
// decoded); the same question again restores the saved context without encoding anything, and
// without the saved context reads both from the cache of encoded visuals; an
// mmproj of another width is refused naming the file and both widths; --mmproj with a remote
// --engine is a usage error.
#include <QImage>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <random>

#include "core/util/assets.h"
#include "tests/common/test_support.h"

class TstCliAskVision : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void asksWithImages();
    void wrongWidthRefused();
    void remoteEngineRefused();

private:
    QByteArray run(const QStringList& args, int* status) const;
    QStringList ask(const QString& mmproj) const;

    QTemporaryDir dir_;
    QString lib_;
    bool ready_ = false;
};

QByteArray TstCliAskVision::run(const QStringList& args, int* status) const {
    QProcess p;
    p.start(QStringLiteral(SIGHTLINE_CLI_PATH), args);
    if (!p.waitForFinished(600000)) return {};
    *status = p.exitCode();
    return p.readAllStandardOutput() + p.readAllStandardError();
}

QStringList TstCliAskVision::ask(const QString& mmproj) const {
    return {QStringLiteral("ask"), QStringLiteral("--library"), lib_, QStringLiteral("--mmproj"), dir_.filePath(mmproj),
            QStringLiteral("--effort"), QStringLiteral("low"), QStringLiteral("--no-semantic"), QStringLiteral("--threads"),
            QStringLiteral("2"), QStringLiteral("What does the picture show?")};
}

void TstCliAskVision::initTestCase() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/helloworld.pdf");
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    auto make = [&](const QString& out, const QString& width) {
        return sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("vision/make_tiny_mmproj.py")), dir_.filePath(out),
                                          QStringLiteral("--out-embd"), width, QStringLiteral("--image-size"), QStringLiteral("32"),
                                          QStringLiteral("--patch-size"), QStringLiteral("4"), QStringLiteral("--longest-edge"),
                                          QStringLiteral("64")},
                                     nullptr);
    };
    QVERIFY(make(QStringLiteral("mm.gguf"), QStringLiteral("576")));  // SmolLM2-135M's width
    QVERIFY(make(QStringLiteral("wide-mm.gguf"), QStringLiteral("96")));
    QImage img(200, 150, QImage::Format_RGB888);
    std::mt19937 gen(5);
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) img.setPixel(x, y, qRgb(static_cast<int>(gen() % 256), x, y));
    const QString picture = dir_.filePath(QStringLiteral("chart.png"));
    QVERIFY(img.save(picture));
    lib_ = dir_.filePath(QStringLiteral("library"));
    int status = -1;
    const QByteArray add = run({QStringLiteral("add"), QStringLiteral("--library"), lib_, QStringLiteral("--no-ocr"),
                                QString::fromStdString(pdf.string()), picture},
                               &status);
    QVERIFY2(status == 0, add.constData());
    ready_ = true;
}

void TstCliAskVision::asksWithImages() {
    if (!ready_) QSKIP("the default model, the sample PDF or the venv is missing");
    int status = -1;
    const QByteArray first = run(ask(QStringLiteral("mm.gguf")), &status);
    QVERIFY2(status == 0, first.constData());
    QVERIFY2(first.contains("vision model: visuals as image-patch tokens (idefics3"), first.constData());
    const auto m = QRegularExpression(QStringLiteral("Vision: (\\d+) visuals as ([\\d,]+) image positions; (\\d+) encoded"))
                       .match(QString::fromUtf8(first));
    QVERIFY2(m.hasMatch(), first.constData());
    QCOMPARE(m.captured(1).toInt(), 2);  // the page with little text, the picture
    QCOMPARE(m.captured(3).toInt(), 2);
    QVERIFY(m.captured(2).remove(QLatin1Char(',')).toInt() > 2 * 16);  // tiled: more than one tile each
    QVERIFY2(!first.contains("no pixels"), first.constData());         // both read from their files
    QVERIFY2(first.contains("saved the prefilled context"), first.constData());
    QVERIFY2(first.contains("Answer with citations:"), first.constData());

    const QByteArray again = run(ask(QStringLiteral("mm.gguf")), &status);
    QVERIFY2(status == 0, again.constData());
    QVERIFY2(again.contains("context tokens restored"), again.constData());
    QVERIFY2(again.contains(" 0 encoded") && again.contains("the saved context holds them"), again.constData());

    // Without the saved context the prefill runs again, the visuals read from the library's cache
    // of encoded visuals (vision/), not encoded again.
    QStringList fresh = ask(QStringLiteral("mm.gguf"));
    fresh.insert(1, QStringLiteral("--no-cache"));
    const QByteArray third = run(fresh, &status);
    QVERIFY2(status == 0, third.constData());
    QVERIFY2(third.contains("context tokens prefilled"), third.constData());
    QVERIFY2(third.contains(" 0 encoded") && third.contains("2 from the cache"), third.constData());
}

void TstCliAskVision::wrongWidthRefused() {
    if (!ready_) QSKIP("the default model, the sample PDF or the venv is missing");
    int status = -1;
    const QByteArray out = run(ask(QStringLiteral("wide-mm.gguf")), &status);
    QVERIFY(status != 0);
    QVERIFY2(out.contains(dir_.filePath(QStringLiteral("wide-mm.gguf")).toUtf8()) && out.contains("width 96") &&
                 out.contains("width is 576"),
             out.constData());
}

void TstCliAskVision::remoteEngineRefused() {
    if (!ready_) QSKIP("the default model, the sample PDF or the venv is missing");
    int status = -1;
    QStringList args = ask(QStringLiteral("mm.gguf"));
    args << QStringLiteral("--engine") << QStringLiteral("http://127.0.0.1:9/v1");
    const QByteArray out = run(args, &status);
    QCOMPARE(status, 2);
    QVERIFY2(out.contains("a remote --engine gets text only"), out.constData());
}

QTEST_GUILESS_MAIN(TstCliAskVision)
#include "tst_cli_ask_vision.moc"
