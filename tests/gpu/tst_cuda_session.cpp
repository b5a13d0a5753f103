// A whole Session on the device (core/runtime/session.h with SIGHTLINE_CUDA_MODEL=1, --device cuda)
// against Sessions on the CPU with f32 activations, SmolLM2 (the cached default model):
//   - prefill and greedy generation through the Session's CUDA branch;
//   - a context saved on the GPU (and saved again after more tokens: an append) restores on the CPU,
//     and one saved on the CPU restores on the GPU (whole, and its first tokens only): same tokens,
//     the same saved logits, and the next token's logits as a CPU session's that prefilled it all;
//   - truncate on the GPU (mid-block) and prefill again gives the logits of the first prefill;
//   - image-embedding positions (LlamaModel::kEmbeddingToken) take their rows: rows that are the
//     embeddings of tokens give those tokens' logits;
//   - an MSA session runs on the device, and its decode steps hand the MsaAttention's observer
//     (citations) the blocks and attention mass the CPU's MSA gives: the hybrid mode alone, and the
//     training-free mode `ask` runs (kTrainingFreeMode: a local window and mass-adaptive growth),
//     and that mode with remapped positions (ask past the model's trained context);
//   - a session kept between questions (core/ask/warm_context.h: restored, a question's tokens and
//     answer on, cut back to the restored prefix, the next question's tokens) gives the logits and
//     the selections of a session restored afresh for the next question, on the device as on the
//     CPU (the CPU row runs without a device).
// Logits are compared by normalized error (bf16 K/V on the device: ~1e-2; a broken transfer or
// cache gives O(1)) and by the rank of the CPU's argmax. Skips without a device; needs the model
// (scripts/setup.sh). The same transfers are checked without a device by tst_kv_transfer.
#include <QTest>
#include <QTemporaryDir>

#include <algorithm>
#include <map>

#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/cuda_backend.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/runtime/linear.h"
#include "core/model/llama_model.h"
#include "core/runtime/session.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

#define REQUIRE_DEVICE_ROW(device)                  \
    do {                                            \
        if ((device) == QLatin1String("cuda")) REQUIRE_CUDA_DEVICE(); \
    } while (0)

int argmax(std::span<const float> v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }
int rank_of(std::span<const float> v, int i) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [&](float x) { return x > v[static_cast<size_t>(i)]; }));
}
std::vector<float> copy(std::span<const float> v) { return {v.begin(), v.end()}; }

// Logits of a device session against a CPU session's: close, and the CPU's argmax near the top.
bool close_logits(std::span<const float> gpu, std::span<const float> cpu, const char* what) {
    const double err = sl::test::normalized_error(gpu.data(), cpu.data(), cpu.size());
    const int top = argmax(cpu);
    qInfo("%s: logit error %.3e, CPU argmax %d has GPU rank %d", what, err, top, rank_of(gpu, top));
    return err < 0.15 && rank_of(gpu, top) < 3;
}

}  // namespace

class TstCudaSession : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void cleanupTestCase();
    void generatesOnTheDevice();
    void savedOnGpuRestoresOnCpu();
    void savedOnCpuRestoresOnGpu();
    void truncateOnTheDevice();
    void imageEmbeddingsOnTheDevice();
    void msaSelectionsAndMassAsOnTheCpu_data();
    void msaSelectionsAndMassAsOnTheCpu();
    void warmSessionAsRestored_data();
    void warmSessionAsRestored();

private:
    sl::SessionOptions options(const char* device) const {
        sl::SessionOptions so;
        so.n_ctx = 1024;
        so.n_batch = 96;  // prefill in several chunks, across KV blocks
        so.device = device;
        so.needs.save_restore = true;
        so.needs.truncate = true;
        return so;
    }
    std::unique_ptr<sl::LoadedModel> model_;
    std::vector<int32_t> ids_;  // ~330 tokens: three KV blocks, the last partial
    QByteArray env_;
    QTemporaryDir dir_;
};

