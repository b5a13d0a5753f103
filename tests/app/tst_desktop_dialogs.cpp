// The budget plan before a heavy ingest (tokens per source; video frames lowered to fit a small
// budget; a broken file's probe error shown) and the model manager's metadata (the default model
// read; a file that is not a GGUF model refused with its name); the remote engine's settings kept
// by the model manager, and an answer service pointed at a server that is not there failing with
// its address.
#include <QFile>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "app/desktop/app_settings.h"
#include "app/desktop/budget_dialog.h"
#include "app/desktop/library_answer_service.h"
#include "app/desktop/model_manager.h"
#include "core/library/library.h"
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
