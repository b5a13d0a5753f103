// Device kernels of kernels/cuda against the CPU references of kernels/cpu, on fresh random inputs
// of odd sizes (normalized error; bit equality where the kernel promises it). Skips without a device.
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantize.h"
#include "tests/common/test_support.h"
#include "tests/gpu/gpu_test_util.h"

#if SIGHTLINE_HAVE_CUDA
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/quant.cuh"
#endif

using sl::test::normalized_error;
using sl::test::random_floats;

class TstCudaOps : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void refusals();  // no device needed
    void rmsNorm();
    void rope();
    void siluMulAndAdd();
    void softmaxRows();
    void topkRows();
    void dequantizeBitExact();
    void matvecMatchesDequantizedDot();
    void gemmMatchesReference();
};

#if SIGHTLINE_HAVE_CUDA
using sl::test::DevBuf;
namespace kc = sl::kernels;

namespace {
int odd(int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    return d(sl::test::rng()) | 1;
}
}  // namespace

// Arguments the launchers refuse before touching the device (fake pointers, never dereferenced),
// and cuBLAS explaining itself when it cannot be used.
void TstCudaOps::refusals() {
    alignas(16) static float f[64];
    alignas(16) static uint8_t w[64];
    static int32_t idx[64];
    auto refused = [](cudaError_t e) { return e == cudaErrorInvalidValue; };
    QVERIFY(refused(sl::cuda::topk_rows(f, 1, 10, sl::cuda::kMaxTopK + 1, false, idx, nullptr, nullptr)));
    QVERIFY(refused(sl::cuda::topk_rows(f, 1, 10, 0, false, idx, nullptr, nullptr)));
    QVERIFY(refused(sl::cuda::rope(f, 1, 1, 64, 63, 0, nullptr, 1e4f, 1, 0, nullptr)));   // odd rot_dim
    QVERIFY(refused(sl::cuda::rope(f, 1, 1, 64, 128, 0, nullptr, 1e4f, 1, 0, nullptr)));  // rot_dim > head_dim
    QVERIFY(refused(sl::cuda::rope(f, 1, 1, 64, 64, 0, nullptr, 1e4f, 1, 2, nullptr)));   // no such style
    QVERIFY(refused(sl::cuda::rms_norm(f, f, nullptr, 1, 0, 1e-5f, nullptr)));
    QVERIFY(refused(sl::cuda::dequantize(kc::TensorType::Q4_0, w, f, sl::cuda::OutType::F32, 33, nullptr)));
    QVERIFY(refused(sl::cuda::dequantize(kc::TensorType::Q6_K, w, f, sl::cuda::OutType::F32, 256, nullptr)));
    QVERIFY(refused(sl::cuda::matvec(kc::TensorType::Q8_0, w, 1, 32, f + 1, 1, f, nullptr)));  // X misaligned
    QVERIFY(refused(sl::cuda::matvec(kc::TensorType::Q8_0, w + 1, 1, 32, f, 1, f, nullptr)));  // W misaligned
    QVERIFY(refused(sl::cuda::matvec(kc::TensorType::Q8_0, w, 1, 48, f, 1, f, nullptr)));     // n % 32
    QVERIFY(!sl::cuda::device_supports(kc::TensorType::Q4_K));
    std::string why;
    if (!sl::cuda::probe().usable) {
        QVERIFY(!sl::cuda::blas_available(&why));
        QVERIFY(!why.empty());
        qInfo("cuBLAS: %s", why.c_str());
        std::string err;
        QVERIFY(!sl::cuda::gemm_xwt(sl::cuda::GemmType::BF16, w, w, f, 1, 1, 32, nullptr, &err));
        QVERIFY(!err.empty());
    }
}

void TstCudaOps::rmsNorm() {
    REQUIRE_CUDA_DEVICE();
    const int rows = odd(3, 9), n = odd(577, 2049);
    const auto x = random_floats(static_cast<size_t>(rows) * n, -3, 3), w = random_floats(n, 0.5f, 1.5f);
    DevBuf<float> dx(x), dw(w), dy(x.size());
    QVERIFY(dx.ok() && dw.ok() && dy.ok());
    for (bool with_w : {true, false}) {
        CUDA_OK(sl::cuda::rms_norm(dy.get(), dx.get(), with_w ? dw.get() : nullptr, rows, n, 1e-5f, nullptr));
        const auto got = dy.download();
        std::vector<float> want(x.size());
        for (int r = 0; r < rows; ++r)
            kc::rms_norm(want.data() + r * n, x.data() + r * n, with_w ? w.data() : nullptr, n, 1e-5f);
        QVERIFY2(normalized_error(got.data(), want.data(), want.size()) < 1e-6, "rms_norm");
    }
}

