// Backend choice (core/runtime/backend.h): auto falls back to the CPU with the reason when no
// device is usable, cpu is always the CPU, cuda fails loudly without a device, and bad names are
// refused naming the text.
#include <QTest>

#include "core/attention/msa_attention.h"
#include "core/runtime/backend.h"
#include "core/runtime/cuda_backend.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "kernels/cuda/cuda_device.h"

class TstBackend : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void autoPicksWhatIsUsable();
    void cpuIsAlwaysCpu();
    void cudaWithoutDeviceFails();
    void unknownNameIsRefused();
    void modelRunsWhereItCan();
    void sessionNeedsAreNamed();
    void modelIsOptIn();
    void msaConfigMapsToTheDevice();
};

void TstBackend::autoPicksWhatIsUsable() {
    const sl::cuda::DeviceStatus st = sl::cuda::probe();
    const sl::BackendChoice c = sl::backend_for("auto");
    QVERIFY(c.backend);
    qInfo("auto: %s", c.reason.c_str());
    if (st.usable) {
        QCOMPARE(c.backend->kind(), sl::DeviceKind::Cuda);
        QCOMPARE(std::string(c.backend->name()), std::string("cuda"));
        QVERIFY(c.reason.find(st.device_name) != std::string::npos);
    } else {
        QCOMPARE(c.backend->kind(), sl::DeviceKind::Cpu);
        QVERIFY(c.reason.rfind("CPU: CUDA device not usable: ", 0) == 0);
        QVERIFY(c.reason.find(st.message) != std::string::npos);
        QVERIFY(c.backend->caps().full_model);
    }
}

void TstBackend::cpuIsAlwaysCpu() {
    const sl::BackendChoice c = sl::backend_for("cpu");
    QCOMPARE(c.backend->kind(), sl::DeviceKind::Cpu);
    QCOMPARE(c.backend.get(), sl::cpu_backend().get());
    QVERIFY(!c.backend->description().empty());
}

void TstBackend::cudaWithoutDeviceFails() {
    const sl::cuda::DeviceStatus st = sl::cuda::probe();
    if (st.usable) {
        QCOMPARE(sl::backend_for("cuda").backend->kind(), sl::DeviceKind::Cuda);
        return;
    }
    try {
        sl::backend_for("cuda");
        QFAIL("backend_for(\"cuda\") returned without a usable device");
    } catch (const sl::Error& e) {
        QVERIFY(std::string(e.what()).find(st.message) != std::string::npos);
    }
}

void TstBackend::unknownNameIsRefused() {
    for (const char* bad : {"gpu", "CUDA", ""}) {
        try {
            sl::backend_for(bad);
            QFAIL("accepted a bad device name");
        } catch (const sl::Error& e) {
            QVERIFY(std::string(e.what()).find("'" + std::string(bad) + "'") != std::string::npos);
        }
    }
}

void TstBackend::modelRunsWhereItCan() {
    const sl::BackendChoice c = sl::backend_for_model("auto");
    QVERIFY(c.backend->caps().full_model);  // whatever was picked can run the model
    qInfo("model: %s", c.reason.c_str());
    const sl::BackendChoice raw = sl::backend_for("auto");
    if (raw.backend->caps().full_model) {
        QCOMPARE(c.backend.get(), raw.backend.get());
        QCOMPARE(c.reason, raw.reason);
    } else {
        QCOMPARE(c.backend->kind(), sl::DeviceKind::Cpu);
        QVERIFY(c.reason.find("does not run on cuda by default yet") != std::string::npos);
    }
    QCOMPARE(sl::backend_for_model("cpu").backend->kind(), sl::DeviceKind::Cpu);
}

void TstBackend::sessionNeedsAreNamed() {
    // What a caller needs that the CUDA session lacks keeps it on the CPU, named in the reason;
    // saved contexts and truncation run on the device (through the host cache), bidirectional
    // image runs do not.
    QCOMPARE(sl::device_lacks({}), std::string());
    sl::SessionNeeds n;
    n.save_restore = true;
    n.truncate = true;
    QCOMPARE(sl::device_lacks(n), std::string());
    n.bidirectional = true;
    QCOMPARE(sl::device_lacks(n), std::string("bidirectional image runs"));
}