void TstCudaSession::initTestCase() {
    env_ = qgetenv("SIGHTLINE_CUDA_MODEL");
    qputenv("SIGHTLINE_CUDA_MODEL", "1");
    sl::set_exact_activations(true);  // the CPU side as tst_llama_reference checks it
}

void TstCudaSession::cleanupTestCase() {
    sl::set_exact_activations(false);
    if (env_.isNull()) qunsetenv("SIGHTLINE_CUDA_MODEL"); else qputenv("SIGHTLINE_CUDA_MODEL", env_);
}

void TstCudaSession::generatesOnTheDevice() {
    REQUIRE_CUDA_DEVICE();
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    model_ = sl::load_model(path);
    std::string text;
    for (int i = 0; i < 12; ++i)
        text += "Meeting " + std::to_string(i) + " of the works committee reviewed the bridge repairs in district " +
                std::to_string(i * 7 % 11) + " and agreed to fund them from the reserve. ";
    ids_ = model_->tokenizer->encode(text, true, false);
    QVERIFY2(ids_.size() > 256 && ids_.size() < 900, qPrintable(QString::number(ids_.size())));

    sl::Session gpu(*model_, options("cuda"));
    QVERIFY2(gpu.on_gpu(), gpu.device_reason().c_str());
    QVERIFY2(gpu.device_reason().rfind("CUDA", 0) == 0, gpu.device_reason().c_str());
    sl::Session cpu(*model_, options("cpu"));
    QVERIFY(!cpu.on_gpu());
    gpu.prefill(ids_);
    cpu.prefill(ids_);
    QVERIFY(close_logits(gpu.last_logits(), cpu.last_logits(), "prefill"));

    sl::GenerateOptions go;
    go.max_tokens = 24;
    go.sampling.greedy = true;
    std::string a, b;
    const sl::GenerateStats gs = gpu.generate(go, [&](std::string_view t) { a += t; return true; });
    cpu.generate(go, [&](std::string_view t) { b += t; return true; });
    QVERIFY(gs.generated_tokens > 0);
    QCOMPARE(static_cast<int64_t>(gpu.tokens().size()), static_cast<int64_t>(ids_.size()) + gs.generated_tokens);
    size_t same = 0;
    while (same < std::min(a.size(), b.size()) && a[same] == b[same]) ++same;
    qInfo("greedy: GPU '%s' | CPU '%s' (%zu leading bytes equal)", a.c_str(), b.c_str(), same);
    QVERIFY(!a.empty());
}

void TstCudaSession::savedOnGpuRestoresOnCpu() {
    REQUIRE_CUDA_DEVICE();
    if (!model_) QSKIP("needs the model (generatesOnTheDevice)");
    const std::string file = dir_.filePath("gpu.slkv").toStdString();
    sl::Session gpu(*model_, options("cuda"));
    QVERIFY(gpu.on_gpu());
    const size_t first = ids_.size() - 40;
    gpu.prefill(std::span<const int32_t>(ids_.data(), first));
    gpu.save(file);
    gpu.prefill(std::span<const int32_t>(ids_.data() + first, ids_.size() - first));
    gpu.save(file);  // appends the new positions (read from the device, only what is new)
    const std::vector<float> saved = copy(gpu.last_logits());
    // Straight from the device's blocks into the file (DeviceRunner::save_pages): no host copy of
    // the context, the host cache maps the saved pages.
    QCOMPARE(gpu.kv_cache().ram_bytes(), size_t{0});
    QCOMPARE(gpu.kv_cache().n_past(), static_cast<int64_t>(ids_.size()));

    sl::Session cpu(*model_, options("cpu"));
    cpu.restore(file);
    QCOMPARE(cpu.tokens(), ids_);
    QCOMPARE(copy(cpu.last_logits()), saved);
    const int32_t next = argmax(saved);
    cpu.prefill(std::span<const int32_t>(&next, 1));
    gpu.prefill(std::span<const int32_t>(&next, 1));
    sl::Session fresh(*model_, options("cpu"));
    std::vector<int32_t> all = ids_;
    all.push_back(next);
    fresh.prefill(all);
    QVERIFY(close_logits(cpu.last_logits(), fresh.last_logits(), "restored on the CPU vs prefilled on the CPU"));
    QVERIFY(close_logits(gpu.last_logits(), fresh.last_logits(), "on the GPU vs prefilled on the CPU"));
}