void TstCudaOps::rope() {
    REQUIRE_CUDA_DEVICE();
    for (int style : {0, 1}) {
        const int rows = odd(3, 11), n_heads = odd(3, 7), head_dim = 64, rot_dim = style ? 32 : 64;
        const int64_t pos0 = std::uniform_int_distribution<int64_t>(0, 1 << 20)(sl::test::rng());
        const auto x = random_floats(static_cast<size_t>(rows) * n_heads * head_dim);
        DevBuf<float> dx(x);
        QVERIFY(dx.ok());
        CUDA_OK(sl::cuda::rope(dx.get(), rows, n_heads, head_dim, rot_dim, pos0, nullptr, 10000.0f, 1.0f, style, nullptr));
        const auto got = dx.download();
        auto want = x;
        for (int r = 0; r < rows; ++r)
            kc::rope(want.data() + static_cast<size_t>(r) * n_heads * head_dim, n_heads, head_dim, rot_dim, pos0 + r,
                     10000.0f, 1.0f, style ? kc::RopeStyle::Neox : kc::RopeStyle::Norm);
        // Angles in double on both sides; only libm vs CUDA's sincos differ (< 1 ulp of the angle).
        QVERIFY2(normalized_error(got.data(), want.data(), want.size()) < 1e-6, style ? "neox" : "norm");

        // Llama 3.1's per-dimension frequency factors (rope_freqs), as the CPU applies them.
        const auto factors = random_floats(static_cast<size_t>(rot_dim / 2), 1.0f, 8.0f);
        DevBuf<float> dx2(x), dff(factors);
        QVERIFY(dx2.ok() && dff.ok());
        CUDA_OK(sl::cuda::rope(dx2.get(), rows, n_heads, head_dim, rot_dim, pos0, nullptr, 10000.0f, 1.0f, style, nullptr,
                               dff.get()));
        const auto got2 = dx2.download();
        auto want2 = x;
        for (int r = 0; r < rows; ++r)
            kc::rope(want2.data() + static_cast<size_t>(r) * n_heads * head_dim, n_heads, head_dim, rot_dim, pos0 + r,
                     10000.0f, 1.0f, style ? kc::RopeStyle::Neox : kc::RopeStyle::Norm, factors.data());
        QVERIFY2(normalized_error(got2.data(), want2.data(), want2.size()) < 1e-6, "with frequency factors");
    }
}

void TstCudaOps::siluMulAndAdd() {
    REQUIRE_CUDA_DEVICE();
    const int n = odd(10001, 30001);
    const auto g = random_floats(n, -6, 6), u = random_floats(n, -2, 2);
    DevBuf<float> dg(g), du(u), dy(n);
    QVERIFY(dg.ok() && du.ok() && dy.ok());
    CUDA_OK(sl::cuda::silu_mul(dy.get(), dg.get(), du.get(), n, nullptr));
    auto got = dy.download();
    std::vector<float> want(n);
    kc::silu_mul(want.data(), g.data(), u.data(), n);
    QVERIFY(normalized_error(got.data(), want.data(), n) < 1e-6);
    CUDA_OK(sl::cuda::add(dy.get(), dg.get(), n, nullptr));
    got = dy.download();
    kc::add(want.data(), g.data(), n);
    QVERIFY(normalized_error(got.data(), want.data(), n) < 1e-6);
}

void TstCudaOps::softmaxRows() {
    REQUIRE_CUDA_DEVICE();
    const int rows = odd(3, 9), n = odd(1001, 49153);
    const auto x = random_floats(static_cast<size_t>(rows) * n, -20, 20);
    DevBuf<float> dx(x);
    QVERIFY(dx.ok());
    CUDA_OK(sl::cuda::softmax_rows(dx.get(), rows, n, nullptr));
    const auto got = dx.download();
    auto want = x;
    for (int r = 0; r < rows; ++r) kc::softmax(want.data() + static_cast<size_t>(r) * n, n);
    QVERIFY(normalized_error(got.data(), want.data(), want.size()) < 1e-5);
}

