// The budget plan before a heavy ingest (tokens per source; video frames lowered to fit a small
// budget; a broken file's probe error shown) and the model manager's metadata (the default model
// read; a file that is not a GGUF model refused with its name); the remote engine's settings kept
// by the model manager, and an answer service pointed at a server that is not there failing with
// its address; the vision tower kept by the model manager, and an answer with one reading a
// picture of the library as image tokens (a tiny random-weight tower of the default model's width).
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "app/desktop/app_settings.h"
#include "app/desktop/budget_dialog.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/model_manager.h"
#include "core/library/library.h"
#include "ingest/audio/whisper_speech.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopDialogs : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void budgetPlanPerSource();
    void budgetDownsamplesVideoToFit();
    void modelInfoOfDefaultModel();
    void modelInfoOfBadFile();
    void remoteEngineSettings();
    void visionTowerSettings();
    void speechSettings();
    void gpuMemorySetting();
    void contextMemorySetting();
};

void TstDesktopDialogs::budgetPlanPerSource() {
    REQUIRE_ASSET(refman, "samples/pdf/refman.pdf");
    REQUIRE_ASSET(avi, "samples/video/vtest.avi");
    QTemporaryDir dir;
    const QString broken = dir.filePath(QStringLiteral("broken.pdf"));
    QFile f(broken);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a pdf");
    f.close();
    const QStringList paths = {QString::fromStdString(refman.string()), QString::fromStdString(avi.string()), broken};
    const BudgetPlan plan = plan_budget(paths, 1000000, 6.0, 0);
    QCOMPARE(plan.sources.size(), size_t{3});
    QCOMPARE(plan.sources[0].size, QStringLiteral("2415 pages"));
    QVERIFY(plan.sources[0].tokens > 1000000);  // refman alone is over a million tokens
    QVERIFY(plan.heavy);
    QCOMPARE(plan.sources[1].size, QStringLiteral("00:01:20"));  // vtest.avi is 80 s long
    QVERIFY(plan.sources[1].downsampled.startsWith(QStringLiteral("frames: ")));
    QVERIFY(!plan.sources[2].error.isEmpty());
    qInfo("broken file probe: %s", qPrintable(plan.sources[2].error));
    QVERIFY(plan.sources[2].error.contains(QStringLiteral("broken.pdf")));
    BudgetDialog dlg(plan);
    auto* table = dlg.findChild<QTableWidget*>();
    QVERIFY(table);
    QCOMPARE(table->rowCount(), 3);
    QCOMPARE(table->item(0, 0)->text(), QStringLiteral("refman.pdf"));
}

void TstDesktopDialogs::budgetDownsamplesVideoToFit() {
    REQUIRE_ASSET(avi, "samples/video/vtest.avi");
    const QStringList paths = {QString::fromStdString(avi.string())};
    const BudgetPlan roomy = plan_budget(paths, 1000000, 6.0, 0);
    QCOMPARE(roomy.frames_per_minute, 6.0);
    // 80 s at 6 frames a minute is 8 frames; a budget a little over the speech alone forces fewer.
    const BudgetPlan tight = plan_budget(paths, roomy.sources[0].tokens - 400, 6.0, 0);
    QVERIFY(tight.frames_per_minute < 6.0);
    QVERIFY(tight.sources[0].tokens < roomy.sources[0].tokens);
    QVERIFY2(tight.sources[0].downsampled.contains(QStringLiteral("to fit")), qPrintable(tight.sources[0].downsampled));
}

void TstDesktopDialogs::modelInfoOfDefaultModel() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    const ModelInfo info = read_model_info(QString::fromStdString(model.string()));
    QVERIFY2(info.error.isEmpty(), qPrintable(info.error));
    qInfo("%s", qPrintable(info.summary));
    QCOMPARE(info.context_train, 8192);
    bool layers = false;
    for (const auto& [k, v] : info.fields) layers |= k == QStringLiteral("Layers") && v == QStringLiteral("30");
    QVERIFY(layers);
}

