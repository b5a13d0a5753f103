// The CUDA path: the probe never fails hard, and the device conversion matches the CPU reference.
#include <QTest>

#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/common/test_support.h"

class TstCudaDevice : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void probeExplainsItself();
    void f16ToF32MatchesCpu();
};

void TstCudaDevice::probeExplainsItself() {
    const sl::cuda::DeviceStatus st = sl::cuda::probe();
    QCOMPARE(st.compiled, sl::cuda::compiled_with_cuda());
    QVERIFY(!st.message.empty());
    qInfo("CUDA: %s", st.message.c_str());
}

void TstCudaDevice::f16ToF32MatchesCpu() {
    const sl::cuda::DeviceStatus st = sl::cuda::probe();
    if (!st.usable) QSKIP(qPrintable(QStringLiteral("no usable CUDA device: %1").arg(QString::fromStdString(st.message))));
    auto& g = sl::test::rng();
    std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
    for (size_t n : {size_t{1}, size_t{255}, size_t{257}, size_t{100003}}) {
        std::vector<uint16_t> h(n);
        for (auto& x : h) x = static_cast<uint16_t>(bits(g)) & 0xbfff;  // no NaN/inf
        std::vector<float> got(n), want(n);
        std::string error;
        QVERIFY2(sl::cuda::f16_to_f32(got.data(), h.data(), n, &error), error.c_str());
        sl::kernels::ref::f16_to_f32(want.data(), h.data(), n);
        QVERIFY(std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0);
    }
}

QTEST_APPLESS_MAIN(TstCudaDevice)
#include "tst_cuda_device.moc"