void TstCudaOps::topkRows() {
    REQUIRE_CUDA_DEVICE();
    // Every row of x (rows, n) against a stable sort on the host, for k 1, 16, 64, 200, 256 and both orders.
    auto check = [](const std::vector<float>& x, int rows, int n, const char* what) {
        DevBuf<float> dx(x);
        for (int k : {1, 16, 64, 200, sl::cuda::kMaxTopK}) {
            for (bool by_index : {false, true}) {
                DevBuf<int32_t> di(static_cast<size_t>(rows) * k);
                DevBuf<float> dv(static_cast<size_t>(rows) * k);
                QVERIFY(dx.ok() && di.ok() && dv.ok());
                CUDA_OK(sl::cuda::topk_rows(dx.get(), rows, n, k, by_index, di.get(), dv.get(), nullptr));
                const auto idx = di.download();
                const auto val = dv.download();
                for (int r = 0; r < rows; ++r) {
                    const float* xr = x.data() + static_cast<size_t>(r) * n;
                    std::vector<int> order;
                    for (int i = 0; i < n; ++i)
                        if (!std::isnan(xr[i]) && xr[i] != -INFINITY) order.push_back(i);
                    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return xr[a] > xr[b]; });
                    order.resize(static_cast<size_t>(std::min<int>(k, static_cast<int>(order.size()))));
                    if (by_index) std::sort(order.begin(), order.end());
                    for (int j = 0; j < k; ++j) {
                        const int want = j < static_cast<int>(order.size()) ? order[static_cast<size_t>(j)] : -1;
                        if (idx[static_cast<size_t>(r) * k + j] != want)
                            QFAIL(qPrintable(QStringLiteral("%1: k %2 by_index %3 row %4 entry %5: index %6, want %7")
                                                 .arg(what).arg(k).arg(by_index).arg(r).arg(j)
                                                 .arg(idx[static_cast<size_t>(r) * k + j]).arg(want)));
                        if (want >= 0) QCOMPARE(val[static_cast<size_t>(r) * k + j], xr[want]);
                    }
                }
            }
        }
    };
    // Rows longer than the kernel's shared-memory key cache (8,192) here, shorter in the ties case.
    const int rows = odd(3, 9), n = odd(8193, 49153);
    auto x = random_floats(static_cast<size_t>(rows) * n, -5, 5);
    // Ties, -inf and NaN: ties go to the lower index, -inf / NaN are never chosen.
    for (int r = 0; r < rows; ++r) {
        float* xr = x.data() + static_cast<size_t>(r) * n;
        xr[7] = xr[n - 2] = 9.0f;
        xr[3] = -INFINITY;
        xr[5] = NAN;
    }
    check(x, rows, n, "uniform");
    if (QTest::currentTestFailed()) return;
    // Mostly ties: a handful of values (+inf, +0 and -0, which tie, negatives), so the k-th best
    // value is shared by many entries and the lowest indices among them must be taken.
    const float levels[] = {INFINITY, 2.0f, 1.0f, 0.0f, -0.0f, -1.0f, -INFINITY, NAN};
    const int rows2 = odd(3, 7), n2 = odd(301, 8191);
    std::vector<float> t(static_cast<size_t>(rows2) * n2);
    std::uniform_int_distribution<int> pick(0, 7), rare(0, 99);
    for (size_t i = 0; i < t.size(); ++i) {
        const int l = pick(sl::test::rng());
        t[i] = levels[l < 2 && rare(sl::test::rng()) > 2 ? 3 : l];  // +inf and 2 are rare
    }
    check(t, rows2, n2, "ties");
    if (QTest::currentTestFailed()) return;
    // A row with fewer candidates than k pads with -1.
    std::vector<float> few(100, -INFINITY);
    few[42] = 1.0f;
    DevBuf<float> df(few);
    DevBuf<int32_t> di(4);
    CUDA_OK(sl::cuda::topk_rows(df.get(), 1, 100, 4, true, di.get(), nullptr, nullptr));
    QCOMPARE(di.download(), (std::vector<int32_t>{42, -1, -1, -1}));
}

