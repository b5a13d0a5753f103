// Backend choice (core/runtime/backend.h): auto falls back to the CPU with the reason when no
// device is usable, cpu is always the CPU, cuda fails loudly without a device, and bad names are
// refused naming the text.
#include <QTest>

#include "core/runtime/backend.h"
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
        QVERIFY(c.reason.find("does not run on cuda yet") != std::string::npos);
    }
    QCOMPARE(sl::backend_for_model("cpu").backend->kind(), sl::DeviceKind::Cpu);
}

void TstBackend::sessionNeedsAreNamed() {
    // What a caller needs that the CUDA session lacks keeps it on the CPU, named in the reason.
    QCOMPARE(sl::device_lacks({}), std::string());
    sl::SessionNeeds n;
    n.save_restore = true;
    QCOMPARE(sl::device_lacks(n), std::string("saved contexts"));
    n.truncate = true;
    n.images = true;
    QCOMPARE(sl::device_lacks(n), std::string("saved contexts, context truncation, image embeddings"));
    n.save_restore = false;
    QCOMPARE(sl::device_lacks(n), std::string("context truncation, image embeddings"));
}

QTEST_APPLESS_MAIN(TstBackend)
#include "tst_backend.moc"