void TstBackend::modelIsOptIn() {
    // The whole model runs on a usable device only with SIGHTLINE_CUDA_MODEL=1 (until a Session on
    // the device has passed its checks there); without a device the variable changes nothing.
    const QByteArray was = qgetenv("SIGHTLINE_CUDA_MODEL");
    const bool usable = sl::cuda::probe().usable;
    for (const char* v : {"0", "1", ""}) {
        qputenv("SIGHTLINE_CUDA_MODEL", v);
        QCOMPARE(sl::cuda_model_opted_in(), std::string(v) == "1");
        const sl::BackendChoice c = sl::backend_for_model("auto");
        QCOMPARE(c.backend->kind() == sl::DeviceKind::Cuda, usable && std::string(v) == "1");
        if (usable && std::string(v) != "1") QVERIFY(c.reason.find("SIGHTLINE_CUDA_MODEL=1") != std::string::npos);
    }
    if (was.isNull()) qunsetenv("SIGHTLINE_CUDA_MODEL"); else qputenv("SIGHTLINE_CUDA_MODEL", was);
}

void TstBackend::msaConfigMapsToTheDevice() {
    // One attention configuration: the CPU's MsaConfig runs on the device where the device runs
    // the same selection, and anything else is named.
    sl::MsaConfig c;
    c.top_k = 12;
    sl::parse_msa_scoring("hybrid6/group-mean/sink", c);
    QCOMPARE(sl::cuda_msa_lacks(c), std::string());
    sl::parse_msa_scoring("hybrid6/group-mean", c);
    QCOMPARE(sl::cuda_msa_lacks(c), std::string());
    c.token_mass = true;  // citations' weights: the device records them for calls of one query
    QCOMPARE(sl::cuda_msa_lacks(c), std::string());
    // The ask flow's default mode (a local window, mass-adaptive growth shrinking past 32K) at
    // every effort's top-k, with positions as trained or remapped.
    sl::MsaConfig def;
    sl::parse_msa_scoring(sl::kTrainingFreeMode, def);
    for (int k : {8, 16, 32}) {
        def.top_k = k;
        QCOMPARE(sl::cuda_msa_lacks(def), std::string());
    }
    def.positions = sl::PositionMode::Remap;  // contexts past the model's training
    QCOMPARE(sl::cuda_msa_lacks(def), std::string());
    def.remap_window = 0;
    QVERIFY(sl::cuda_msa_lacks(def).find("remap window of 0") != std::string::npos);

    struct Row { const char* mode; void (*tweak)(sl::MsaConfig&); const char* named; };
    const Row rows[] = {
        {"block-max", nullptr, "BlockMax"},
        {"mean-key/group-mean", nullptr, "mean-key"},
        {"hybrid4/head-max", nullptr, "head-max"},
        {"hybrid4d2/group-mean", nullptr, "decode shortlist factor of 2"},
        {"hybrid4/group-mean/w300", nullptr, "local window of 300 blocks"},
        {"hybrid4/group-mean/p95x9", [](sl::MsaConfig& m) { m.top_k = 40; }, "growth room of 320 blocks"},
        {"hybrid8/group-mean", [](sl::MsaConfig& m) { m.top_k = 40; }, "shortlist of 313 blocks"},
        {"hybrid4/group-mean", [](sl::MsaConfig& m) { m.block_size = 64; }, "blocks of 64"},
        {"hybrid4/group-mean", [](sl::MsaConfig& m) { m.top_k = 65; }, "top-k 65"},
        {"hybrid4/group-mean", [](sl::MsaConfig& m) { m.hybrid_factor = 65; }, "shortlist factor of 65"},
        {"hybrid4/group-mean", [](sl::MsaConfig& m) { m.dense_layers = 2; }, "2 dense leading layers"},
        {"hybrid4/group-mean", [](sl::MsaConfig& m) { m.positions = sl::PositionMode::Remap; m.remap_window = -1; }, "remap window of -1"},
    };
    for (const Row& r : rows) {
        sl::MsaConfig m;
        sl::parse_msa_scoring(r.mode, m);
        if (r.tweak) r.tweak(m);
        const std::string why = sl::cuda_msa_lacks(m);
        QVERIFY2(why.find(r.named) != std::string::npos, (std::string(r.mode) + ": '" + why + "'").c_str());
    }
}

QTEST_APPLESS_MAIN(TstBackend)
#include "tst_backend.moc"