namespace {
// Random weights of `type`, (d, n), quantized by the CPU quantizers.
std::vector<uint8_t> random_weights(kc::TensorType type, int64_t d, int64_t n, std::vector<float>* f32 = nullptr) {
    const auto w = random_floats(static_cast<size_t>(d * n), -1, 1);
    const auto info = kc::tensor_type_info(type);
    std::vector<uint8_t> out(static_cast<size_t>(d * n / info.block_size * info.type_size));
    for (int64_t r = 0; r < d; ++r) {
        const float* src = w.data() + r * n;
        uint8_t* dst = out.data() + r * n / info.block_size * info.type_size;
        switch (type) {
            case kc::TensorType::Q4_0: kc::ref::quantize_row_q4_0(src, reinterpret_cast<kc::BlockQ4_0*>(dst), n); break;
            case kc::TensorType::Q4_1: kc::ref::quantize_row_q4_1(src, reinterpret_cast<kc::BlockQ4_1*>(dst), n); break;
            case kc::TensorType::Q8_0: kc::ref::quantize_row_q8_0(src, reinterpret_cast<kc::BlockQ8_0*>(dst), n); break;
            case kc::TensorType::F16:
                for (int64_t i = 0; i < n; ++i) {
                    const uint16_t h = kc::f32_to_f16(src[i]);
                    std::memcpy(dst + 2 * i, &h, 2);
                }
                break;
            case kc::TensorType::BF16:
                for (int64_t i = 0; i < n; ++i) {
                    const uint16_t h = kc::f32_to_bf16(src[i]);
                    std::memcpy(dst + 2 * i, &h, 2);
                }
                break;
            default: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
        }
    }
    if (f32) *f32 = w;
    return out;
}

const kc::TensorType kTypes[] = {kc::TensorType::Q4_0, kc::TensorType::Q4_1, kc::TensorType::Q8_0,
                                 kc::TensorType::F16, kc::TensorType::BF16, kc::TensorType::F32};
}  // namespace

void TstCudaOps::dequantizeBitExact() {
    REQUIRE_CUDA_DEVICE();
    for (kc::TensorType type : kTypes) {
        const int64_t n = 32 * static_cast<int64_t>(odd(101, 1001));
        const auto w = random_weights(type, 1, n);
        DevBuf<uint8_t> dw(w);
        DevBuf<float> dy(static_cast<size_t>(n));
        QVERIFY(dw.ok() && dy.ok());
        CUDA_OK(sl::cuda::dequantize(type, dw.get(), dy.get(), sl::cuda::OutType::F32, n, nullptr));
        const auto got = dy.download();
        std::vector<float> want(static_cast<size_t>(n));
        kc::ref::dequantize_row(type, w.data(), want.data(), n);
        QVERIFY2(std::memcmp(got.data(), want.data(), want.size() * 4) == 0, kc::tensor_type_info(type).name);
        // bf16 output: the f32 values rounded to nearest even.
        DevBuf<uint16_t> db(static_cast<size_t>(n));
        QVERIFY(db.ok());
        CUDA_OK(sl::cuda::dequantize(type, dw.get(), db.get(), sl::cuda::OutType::BF16, n, nullptr));
        const auto gotb = db.download();
        for (int64_t i = 0; i < n; ++i) QCOMPARE(gotb[static_cast<size_t>(i)], kc::f32_to_bf16(want[static_cast<size_t>(i)]));
    }
    // f32 -> bf16 of activations (the prefill GEMM's), bit for bit with the CPU's converter over
    // magnitudes from tiny to large (bf16 keeps f32's range: no overflow, unlike f16).
    std::vector<float> x = random_floats(4099);
    const float mags[] = {1e-30f, 3e-5f, 1.0f, 300.0f, 7e4f, 1e30f};
    for (size_t i = 0; i < x.size(); ++i) x[i] *= mags[i % 6];
    DevBuf<float> dx(x);
    DevBuf<uint16_t> dh(x.size());
    QVERIFY(dx.ok() && dh.ok());
    CUDA_OK(sl::cuda::f32_to_bf16(dh.get(), dx.get(), static_cast<int64_t>(x.size()), nullptr));
    const auto h = dh.download();
    for (size_t i = 0; i < x.size(); ++i) QCOMPARE(h[i], kc::f32_to_bf16(x[i]));
}