void TstDesktopDialogs::modelInfoOfBadFile() {
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("not-a-model.gguf"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("GGUF but not really");
    f.close();
    const ModelInfo info = read_model_info(bad);
    qInfo("error shown: %s", qPrintable(info.error));
    QVERIFY(info.error.contains(QStringLiteral("not-a-model.gguf")));
}

void TstDesktopDialogs::gpuMemorySetting() {
    // The GPU memory the context may take (the device KV budget): all of it unless chosen, one of
    // the listed sizes, a size set in the file kept as it is; saved by the model manager. Without
    // a usable GPU the choice is greyed out but keeps its value.
    QTemporaryDir dir;
    AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    QCOMPARE(settings.deviceKvBudget(), qint64{0});
    settings.setDeviceKvBudget(-5);
    QCOMPARE(settings.deviceKvBudget(), qint64{0});  // nonsense reads as "all of it"
    {
        ModelManagerDialog dlg(&settings);
        QCOMPARE(dlg.deviceKvBudget(), qint64{0});
        dlg.setDeviceKvBudget(qint64{8} << 30);
        QCOMPARE(dlg.deviceKvBudget(), qint64{8} << 30);
        dlg.accept();
    }
    QCOMPARE(settings.deviceKvBudget(), qint64{8} << 30);
    settings.setDeviceKvBudget(qint64{3000} << 20);  // not in the list
    {
        ModelManagerDialog dlg(&settings);
        QCOMPARE(dlg.deviceKvBudget(), qint64{3000} << 20);
        bool found = false;
        for (QComboBox* c : dlg.findChildren<QComboBox*>())
            if (c->accessibleName() == QStringLiteral("GPU memory for the context")) {
                found = true;
                QVERIFY(c->findText(QStringLiteral("3000 MiB")) >= 0);
                QCOMPARE(c->isEnabled(), sl::desktop::gpu_status().first);
            }
        QVERIFY(found);
        dlg.setDeviceKvBudget(0);
        dlg.accept();
    }
    QCOMPARE(settings.deviceKvBudget(), qint64{0});
}

void TstDesktopDialogs::contextMemorySetting() {
    // The RAM the context's K/V may take (the host KV budget): no limit unless chosen, one of the
    // listed sizes, a size set in the file kept as it is; saved by the model manager, on any device.
    QTemporaryDir dir;
    AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    QCOMPARE(settings.kvBudget(), qint64{0});
    settings.setKvBudget(-1);
    QCOMPARE(settings.kvBudget(), qint64{0});  // nonsense reads as "no limit"
    {
        ModelManagerDialog dlg(&settings);
        QCOMPARE(dlg.kvBudget(), qint64{0});
        dlg.setKvBudget(qint64{4} << 30);
        QCOMPARE(dlg.kvBudget(), qint64{4} << 30);
        dlg.accept();
    }
    QCOMPARE(settings.kvBudget(), qint64{4} << 30);
    QCOMPARE(settings.deviceKvBudget(), qint64{0});  // the other budget untouched
    settings.setKvBudget(qint64{1500} << 20);  // not in the list
    {
        ModelManagerDialog dlg(&settings);
        QCOMPARE(dlg.kvBudget(), qint64{1500} << 20);
        bool found = false;
        for (QComboBox* c : dlg.findChildren<QComboBox*>())
            if (c->accessibleName() == QStringLiteral("Memory for the context")) {
                found = true;
                QVERIFY(c->findText(QStringLiteral("1500 MiB")) >= 0);
                QVERIFY(c->isEnabled());
            }
        QVERIFY(found);
        dlg.setKvBudget(0);
        dlg.accept();
    }
    QCOMPARE(settings.kvBudget(), qint64{0});
}

void TstDesktopDialogs::speechSettings() {
    // Model → Manage models → Speech: the Whisper folder and arithmetic are saved, shown again,
    // and reach ingest (WhisperSpeech::set_settings, which the window applies with the model).
    QTemporaryDir dir;
    AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    QVERIFY(settings.speechModel().isEmpty());
    QCOMPARE(settings.speechCompute(), QStringLiteral("default"));
    // A folder with a model.bin (the dialog checks only that it is there).
    const QString folder = dir.filePath(QStringLiteral("whisper-small"));
    QVERIFY(QDir().mkpath(folder));
    QFile bin(QDir(folder).filePath(QStringLiteral("model.bin")));
    QVERIFY(bin.open(QIODevice::WriteOnly));
    bin.close();
    {
        ModelManagerDialog dlg(&settings);
        dlg.setSpeech(folder, QStringLiteral("q8"));
        dlg.accept();
    }
    QCOMPARE(settings.speechModel(), folder);
    QCOMPARE(settings.speechCompute(), QStringLiteral("q8"));
    {
        ModelManagerDialog dlg(&settings);
        dlg.setSpeech(QString(), QStringLiteral("float32"));
        dlg.accept();
    }
    QVERIFY(settings.speechModel().isEmpty());
    QCOMPARE(settings.speechCompute(), QStringLiteral("float32"));
    settings.raw().setValue(QStringLiteral("speech/compute"), QStringLiteral("fp4"));
    QCOMPARE(settings.speechCompute(), QStringLiteral("default"));  // unknown: the default

    // Ingest takes the choice over the environment; an empty choice leaves the environment's.
    qputenv("SIGHTLINE_WHISPER_COMPUTE", "int8");
    sl::ingest::WhisperSpeech::set_settings({}, "q8");
    QCOMPARE(sl::ingest::WhisperSpeech::compute(), std::string("q8"));
    sl::ingest::WhisperSpeech::set_settings({}, {});
    QCOMPARE(sl::ingest::WhisperSpeech::compute(), std::string("int8"));
    qunsetenv("SIGHTLINE_WHISPER_COMPUTE");
    QCOMPARE(sl::ingest::WhisperSpeech::compute(), std::string("default"));
    sl::ingest::WhisperSpeech::set_settings(folder.toStdString(), "float32");
    QCOMPARE(sl::ingest::WhisperSpeech::model_dir(), folder.toStdString());
    QCOMPARE(sl::ingest::WhisperSpeech::compute(), std::string("float32"));
    sl::ingest::WhisperSpeech::set_settings("off", {});
    QVERIFY(sl::ingest::WhisperSpeech::model_dir().empty());
    sl::ingest::WhisperSpeech::set_settings({}, {});
}

void TstDesktopDialogs::visionTowerSettings() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    QTemporaryDir dir;
    AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    QVERIFY(settings.visionTowerPath().isEmpty());
    const QString mm = dir.filePath(QStringLiteral("mm.gguf"));
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) QSKIP("the project's venv is not installed (scripts/setup.sh)");
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("vision/make_tiny_mmproj.py")), mm,
                                       QStringLiteral("--out-embd"), QStringLiteral("576"), QStringLiteral("--image-size"),
                                       QStringLiteral("32"), QStringLiteral("--patch-size"), QStringLiteral("4")},
                                  nullptr));
    {
        ModelManagerDialog dlg(&settings);
        dlg.setVisionTowerPath(QStringLiteral(" ") + mm);
        dlg.accept();
    }
    QCOMPARE(settings.visionTowerPath(), mm);
    {
        ModelManagerDialog dlg(&settings);
        QCOMPARE(dlg.visionTowerPath(), mm);
        dlg.setVisionTowerPath(QString());
        dlg.accept();
    }
    QVERIFY(settings.visionTowerPath().isEmpty());
    QVERIFY(!settings.raw().contains(QStringLiteral("model/mmproj")));

    // A library with one picture: the answer reads it as image tokens and says so.
    QImage img(64, 48, QImage::Format_RGB888);
    img.fill(QColor(200, 30, 30));
    const QString picture = dir.filePath(QStringLiteral("red.png"));
    QVERIFY(img.save(picture));
    const std::filesystem::path lib_dir = dir.filePath(QStringLiteral("library")).toStdString();
    {
        sl::Library lib = sl::Library::open(lib_dir);
        sl::ingest::IngestOptions io;
        io.ocr = false;
        sl::ingest::IngestContext ctx(io);
        sl::Library::FileInfo fi;
        fi.path = picture.toStdString();
        lib.store_document(sl::ingest::read_document(fi.path, ctx), fi);
    }
    LibraryAnswerOptions lo;
    lo.mmproj_path = mm.toStdString();
    lo.semantic = false;
    LibraryAnswerService service(lib_dir, model.string(), lo);
    const ChatAnswer a = service.answer("What colour is the picture?", sl::Effort::Low, {}, nullptr);
    QVERIFY2(a.method.find("vision: 1 visuals as") != std::string::npos, a.method.c_str());

    // A tower of another width is refused naming the file.
    const QString wide = dir.filePath(QStringLiteral("wide.gguf"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("vision/make_tiny_mmproj.py")), wide,
                                       QStringLiteral("--out-embd"), QStringLiteral("64")},
                                  nullptr));
    lo.mmproj_path = wide.toStdString();
    LibraryAnswerService narrow(lib_dir, model.string(), lo);
    try {
        narrow.answer("What colour is the picture?", sl::Effort::Low, {}, nullptr);
        QFAIL("answered with a tower of the wrong width");
    } catch (const sl::Error& e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(wide), e.what());
    }
}