void TstCudaSession::savedOnCpuRestoresOnGpu() {
    REQUIRE_CUDA_DEVICE();
    if (!model_) QSKIP("needs the model (generatesOnTheDevice)");
    const std::string file = dir_.filePath("cpu.slkv").toStdString();
    sl::Session cpu(*model_, options("cpu"));
    cpu.prefill(ids_);
    cpu.save(file);
    const std::vector<float> saved = copy(cpu.last_logits());

    sl::Session gpu(*model_, options("cuda"));
    QVERIFY(gpu.on_gpu());
    gpu.restore(file);
    QCOMPARE(gpu.tokens(), ids_);
    QCOMPARE(copy(gpu.last_logits()), saved);
    const int32_t next = argmax(saved);
    gpu.prefill(std::span<const int32_t>(&next, 1));
    cpu.prefill(std::span<const int32_t>(&next, 1));
    QVERIFY(close_logits(gpu.last_logits(), cpu.last_logits(), "restored on the GPU, one token on"));

    // Its first 200 tokens only (mid-block), then the rest prefilled on the device.
    gpu.restore(file, 200);
    QCOMPARE(static_cast<int64_t>(gpu.tokens().size()), int64_t{200});
    QVERIFY(gpu.last_logits().empty());
    gpu.prefill(std::span<const int32_t>(ids_.data() + 200, ids_.size() - 200));
    QVERIFY(close_logits(gpu.last_logits(), saved, "first 200 restored on the GPU, the rest prefilled there"));
}

void TstCudaSession::truncateOnTheDevice() {
    REQUIRE_CUDA_DEVICE();
    if (!model_) QSKIP("needs the model (generatesOnTheDevice)");
    sl::Session gpu(*model_, options("cuda"));
    QVERIFY(gpu.on_gpu());
    gpu.prefill(ids_);
    const std::vector<float> want = copy(gpu.last_logits());
    gpu.truncate(150);  // mid-block: the partial block's mean key is recomputed on the next append
    QCOMPARE(static_cast<int64_t>(gpu.tokens().size()), int64_t{150});
    gpu.prefill(std::span<const int32_t>(ids_.data() + 150, ids_.size() - 150));
    const double err = sl::test::normalized_error(gpu.last_logits().data(), want.data(), want.size());
    qInfo("truncated to 150 and prefilled again: logit error %.3e against the first prefill", err);
    QVERIFY2(err < 0.02, qPrintable(QString::number(err)));  // other chunk boundaries only
    // A save after the truncation holds the context as it is now.
    const std::string file = dir_.filePath("trunc.slkv").toStdString();
    gpu.save(file);
    sl::Session cpu(*model_, options("cpu"));
    cpu.restore(file);
    QCOMPARE(cpu.tokens(), ids_);
    try {
        gpu.truncate(static_cast<int64_t>(ids_.size()) + 1);
        QFAIL("truncate beyond the context was accepted");
    } catch (const sl::Error&) {
    }
}