void TstCudaOps::matvecMatchesDequantizedDot() {
    REQUIRE_CUDA_DEVICE();
    for (kc::TensorType type : kTypes) {
        const int64_t d = odd(33, 301), n = 32 * static_cast<int64_t>(odd(7, 97));
        const int T = odd(1, 5) + 1;  // 2..6: covers the 4-token pass and a remainder
        const auto w = random_weights(type, d, n);
        const auto x = random_floats(static_cast<size_t>(T * n));
        DevBuf<uint8_t> dw(w);
        DevBuf<float> dx(x), dy(static_cast<size_t>(T * d));
        QVERIFY(dw.ok() && dx.ok() && dy.ok());
        CUDA_OK(sl::cuda::matvec(type, dw.get(), d, n, dx.get(), T, dy.get(), nullptr));
        const auto got = dy.download();
        // Reference: the CPU dequantizer, then a double-precision dot (the kernel keeps f32 activations).
        std::vector<float> row(static_cast<size_t>(n)), want(static_cast<size_t>(T * d));
        const size_t row_bytes = w.size() / static_cast<size_t>(d);
        for (int64_t r = 0; r < d; ++r) {
            kc::ref::dequantize_row(type, w.data() + r * row_bytes, row.data(), n);
            for (int t = 0; t < T; ++t) {
                double s = 0;
                for (int64_t i = 0; i < n; ++i) s += static_cast<double>(row[i]) * x[t * n + i];
                want[t * d + r] = static_cast<float>(s);
            }
        }
        QVERIFY2(normalized_error(got.data(), want.data(), want.size()) < 1e-5, kc::tensor_type_info(type).name);
    }
}

void TstCudaOps::gemmMatchesReference() {
    REQUIRE_CUDA_DEVICE();
    std::string why;
    if (!sl::cuda::blas_available(&why)) QFAIL(("cuBLAS unavailable on a CUDA machine: " + why).c_str());
    for (sl::cuda::GemmType type : {sl::cuda::GemmType::BF16, sl::cuda::GemmType::F16}) {
        const int64_t T = odd(17, 131), d = odd(33, 301), n = odd(65, 513) + 1;  // even n: lda alignment
        const auto x = random_floats(static_cast<size_t>(T * n)), w = random_floats(static_cast<size_t>(d * n));
        std::vector<uint16_t> xh(x.size()), wh(w.size());
        std::vector<float> xr(x.size()), wr(w.size());  // the rounded values both sides use
        for (size_t i = 0; i < x.size(); ++i) {
            xh[i] = type == sl::cuda::GemmType::BF16 ? kc::f32_to_bf16(x[i]) : kc::f32_to_f16(x[i]);
            xr[i] = type == sl::cuda::GemmType::BF16 ? kc::bf16_to_f32(xh[i]) : kc::f16_to_f32(xh[i]);
        }
        for (size_t i = 0; i < w.size(); ++i) {
            wh[i] = type == sl::cuda::GemmType::BF16 ? kc::f32_to_bf16(w[i]) : kc::f32_to_f16(w[i]);
            wr[i] = type == sl::cuda::GemmType::BF16 ? kc::bf16_to_f32(wh[i]) : kc::f16_to_f32(wh[i]);
        }
        DevBuf<uint16_t> dx(xh), dw(wh);
        DevBuf<float> dy(static_cast<size_t>(T * d));
        QVERIFY(dx.ok() && dw.ok() && dy.ok());
        std::string err;
        QVERIFY2(sl::cuda::gemm_xwt(type, dx.get(), dw.get(), dy.get(), T, d, n, nullptr, &err), err.c_str());
        CUDA_OK(cudaDeviceSynchronize());
        const auto got = dy.download();
        std::vector<float> want(static_cast<size_t>(T * d));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t r = 0; r < d; ++r) want[t * d + r] = kc::ref::dot_f32(xr.data() + t * n, wr.data() + r * n, n);
        QVERIFY2(normalized_error(got.data(), want.data(), want.size()) < 1e-5, "gemm_xwt");
    }
}

#else
void TstCudaOps::refusals() { QSKIP("built without CUDA"); }
void TstCudaOps::rmsNorm() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::rope() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::siluMulAndAdd() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::softmaxRows() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::topkRows() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::dequantizeBitExact() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::matvecMatchesDequantizedDot() { QSKIP("no CUDA device: built without CUDA"); }
void TstCudaOps::gemmMatchesReference() { QSKIP("no CUDA device: built without CUDA"); }
#endif

QTEST_APPLESS_MAIN(TstCudaOps)
#include "tst_cuda_ops.moc"
