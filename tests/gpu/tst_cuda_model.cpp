// SmolLM2 on the device (core/runtime/cuda_backend_model.h) against the CPU engine with f32
// activations (the path tst_llama_reference ties to the numpy reference): the logits after a
// prefill and after each of a few greedy decode steps; and the device's MSA (hybrid index) against
// the CPU's MsaAttention in the same mode on a context of a dozen blocks: the blocks each layer
// and KV group selects in decode, and the logits. Skips without a device; needs the cached model
// (scripts/setup.sh).
#include <QTest>

#include <algorithm>
#include <numeric>

#include "core/attention/msa_attention.h"
#include "core/runtime/thread_pool.h"
#include "core/kvcache/kv_cache.h"
#include "core/attention/dense_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/runtime/linear.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/assets.h"
#include "tests/common/random_llama.h"
#include "tests/common/test_support.h"
#include "tests/gpu/gpu_test_util.h"

class TstCudaModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void smollmMatchesCpu();
    void msaMatchesCpu();
    void tiersSelectAsAllResident_data();
    void tiersSelectAsAllResident();
    void thirdTierAsAllResident();
    void lazyRestoreAsAllResident();
    void kQuantModelMatchesCpu();
};

namespace {
int argmax(const std::vector<float>& v) {
    return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}
// Rank of entry i in v (0 = largest).
int rank_of(const std::vector<float>& v, int i) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [&](float x) { return x > v[static_cast<size_t>(i)]; }));
}
// At least n tokens of a maintenance log ("Item i: the valve at station ... was checked on day ...").
std::vector<int32_t> log_ids(const sl::LoadedModel& m, size_t n) {
    std::vector<int32_t> ids;
    for (int i = 0; ids.size() < n; ++i) {
        const auto part = m.tokenizer->encode("Item " + std::to_string(i) + ": the valve at station " +
                                                  std::to_string(i * 17 % 89) + " was checked on day " +
                                                  std::to_string(i % 31) + ". ", false, false);
        ids.insert(ids.end(), part.begin(), part.end());
    }
    return ids;
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

void TstCudaModel::msaMatchesCpu() {
    REQUIRE_CUDA_DEVICE();
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    std::string text;
    for (int i = 0; i < 60; ++i)
        text += "Item " + std::to_string(i) + ": the committee reviewed the budget of project " +
                std::to_string(i * 37 % 101) + " and decided to postpone the vote until the meeting in room " +
                std::to_string(i * 13 % 29) + ". ";
    const std::vector<int32_t> ids = m->tokenizer->encode(text, true, false);
    const int top_k = 4;  // of ~12 blocks: the index decides
    QVERIFY2(ids.size() > 8 * 128, "the context must span many more blocks than top_k");
    const size_t nv = static_cast<size_t>(m->model->config().n_vocab);
    const int n_layer = m->model->config().n_layer, n_kv_head = m->model->config().n_kv_head;

    sl::set_exact_activations(true);
    sl::MsaConfig mc;
    mc.block_size = 128;
    mc.top_k = top_k;
    mc.sink = true;
    mc.scoring = sl::BlockScoring::Hybrid;
    mc.hybrid_factor = 4;
    mc.index_query = sl::IndexQuery::GroupMean;
    auto msa_owned = std::make_unique<sl::MsaAttention>(mc);
    sl::MsaAttention* msa = msa_owned.get();
    sl::SessionOptions so;
    so.n_ctx = static_cast<int>(ids.size()) + 16;
    so.kv_block = 128;
    sl::Session cpu(*m, so, std::move(msa_owned));
    sl::CudaLlamaRunner gpu(*m->model, so.n_ctx, &mc);  // the same configuration on both engines
    std::vector<float> got(nv);
    const size_t split = ids.size() / 2 + 37;
    gpu.forward(ids.data(), static_cast<int>(split), got.data());
    gpu.forward(ids.data() + split, static_cast<int>(ids.size() - split), got.data());
    QCOMPARE(gpu.last_top_k(), top_k);
    cpu.prefill(ids);
    int same = 0, compared = 0;
    for (int step = 0; step < 5; ++step) {
        const std::vector<float> want(cpu.last_logits().begin(), cpu.last_logits().end());
        const double err = sl::test::normalized_error(got.data(), want.data(), nv);
        const int top = argmax(want);
        if (step > 0) {  // decode calls: one selection per layer and group on both sides
            for (int l = 0; l < n_layer; ++l) {
                const std::vector<int32_t> g = gpu.last_selection(l);
                QCOMPARE(static_cast<int>(g.size()), n_kv_head * top_k);
                for (int h = 0; h < n_kv_head; ++h) {
                    const auto& cs = msa->last_selections(l);
                    const auto it = std::find_if(cs.begin(), cs.end(), [&](const sl::Selection& x) { return x.kv_head == h; });
                    QVERIFY(it != cs.end());
                    std::vector<int32_t> gs(g.begin() + h * top_k, g.begin() + (h + 1) * top_k);
                    gs.erase(std::remove(gs.begin(), gs.end(), -1), gs.end());
                    same += gs == it->blocks;
                    ++compared;
                }
            }
        }
        qInfo("MSA step %d (%lld positions): logit error %.3e, CPU argmax %d has GPU rank %d; selections equal so far "
              "%d of %d", step, static_cast<long long>(gpu.n_past()), err, top, rank_of(got, top), same, compared);
        // Near-ties of block scores may rank differently (bf16 keys and index queries on the device,
        // f16 keys on the CPU), so a few selections may differ: allow more than the dense case.
        QVERIFY2(err < 0.2, qPrintable(QString::number(err)));
        QVERIFY(rank_of(got, top) < 4);
        const int32_t next = top;
        cpu.prefill(std::span<const int32_t>(&next, 1));
        gpu.forward(&next, 1, got.data());
    }
    sl::set_exact_activations(false);
    // Random selections would agree about once in 45 (2 of ~10 free blocks); a broken index far less.
    QVERIFY2(same * 4 >= compared * 3, qPrintable(QStringLiteral("%1 of %2 selections equal").arg(same).arg(compared)));
}

void TstCudaModel::tiersSelectAsAllResident_data() {
    QTest::addColumn<QString>("mode");
    QTest::newRow("hybrid") << QStringLiteral("hybrid4/group-mean/sink");
    // ask's mode: the window's and the growth's blocks are fetched after the selection.
    QTest::newRow("training-free") << QString::fromLatin1(sl::kTrainingFreeMode);
}

void TstCudaModel::tiersSelectAsAllResident() {
    // Memory tiers: an MSA runner whose device holds a fraction of the context's blocks (the rest in
    // pinned host memory, fetched when shortlisted) computes what the all-resident runner computes:
    // the same kernels on the same values, only the blocks' physical places differ.
    REQUIRE_CUDA_DEVICE();
    QFETCH(QString, mode);
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    const sl::LlamaConfig& c = m->model->config();
    // Long enough that the layers' blocks outnumber the budget (the packed model has 4 blocks).
    const size_t budget_blocks_ = 2 * 64 * static_cast<size_t>(c.n_kv_head) + 8;
    const size_t want_tokens = std::max<size_t>(12000, (budget_blocks_ / static_cast<size_t>(c.n_layer) + 24) * 128);
    std::vector<int32_t> ids;
    for (int i = 0; ids.size() < want_tokens; ++i) {
        const auto part = m->tokenizer->encode("Section " + std::to_string(i) + " reports that the pump at site " +
                                                   std::to_string(i * 31 % 97) + " was replaced in week " +
                                                   std::to_string(i % 52) + ". ", false, false);
        ids.insert(ids.end(), part.begin(), part.end());
    }
    sl::MsaConfig mc;
    mc.top_k = 4;
    sl::parse_msa_scoring(mode.toStdString(), mc);
    const int n_ctx = static_cast<int>(ids.size()) + 16;
    const int64_t pair = 2LL * c.n_kv_head * 128 * c.head_dim * 2;
    const int64_t blocks_needed = static_cast<int64_t>(c.n_layer) * ((n_ctx + 127) / 128);
    // The least the runner took when shortlists held up to 64 blocks; more than it needs now (the
    // widest per-group selection twice over: hybrid 2 x 10, training-free 2 x 48 at top-4).
    const int64_t budget_blocks = 2 * 64 * c.n_kv_head + 8;
    QVERIFY2(budget_blocks < blocks_needed, "the context must not fit the budget");
    sl::CudaLlamaRunner all(*m->model, n_ctx, &mc);
    sl::CudaLlamaRunner tiered(*m->model, n_ctx, &mc, budget_blocks * pair);
    QCOMPARE(tiered.kv_tiers().device_blocks, budget_blocks);
    const size_t nv = static_cast<size_t>(c.n_vocab);
    std::vector<float> a(nv), b(nv);
    for (size_t p = 0; p < ids.size(); p += 128) {  // chunks of one query block: 3 tasks' shortlists
        const int n = static_cast<int>(std::min<size_t>(128, ids.size() - p));
        all.forward(ids.data() + p, n, a.data());
        tiered.forward(ids.data() + p, n, b.data());
    }
    QCOMPARE(sl::test::normalized_error(b.data(), a.data(), nv), 0.0);
    // The whole prompt as one call: more query blocks than the budget holds at once, so the
    // runner takes it in parts at query-block boundaries (make_room threw before). The same
    // selections as the chunked runs; only the GEMMs' batch shapes differ (rounding).
    {
        sl::CudaLlamaRunner whole(*m->model, n_ctx, &mc, budget_blocks * pair);
        std::vector<float> w(nv);
        whole.forward(ids.data(), static_cast<int>(ids.size()), w.data());
        const double err = sl::test::normalized_error(w.data(), a.data(), nv);
        qInfo("tiers: the prompt as one call of %zu tokens: logit error %.2e against 128-token calls", ids.size(), err);
        QVERIFY2(err < 0.05, qPrintable(QString::number(err)));
        QVERIFY(rank_of(w, argmax(a)) < 3);
        QCOMPARE(whole.n_past(), static_cast<int64_t>(ids.size()));
    }
    for (int step = 0; step < 4; ++step) {
        const int32_t next = argmax(a);
        all.forward(&next, 1, a.data());
        tiered.forward(&next, 1, b.data());
        QCOMPARE(sl::test::normalized_error(b.data(), a.data(), nv), 0.0);
        for (int l = 0; l < c.n_layer; ++l) QCOMPARE(tiered.last_selection(l), all.last_selection(l));
    }
    const sl::CudaKvTiers t = tiered.kv_tiers();
    qInfo("tiers: %lld device blocks of %lld, %lld in the host tier; %lld fetched, %lld evicted",
          static_cast<long long>(t.device_blocks), static_cast<long long>(blocks_needed),
          static_cast<long long>(t.host_blocks), static_cast<long long>(t.fetched), static_cast<long long>(t.evicted));
    QVERIFY(t.evicted > 0);
    QVERIFY(t.fetched > 0);
    // A dense runner refuses a budget (it reads every block each call), as does one too small.
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::CudaLlamaRunner(*m->model, n_ctx, nullptr, budget_blocks * pair));
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::CudaLlamaRunner(*m->model, n_ctx, &mc, 8 * pair));
}