void TstCudaSession::imageEmbeddingsOnTheDevice() {
    REQUIRE_CUDA_DEVICE();
    if (!model_) QSKIP("needs the model (generatesOnTheDevice)");
    const int64_t d = model_->model->config().d_model;
    std::vector<int32_t> marked = ids_;
    std::vector<float> rows(ids_.size() * static_cast<size_t>(d), 0.0f);
    for (size_t i = 40; i < 120; ++i) {  // a run of "patch" positions whose rows are token embeddings
        marked[i] = sl::LlamaModel::kEmbeddingToken;
        sl::embed_row(model_->model->weights().tok_embd, ids_[i], rows.data() + i * static_cast<size_t>(d));
    }
    sl::Session plain(*model_, options("cuda")), image(*model_, options("cuda"));
    QVERIFY(image.on_gpu());
    plain.prefill(ids_);
    image.prefill(marked, rows.data());
    const double err = sl::test::normalized_error(image.last_logits().data(), plain.last_logits().data(),
                                                  plain.last_logits().size());
    qInfo("embedding rows of tokens vs the tokens: logit error %.3e", err);
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));  // the same inputs, the same kernels
    QCOMPARE(image.tokens(), marked);
}

void TstCudaSession::msaSelectionsAndMassAsOnTheCpu_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("top_k");
    QTest::addColumn<int>("items");  // sentences of text: 60 ~ 9 KV blocks, 320 ~ 46
    QTest::addColumn<int>("remap");  // MsaConfig::remap_window with positions Remap; 0: as trained
    QTest::newRow("hybrid") << QStringLiteral("hybrid4/group-mean/sink") << 4 << 60 << 0;
    // ask's mode at its top-k: sparse past 32 blocks (top-k 16 + window 16), growth to 98 %.
    QTest::newRow("training-free") << QString::fromLatin1(sl::kTrainingFreeMode) << 16 << 320 << 0;
    // At ~48 blocks ask's mode grows to nearly every block; a smaller top-k, window and room that
    // bind (8 + 8 + 8 of 48) test which blocks the window and the growth choose ...
    QTest::newRow("window-growth") << QStringLiteral("hybrid8/group-mean/sink/w8/p90x2") << 8 << 320 << 0;
    // ... and with remapped positions (ask past the model's trained context), a window of 1,024
    // tokens so most blocks are far.
    QTest::newRow("remapped") << QStringLiteral("hybrid8/group-mean/sink/w8/p90x2") << 8 << 320 << 1024;
}

