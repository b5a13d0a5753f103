// SmolLM2 on the device (core/runtime/cuda_backend_model.h) against the CPU engine with f32
// activations (the path tst_llama_reference ties to the numpy reference): the logits after a
// prefill and after each of a few greedy decode steps. Skips without a device; needs the cached
// model (scripts/setup.sh).
#include <QTest>

#include <algorithm>
#include <numeric>

#include "core/model/model_loader.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/runtime/linear.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/assets.h"
#include "tests/common/test_support.h"
#include "tests/gpu/gpu_test_util.h"

class TstCudaModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void smollmMatchesCpu();
};

namespace {
int argmax(const std::vector<float>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}
// Rank of entry i in v (0 = largest).
int rank_of(const std::vector<float>& v, int i) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [&](float x) { return x > v[static_cast<size_t>(i)]; }));
}
}  // namespace

void TstCudaModel::smollmMatchesCpu() {
    REQUIRE_CUDA_DEVICE();
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    const std::vector<int32_t> ids = m->tokenizer->encode(
        "R is a language and environment for statistical computing and graphics. It is a GNU project which is "
        "similar to the S language and environment which was developed at Bell Laboratories",
        true, false);
    const size_t nv = static_cast<size_t>(m->model->config().n_vocab);

    sl::set_exact_activations(true);
    sl::SessionOptions so;
    so.n_ctx = 512;
    sl::Session cpu(*m, so);
    sl::CudaLlamaRunner gpu(*m->model, 512);
    std::vector<float> got(nv);

    // Prefill in two uneven chunks (a partial KV block, then across it), then greedy steps.
    const size_t split = ids.size() / 3;
    gpu.forward(ids.data(), static_cast<int>(split), got.data());
    gpu.forward(ids.data() + split, static_cast<int>(ids.size() - split), got.data());
    cpu.prefill(ids);
    for (int step = 0; step < 6; ++step) {
        const std::vector<float> want(cpu.last_logits().begin(), cpu.last_logits().end());
        const double err = sl::test::normalized_error(got.data(), want.data(), nv);
        const int top = argmax(want);
        qInfo("step %d (%lld positions): logit error %.3e, CPU argmax %d has GPU rank %d", step,
              static_cast<long long>(gpu.n_past()), err, top, rank_of(got, top));
        // bf16 K/V, q and P in attention and f16 copies of non-device weight types: ~1e-2 expected;
        // a broken kernel gives O(1).
        QVERIFY2(err < 0.15, qPrintable(QString::number(err)));
        QVERIFY(rank_of(got, top) < 3);
        const int32_t next = top;  // follow the CPU's greedy path on both sides
        cpu.prefill(std::span<const int32_t>(&next, 1));
        gpu.forward(&next, 1, got.data());
    }
    sl::set_exact_activations(false);
    // Errors are sl::Error, not aborts: a token outside the vocabulary.
    const int32_t bad = static_cast<int32_t>(nv);
    bool threw = false;
    try {
        gpu.forward(&bad, 1, got.data());
    } catch (const sl::Error& e) {
        threw = std::string(e.what()).find("outside the vocabulary") != std::string::npos;
    }
    QVERIFY(threw);
}

QTEST_APPLESS_MAIN(TstCudaModel)
#include "tst_cuda_model.moc"