QTEST_MAIN(TstDesktopDialogs)
#include "tst_desktop_dialogs.moc"

void TstDesktopDialogs::remoteEngineSettings() {
    REQUIRE_ASSET(model, sl::assets::kDefaultModel);
    QTemporaryDir dir;
    AppSettings settings(dir.filePath(QStringLiteral("settings.ini")));
    QVERIFY(settings.remoteEngineUrl().isEmpty());
    {
        ModelManagerDialog dlg(&settings);
        dlg.setEngine(QStringLiteral(" http://127.0.0.1:1/v1 "), QStringLiteral("big-model"), QStringLiteral("k3y"));
        dlg.setSampling(0.7, 1);
        dlg.accept();
    }
    QCOMPARE(settings.temperature(), 0.7);
    QCOMPARE(settings.threads(), 1);
    QCOMPARE(settings.remoteEngineUrl(), QStringLiteral("http://127.0.0.1:1/v1"));
    QCOMPARE(settings.remoteEngineModel(), QStringLiteral("big-model"));
    QCOMPARE(settings.remoteApiKey(), QByteArray("k3y"));
    {
        ModelManagerDialog dlg(&settings);
        dlg.setEngine(QString(), QString(), QString());  // back to the local model; the key is removed
        dlg.accept();
    }
    QVERIFY(settings.remoteEngineUrl().isEmpty());
    QVERIFY(!settings.raw().contains(QStringLiteral("engine/api_key")));

    // An answer with the engine set asks that server; none is there: an error naming it.
    const std::filesystem::path lib_dir = dir.filePath(QStringLiteral("library")).toStdString();
    {
        sl::Library lib = sl::Library::open(lib_dir);
        QVERIFY(lib.list_documents().empty());
    }
    LibraryAnswerOptions lo;
    lo.engine_url = "http://127.0.0.1:1/v1";
    LibraryAnswerService service(lib_dir, model.string(), lo);
    try {
        service.answer("What is this?", sl::Effort::Low, {}, nullptr);
        QFAIL("answered without a server");
    } catch (const sl::Error& e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.contains(QStringLiteral("http://127.0.0.1:1/v1: cannot reach the server")), e.what());
    }
}