void TstCudaModel::thirdTierAsAllResident() {
    // The third tier: a runner whose device and host tiers together hold a fraction of a restored
    // context drops blocks the host copy holds (no copy back) and refills them from it when
    // shortlisted: the same logits and selections as the all-resident runner. A context that is
    // not saved anywhere cannot go past the two tiers: a DeviceError saying so.
    REQUIRE_CUDA_DEVICE();
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    const sl::LlamaConfig& c = m->model->config();
    const std::vector<int32_t> ids = log_ids(*m, 12000);
    sl::MsaConfig mc;
    mc.top_k = 4;
    sl::parse_msa_scoring(sl::kTrainingFreeMode, mc);
    const int n_ctx = static_cast<int>(ids.size()) + 16;
    const int64_t pair = 2LL * c.n_kv_head * 128 * c.head_dim * 2;
    const int64_t blocks_needed = static_cast<int64_t>(c.n_layer) * ((n_ctx + 127) / 128);
    const int64_t device_blocks = 2 * 64 * c.n_kv_head + 8, host_blocks = 64;
    QVERIFY2(device_blocks + host_blocks < blocks_needed, "the context must not fit the two tiers");
    sl::CudaLlamaRunner all(*m->model, n_ctx, &mc);
    const size_t nv = static_cast<size_t>(c.n_vocab);
    std::vector<float> a(nv), b(nv);
    for (size_t p = 0; p < ids.size(); p += 128) {
        const int n = static_cast<int>(std::min<size_t>(128, ids.size() - p));
        all.forward(ids.data() + p, n, a.data());
    }
    // The host copy (f32 pages: bf16 values exactly), as a save leaves it mapped.
    sl::KvCacheOptions ko;
    ko.type = sl::KvType::F32;
    ko.block_size = 128;
    sl::KvCache mirror(c.n_layer, n_ctx, c.n_kv_head, c.head_dim, ko);
    all.download_kv(mirror, 0);
    // A plain restore first: ~94 blocks a layer through the two staging rooms (32 each) in turn.
    {
        sl::CudaLlamaRunner plain(*m->model, n_ctx, &mc);
        plain.upload_kv(mirror, 0, static_cast<int64_t>(ids.size()));
        std::vector<float> pa(nv);
        const int32_t next = argmax(a);
        plain.forward(&next, 1, pa.data());
        std::vector<float> ref(nv);  // `all` goes on below: the same next token on a runner prefilled alike
        sl::CudaLlamaRunner copy_of_all(*m->model, n_ctx, &mc);
        for (size_t p = 0; p < ids.size(); p += 128)
            copy_of_all.forward(ids.data() + p, static_cast<int>(std::min<size_t>(128, ids.size() - p)), ref.data());
        copy_of_all.forward(&next, 1, ref.data());
        const double err = sl::test::normalized_error(pa.data(), ref.data(), nv);
        QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    }
    sl::CudaLlamaRunner tiered(*m->model, n_ctx, &mc, device_blocks * pair, host_blocks * pair);
    QCOMPARE(tiered.kv_tiers().host_blocks, host_blocks);
    tiered.upload_kv(mirror, 0, static_cast<int64_t>(ids.size()));
    tiered.set_backing(&mirror, static_cast<int64_t>(ids.size()));
    QVERIFY(tiered.kv_tiers().dropped > 0);  // the restore itself went past the host tier
    for (int step = 0; step < 4; ++step) {
        const int32_t next = argmax(a);
        all.forward(&next, 1, a.data());
        tiered.forward(&next, 1, b.data());
        const double err = sl::test::normalized_error(b.data(), a.data(), nv);
        QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
        for (int l = 0; l < c.n_layer; ++l) QCOMPARE(tiered.last_selection(l), all.last_selection(l));
    }
    const sl::CudaKvTiers t = tiered.kv_tiers();
    qInfo("third tier: %lld device blocks, %lld host slots of %lld blocks; %lld fetched, %lld evicted, %lld dropped, "
          "%lld refilled",
          static_cast<long long>(t.device_blocks), static_cast<long long>(t.host_blocks),
          static_cast<long long>(blocks_needed), static_cast<long long>(t.fetched), static_cast<long long>(t.evicted),
          static_cast<long long>(t.dropped), static_cast<long long>(t.refilled));
    QVERIFY(t.refilled > 0);
    // Cut back into the middle of an early block (dropped, on the host or resident: whichever,
    // the append continues it from the host copy) and go on: still the all-resident runner's.
    const int64_t cut = 20 * 128 + 77;
    all.truncate(cut);
    tiered.truncate(cut);
    const std::vector<int32_t> tail(ids.begin() + cut, ids.begin() + cut + 40);
    all.forward(tail.data(), static_cast<int>(tail.size()), a.data());
    tiered.forward(tail.data(), static_cast<int>(tail.size()), b.data());
    for (int step = 0; step < 2; ++step) {
        const double err = sl::test::normalized_error(b.data(), a.data(), nv);
        QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
        for (int l = 0; l < c.n_layer; ++l) QCOMPARE(tiered.last_selection(l), all.last_selection(l));
        const int32_t next = argmax(a);
        all.forward(&next, 1, a.data());
        tiered.forward(&next, 1, b.data());
    }
    // Prefilled without a host copy: past the two tiers nothing can leave the device.
    sl::CudaLlamaRunner unsaved(*m->model, n_ctx, &mc, device_blocks * pair, host_blocks * pair);
    try {
        for (size_t p = 0; p < ids.size(); p += 128)
            unsaved.forward(ids.data() + p, static_cast<int>(std::min<size_t>(128, ids.size() - p)), b.data());
        QFAIL("a context past both tiers, saved nowhere, was taken");
    } catch (const sl::DeviceError& e) {
        QVERIFY2(std::string(e.what()).find("none of their blocks is in a saved context") != std::string::npos, e.what());
    }
}

