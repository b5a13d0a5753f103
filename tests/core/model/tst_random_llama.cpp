// tests/common/random_llama.h on the CPU: the in-memory random-weight Q4_K Llama that
// bench_cuda_msa's 8B row runs on the device, at a small shape — its weights are centred with the
// intended spread (dequantized by the engine's own Q4_K reader), its forward pass gives finite
// logits that depend on the tokens, it is the same for a seed and differs between seeds, and the
// 8B shape's numbers are Llama 3.1 8B's.
#include <QtTest>

#include <cmath>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/dequantize.h"
#include "tests/common/random_llama.h"

namespace {

sl::LlamaConfig small_shape() {
    sl::LlamaConfig c = sl::test::llama31_8b_shape();
    c.n_layer = 3;
    c.d_model = 256;
    c.n_ff = 512;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.head_dim = 64;
    c.rope_dim = 64;
    c.n_vocab = 1000;
    return c;
}

std::vector<float> logits_of(const sl::LlamaModel& m, const std::vector<int32_t>& tokens) {
    const sl::LlamaConfig& c = m.config();
    sl::KvCache kv(c.n_layer, 256, c.n_kv_head, c.head_dim, sl::KvCacheOptions{sl::KvType::F32, 32, 0, {}});
    sl::DenseAttention att;
    sl::ThreadPool pool(1);
    sl::ForwardScratch scratch;
    std::vector<float> logits(static_cast<size_t>(c.n_vocab));
    m.forward(tokens.data(), static_cast<int>(tokens.size()), 0, kv, att, pool, scratch, logits.data(), false);
    return logits;
}

}  // namespace

class TstRandomLlama : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void weightsAreCentred();
    void forwardIsFiniteAndSeeded();
    void eightBShape();
};

void TstRandomLlama::weightsAreCentred() {
    const auto r = sl::test::make_random_llama(small_shape(), 1);
    const sl::TensorView& w = r->model->weights().layers[1].gate;
    QCOMPARE(w.type, sl::kernels::TensorType::Q4_K);
    std::vector<float> row(static_cast<size_t>(w.ne0));
    double sum = 0, sq = 0;
    int64_t n = 0;
    for (int64_t i = 0; i < w.ne1; ++i) {
        sl::kernels::dequantize_row(w.type, w.row(i), row.data(), w.ne0);
        for (float x : row) {
            QVERIFY(std::isfinite(x));
            sum += x;
            sq += static_cast<double>(x) * x;
            ++n;
        }
    }
    const double mean = sum / static_cast<double>(n), sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
    qInfo("Q4_K random weights: mean %.2e, sd %.2e", mean, sd);
    QVERIFY2(sd > 0.015 && sd < 0.025, qPrintable(QString::number(sd)));  // ~0.02, as the header says
    QVERIFY2(std::abs(mean) < 0.1 * sd, qPrintable(QString::number(mean)));
    // Row lengths that are not whole Q4_K blocks are refused.
    sl::LlamaConfig bad = small_shape();
    bad.n_ff = 500;
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::test::make_random_llama(bad, 1));
}

void TstRandomLlama::forwardIsFiniteAndSeeded() {
    const auto a = sl::test::make_random_llama(small_shape(), 1), a2 = sl::test::make_random_llama(small_shape(), 1),
               b = sl::test::make_random_llama(small_shape(), 2);
    const std::vector<int32_t> t1{1, 17, 400, 999, 3, 250}, t2{1, 18, 400, 998, 3, 251};
    const std::vector<float> la = logits_of(*a->model, t1);
    for (float x : la) QVERIFY(std::isfinite(x));
    QCOMPARE(logits_of(*a2->model, t1), la);     // the same seed: the same model
    QVERIFY(logits_of(*b->model, t1) != la);     // another seed: another model
    QVERIFY(logits_of(*a->model, t2) != la);     // the logits depend on the tokens
}

void TstRandomLlama::eightBShape() {
    const sl::LlamaConfig c = sl::test::llama31_8b_shape();
    const int64_t dq = static_cast<int64_t>(c.n_head) * c.head_dim, dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    const int64_t params = c.n_layer * (c.d_model * (dq + 2 * dkv) + dq * c.d_model + 3 * int64_t{c.d_model} * c.n_ff) +
                           2 * int64_t{c.n_vocab} * c.d_model;
    QVERIFY2(params > 8'000'000'000 && params < 8'100'000'000, qPrintable(QString::number(params)));  // 8.03e9
    QCOMPARE(c.d_model % 256, 0);
    QCOMPARE(c.n_ff % 256, 0);
}

QTEST_APPLESS_MAIN(TstRandomLlama)
#include "tst_random_llama.moc"