void TstCudaSession::msaSelectionsAndMassAsOnTheCpu() {
    REQUIRE_CUDA_DEVICE();
    if (!model_) QSKIP("needs the model (generatesOnTheDevice)");
    QFETCH(QString, mode);
    QFETCH(int, top_k);
    QFETCH(int, items);
    QFETCH(int, remap);
    std::string text;
    for (int i = 0; i < items; ++i)
        text += "Item " + std::to_string(i) + ": the committee reviewed the budget of project " +
                std::to_string(i * 37 % 101) + " and decided to postpone the vote until the meeting in room " +
                std::to_string(i * 13 % 29) + ". ";
    const std::vector<int32_t> ids = model_->tokenizer->encode(text, true, false);
    sl::MsaConfig mc;
    mc.top_k = top_k;
    sl::parse_msa_scoring(mode.toStdString(), mc);
    if (remap > 0) {
        mc.positions = sl::PositionMode::Remap;
        mc.remap_window = remap;
    }
    QVERIFY(static_cast<int64_t>(ids.size()) > (mc.top_k + mc.window_blocks + 4) * 128);  // sparse
    QCOMPARE(sl::cuda_msa_lacks(mc), std::string());
    auto make = [&](const char* device, std::map<int, std::vector<sl::Selection>>& seen) {
        auto msa = std::make_unique<sl::MsaAttention>(mc);
        msa->set_token_mass(true);
        msa->set_observer([&seen](int layer, const sl::AttentionCall& call, const std::vector<sl::Selection>& s) {
            if (call.n_tokens == 1) seen[layer] = s;
        });
        sl::SessionOptions so = options(device);
        so.n_ctx = static_cast<int>(ids.size()) + 16;
        return std::make_unique<sl::Session>(*model_, so, std::move(msa));
    };
    std::map<int, std::vector<sl::Selection>> seen_gpu, seen_cpu;
    auto gpu = make("cuda", seen_gpu);
    auto cpu = make("cpu", seen_cpu);
    QVERIFY2(gpu->on_gpu(), gpu->device_reason().c_str());
    gpu->prefill(ids);
    cpu->prefill(ids);
    QVERIFY(seen_gpu.empty());  // prefill calls are not handed over (the collector ignores them too)
    int same = 0, compared = 0;
    double worst_mass = 0, worst_tokens = 0, overlap = 0;
    size_t blocks_gpu = 0, blocks_cpu = 0;
    for (int step = 0; step < 4; ++step) {
        const int32_t next = argmax(cpu->last_logits());
        QVERIFY(close_logits(gpu->last_logits(), cpu->last_logits(), "MSA session"));
        seen_gpu.clear();
        seen_cpu.clear();
        gpu->prefill(std::span<const int32_t>(&next, 1));
        cpu->prefill(std::span<const int32_t>(&next, 1));
        QCOMPARE(seen_gpu.size(), seen_cpu.size());
        for (const auto& [layer, cs] : seen_cpu) {
            const auto& gs = seen_gpu[layer];
            QCOMPARE(gs.size(), cs.size());
            for (const sl::Selection& c : cs) {
                const auto it = std::find_if(gs.begin(), gs.end(), [&](const sl::Selection& g) { return g.kv_head == c.kv_head; });
                QVERIFY(it != gs.end());
                QCOMPARE(it->q_pos0, c.q_pos0);
                QCOMPARE(it->token_mass.size(), it->blocks.size() * 128);
                ++compared;
                blocks_gpu += it->blocks.size();
                blocks_cpu += c.blocks.size();
                std::vector<int32_t> both;
                std::set_intersection(it->blocks.begin(), it->blocks.end(), c.blocks.begin(), c.blocks.end(),
                                      std::back_inserter(both));
                overlap += static_cast<double>(both.size()) /
                           static_cast<double>(it->blocks.size() + c.blocks.size() - both.size());  // Jaccard
                if (it->blocks != c.blocks) continue;
                ++same;
                for (size_t i = 0; i < c.mass.size(); ++i) worst_mass = std::max(worst_mass, double(std::abs(it->mass[i] - c.mass[i])));
                worst_tokens = std::max(worst_tokens, sl::test::normalized_error(it->token_mass.data(), c.token_mass.data(),
                                                                                 c.token_mass.size()));
            }
        }
    }
    QVERIFY(compared > 0);
    overlap /= compared;
    qInfo("MSA %s decode on the device: %d of %d selections equal the CPU's (mean overlap %.3f; %.1f blocks per "
          "selection on the device, %.1f on the CPU, of %lld visible); on the equal ones the worst block mass differs "
          "by %.4f, token masses by normalized error %.3e",
          qPrintable(mode + (remap > 0 ? QStringLiteral(" remap %1").arg(remap) : QString())), same, compared, overlap,
          double(blocks_gpu) / compared, double(blocks_cpu) / compared, static_cast<long long>((ids.size() + 4 + 127) / 128),
          worst_mass, worst_tokens);
    QVERIFY2(overlap >= 0.9, qPrintable(QString::number(overlap)));  // near-ties may flip with bf16 keys
    if (mc.top_p <= 0) QVERIFY(same * 10 >= compared * 8);  // growth: a near-tie at the target moves the count by one
    QVERIFY(same > 0);
    QVERIFY2(worst_mass < 0.03, qPrintable(QString::number(worst_mass)));
    QVERIFY2(worst_tokens < 0.1, qPrintable(QString::number(worst_tokens)));
}

void TstCudaSession::warmSessionAsRestored_data() {
    QTest::addColumn<QString>("device");
    QTest::newRow("cpu") << QStringLiteral("cpu");
    QTest::newRow("cuda") << QStringLiteral("cuda");
}