void TstCudaModel::lazyRestoreAsAllResident() {
    // A lazy restore (place_kv): the blocks stay in the host copy with the saved mean keys on the
    // device, and come up when a selection, the window or an append reads them: given the device's
    // own means (a save on the device writes them), the same logits and selections as the runner
    // that holds everything — with and without memory tiers — after reading a fraction of it.
    REQUIRE_CUDA_DEVICE();
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    const sl::LlamaConfig& c = m->model->config();
    std::vector<int32_t> ids = log_ids(*m, 12000);
    ids.resize(12000 - 50);  // a partial last block
    sl::MsaConfig mc;
    mc.top_k = 4;
    sl::parse_msa_scoring(sl::kTrainingFreeMode, mc);
    const int n_ctx = static_cast<int>(ids.size()) + 512;
    const auto n = static_cast<int64_t>(ids.size());
    const size_t nv = static_cast<size_t>(c.n_vocab), dkv = static_cast<size_t>(c.n_kv_head) * c.head_dim;
    sl::CudaLlamaRunner all(*m->model, n_ctx, &mc);
    std::vector<float> a(nv), b(nv), t(nv);
    for (int64_t p = 0; p < n; p += 512)
        all.forward(ids.data() + p, static_cast<int>(std::min<int64_t>(512, n - p)), a.data());
    sl::KvCacheOptions ko;
    ko.type = sl::KvType::F32;
    ko.block_size = 128;
    sl::KvCache mirror(c.n_layer, n_ctx, c.n_kv_head, c.head_dim, ko);
    all.download_kv(mirror, 0);
    std::vector<std::vector<float>> means(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
        const sl::KvBlockSummaries km = all.key_means(l);
        QCOMPARE(km.n, n);
        QCOMPARE(static_cast<size_t>(km.floats), dkv);
        auto& v = means[static_cast<size_t>(l)];
        v.resize(static_cast<size_t>((n + 127) / 128) * dkv);
        for (int64_t blk = 0; blk < (n + 127) / 128; ++blk) km.get(blk, v.data() + static_cast<size_t>(blk) * dkv);
    }
    auto get = [&](int l) { return means[static_cast<size_t>(l)]; };
    const int64_t pair = 2LL * c.n_kv_head * 128 * c.head_dim * 2;
    sl::CudaLlamaRunner lazy(*m->model, n_ctx, &mc);
    sl::CudaLlamaRunner tiered(*m->model, n_ctx, &mc, (2 * 64 * c.n_kv_head + 8) * pair, 64 * pair);
    sl::CudaLlamaRunner dense(*m->model, n_ctx, nullptr);
    QVERIFY(!dense.place_kv(mirror, n, 128, get));  // dense attention reads every block: not taken
    QVERIFY(!lazy.place_kv(mirror, n, 128, [](int) { return std::vector<float>{}; }));  // no means: not taken
    QVERIFY(lazy.place_kv(mirror, n, 128, get));
    QVERIFY(tiered.place_kv(mirror, n, 128, get));
    QCOMPARE(lazy.n_past(), n);
    QCOMPARE(lazy.kv_tiers().placed, static_cast<int64_t>(c.n_layer) * (n / 128));
    // Idle fills (fill_placed): every placed block back in slices; under a device budget none
    // (its room is the questions'), nothing moved.
    sl::CudaLlamaRunner filled(*m->model, n_ctx, &mc);
    QVERIFY(filled.place_kv(mirror, n, 128, get));
    int64_t brought = 0, slice = 0;
    while ((slice = filled.fill_placed(500)) > 0) brought += slice;
    QCOMPARE(brought, filled.kv_tiers().placed);
    qInfo("idle fill: %lld blocks back", static_cast<long long>(brought));
    QCOMPARE(tiered.fill_placed(int64_t{1} << 30), int64_t{0});
    QCOMPARE(tiered.kv_tiers().refilled, int64_t{0});
    QCOMPARE(tiered.kv_tiers().evicted, int64_t{0});
    std::vector<float> f(nv);
    for (int step = 0; step < 4; ++step) {
        const int32_t next = argmax(a);
        all.forward(&next, 1, a.data());
        lazy.forward(&next, 1, b.data());
        tiered.forward(&next, 1, t.data());
        filled.forward(&next, 1, f.data());
        const double err = sl::test::normalized_error(b.data(), a.data(), nv),
                     terr = sl::test::normalized_error(t.data(), a.data(), nv),
                     ferr = sl::test::normalized_error(f.data(), a.data(), nv);
        QVERIFY2(err < 1e-5 && terr < 1e-5 && ferr < 1e-5,
                 qPrintable(QStringLiteral("%1 %2 %3").arg(err).arg(terr).arg(ferr)));
        for (int l = 0; l < c.n_layer; ++l) {
            QCOMPARE(lazy.last_selection(l), all.last_selection(l));
            QCOMPARE(tiered.last_selection(l), all.last_selection(l));
            QCOMPARE(filled.last_selection(l), all.last_selection(l));
        }
    }
    QCOMPARE(filled.kv_tiers().refilled, brought);  // the steps found every block there
    const sl::CudaKvTiers lt = lazy.kv_tiers();
    qInfo("lazy restore: %lld blocks placed, %lld read back after 4 decode steps", static_cast<long long>(lt.placed),
          static_cast<long long>(lt.refilled));
    QVERIFY(lt.refilled > 0 && lt.refilled < lt.placed);
    // A question's prefill after it (several query blocks), then a cut into a placed block and on.
    const std::vector<int32_t> q(ids.begin() + 3000, ids.begin() + 3300);
    all.forward(q.data(), static_cast<int>(q.size()), a.data());
    lazy.forward(q.data(), static_cast<int>(q.size()), b.data());
    QVERIFY(sl::test::normalized_error(b.data(), a.data(), nv) < 1e-5);
    const int64_t cut = 40 * 128 + 33;
    all.truncate(cut);
    lazy.truncate(cut);
    all.forward(q.data(), 60, a.data());
    lazy.forward(q.data(), 60, b.data());
    QVERIFY(sl::test::normalized_error(b.data(), a.data(), nv) < 1e-5);
    for (int l = 0; l < c.n_layer; ++l) QCOMPARE(lazy.last_selection(l), all.last_selection(l));
}