void TstCudaSession::warmSessionAsRestored() {
    QFETCH(QString, device);
    REQUIRE_DEVICE_ROW(device);
    // The CPU row checks the test itself where no device is (CI); the device run spends its
    // minutes on the device row.
    if (device == QLatin1String("cpu") && sl::cuda::probe().usable) QSKIP("the CPU row runs where there is no device");
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    if (!model_) model_ = sl::load_model(path);
    // ask's mode at its top-k over ~46 blocks, as the library context is read.
    std::string text;
    for (int i = 0; i < 320; ++i)
        text += "Item " + std::to_string(i) + ": the committee reviewed the budget of project " +
                std::to_string(i * 37 % 101) + " and decided to postpone the vote until the meeting in room " +
                std::to_string(i * 13 % 29) + ". ";
    const std::vector<int32_t> ids = model_->tokenizer->encode(text, true, false);
    const size_t saved = ids.size() - 400;  // the library prefill (mid-block)
    const std::span<const int32_t> first(ids.data() + saved, 150), next(ids.data() + saved + 150, 250);
    sl::MsaConfig mc;
    mc.top_k = 16;
    sl::parse_msa_scoring(sl::kTrainingFreeMode, mc);
    const std::string dev = device.toStdString();
    auto make = [&](std::map<int, std::vector<sl::Selection>>& seen) {
        auto msa = std::make_unique<sl::MsaAttention>(mc);
        msa->set_token_mass(true);  // the device hands decode steps' selections back with their mass only
        msa->set_observer([&seen](int layer, const sl::AttentionCall& call, const std::vector<sl::Selection>& s) {
            if (call.n_tokens == 1) seen[layer] = s;
        });
        sl::SessionOptions so = options(dev.c_str());
        so.n_ctx = static_cast<int>(ids.size()) + 64;
        so.n_batch = 128;
        return std::make_unique<sl::Session>(*model_, so, std::move(msa));
    };
    const std::string file = dir_.filePath(QStringLiteral("warm-%1.slkv").arg(device)).toStdString();
    {
        std::map<int, std::vector<sl::Selection>> unused;
        auto s = make(unused);
        s->prefill(std::span<const int32_t>(ids.data(), saved));
        s->save(file);
    }
    std::map<int, std::vector<sl::Selection>> seen_warm, seen_fresh;
    auto warm = make(seen_warm);
    QVERIFY2(warm->on_gpu() == (device == QLatin1String("cuda")), warm->device_reason().c_str());
    warm->restore(file);
    warm->prefill(first);  // the last question's units, question and answer
    sl::GenerateOptions go;
    go.max_tokens = 8;
    go.sampling.greedy = true;
    warm->generate(go, [](std::string_view) { return true; });
    warm->truncate(static_cast<int64_t>(saved));
    warm->prefill(next);
    auto fresh = make(seen_fresh);
    fresh->restore(file);
    fresh->prefill(next);
    const double err = sl::test::normalized_error(warm->last_logits().data(), fresh->last_logits().data(),
                                                  fresh->last_logits().size());
    qInfo("%s: kept and cut back vs restored afresh: logit error %.3e", dev.c_str(), err);
    QVERIFY2(err < 1e-3, qPrintable(QString::number(err)));
    QCOMPARE(argmax(warm->last_logits()), argmax(fresh->last_logits()));
    // The next decode step selects the same blocks.
    const int32_t t = argmax(fresh->last_logits());
    warm->prefill(std::span<const int32_t>(&t, 1));
    fresh->prefill(std::span<const int32_t>(&t, 1));
    QCOMPARE(seen_warm.size(), seen_fresh.size());
    QVERIFY(!seen_fresh.empty());
    for (const auto& [layer, fs] : seen_fresh) {
        const auto& ws = seen_warm[layer];
        QCOMPARE(ws.size(), fs.size());
        for (size_t i = 0; i < fs.size(); ++i) QCOMPARE(ws[i].blocks, fs[i].blocks);
    }
}

QTEST_APPLESS_MAIN(TstCudaSession)
#include "tst_cuda_session.moc"