void TstCudaModel::kQuantModelMatchesCpu() {
    // A Q4_K model (a type the device kernels do not take): its matrices dequantized to f16 on the
    // host's cores at upload (those of 4M values or more split over threads) — the device's logits
    // as the CPU's. The random-weight model is the 8B benchmark row's builder at a small shape.
    REQUIRE_CUDA_DEVICE();
    sl::LlamaConfig c = sl::test::llama31_8b_shape();
    c.n_layer = 4;
    c.d_model = 1024;
    c.n_ff = 4096;  // 4M values: the threaded path
    c.n_head = 8;
    c.n_kv_head = 2;
    c.head_dim = 128;
    c.n_vocab = 5000;
    const auto r = sl::test::make_random_llama(c, 3);
    std::vector<int32_t> ids(300);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % 5000);
    sl::set_exact_activations(true);
    struct Reset {
        ~Reset() { sl::set_exact_activations(false); }
    } reset;
    sl::KvCache kv(c.n_layer, 512, c.n_kv_head, c.head_dim, sl::KvCacheOptions{sl::KvType::F32, 128, 0, {}});
    sl::DenseAttention att;
    sl::ThreadPool pool(0);
    sl::ForwardScratch scratch;
    std::vector<float> want(static_cast<size_t>(c.n_vocab)), got(want.size());
    r->model->forward(ids.data(), static_cast<int>(ids.size()), 0, kv, att, pool, scratch, want.data(), false);
    sl::CudaLlamaRunner gpu(*r->model, 512);
    gpu.forward(ids.data(), static_cast<int>(ids.size()), got.data());
    const double err = sl::test::normalized_error(got.data(), want.data(), want.size());
    const int top = argmax(want);
    qInfo("Q4_K model (random weights): logit error %.3e, CPU argmax %d has GPU rank %d", err, top, rank_of(got, top));
    // f16 weights and bf16 K/V on the device: ~1e-2; a dequantized range left wrong gives O(1).
    QVERIFY2(err < 0.05, qPrintable(QString::number(err)));
    QVERIFY(rank_of(got, top) < 3);
}

QTEST_APPLESS_MAIN(TstCudaModel)
#include "tst_cuda_model.moc"
