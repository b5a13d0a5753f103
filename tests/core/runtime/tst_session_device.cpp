// A Session's device branch (core/runtime/device_runner.h) on a machine without a GPU: the session
// runs on an injected runner that computes with the CPU engine in its own f32 cache, as a device
// holds its own context. Checked against sessions that run on the CPU throughout:
//   - the host cache mirrors the device only when saving: a save (and a second one that appends)
//     restores in a CPU session with the same tokens, logits and continuation, and a restore hands
//     the context to the runner, which continues from it;
//   - truncate reaches the runner and the mirror;
//   - MSA selections of decode calls, with their attention mass, reach the session's MsaAttention
//     observer (citations) as the CPU's own;
//   - a device failure (sl::DeviceError) mid-answer: the session goes on on the CPU from its mirror
//     and tokens, says so, and answers as a CPU session does.
// tests/gpu/tst_cuda_session checks the same with CudaLlamaRunner on a GPU.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/ask/warm_context.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_transfer.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"
#include "kernels/cpu/convert.h"
#include "tests/common/test_support.h"

namespace {

// A runner's f32 cache seen as a device's blocks (kv_transfer.h) of `block_size` positions: read as
// bf16, rounded as a device holds its K/V; failing with sl::DeviceError at read number `fail_at` (0: never).
class HostBlocks final : public sl::KvBlockStore {
public:
    HostBlocks(const sl::KvCache& kv, int block_size, int fail_at) : kv_(kv), B_(block_size), fail_at_(fail_at) {}
    int block_size() const override { return B_; }
    void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) override {
        if (++reads == fail_at_) throw sl::DeviceError("HostRunner: simulated download failure");
        const int64_t B = B_, hd = kv_.head_dim();
        std::fill(k, k + kv_.n_kv_head() * B * hd, uint16_t{0x7fc0});  // NaN: positions past the context
        std::fill(v, v + kv_.n_kv_head() * B * hd, uint16_t{0x7fc0});
        std::vector<float> scratch(static_cast<size_t>(hd));
        for (int64_t p = block * B; p < std::min(kv_.n_past(), (block + 1) * B); ++p)
            for (int h = 0; h < kv_.n_kv_head(); ++h) {
                const size_t at = static_cast<size_t>((h * B + p - block * B) * hd);
                sl::kernels::f32_to_bf16(k + at, kv_.k_rows(layer, h, p, 1, scratch.data()), static_cast<size_t>(hd));
                sl::kernels::f32_to_bf16(v + at, kv_.v_rows(layer, h, p, 1, scratch.data()), static_cast<size_t>(hd));
            }
    }
    void append_rows(int, int64_t, int64_t, const float*, const float*) override { throw sl::Error("HostBlocks: read only"); }
    int reads = 0;

private:
    const sl::KvCache& kv_;
    int B_, fail_at_;
};

// A "device" made of the CPU engine: its own f32 KV cache and attention (dense, or MSA with the
// session's configuration), failing with sl::DeviceError at forward call number `fail_at` (0: never).
class HostRunner final : public sl::DeviceRunner {
public:
    HostRunner(const sl::LoadedModel& m, int n_ctx, const sl::MsaConfig* msa, int fail_at, int* calls)
        : m_(m),
          pool_(1),
          kv_(m.model->config().n_layer, n_ctx, m.model->config().n_kv_head, m.model->config().head_dim,
              sl::KvCacheOptions{sl::KvType::F32, msa ? msa->block_size : 128, 0, {}}),
          fail_at_(fail_at),
          calls_(calls) {
        if (msa) {
            auto a = std::make_unique<sl::MsaAttention>(*msa);
            msa_ = a.get();
            attention_ = std::move(a);
        } else {
            attention_ = std::make_unique<sl::DenseAttention>();
        }
    }
    void forward(const int32_t* tokens, int n, float* logits, const float* embeddings) override {
        if (++*calls_ == fail_at_) throw sl::DeviceError("HostRunner: simulated device failure");
        fill();
        if (msa_) msa_->set_token_mass(record_ && n == 1);
        m_.model->forward(tokens, n, kv_.n_past(), kv_, *attention_, pool_, scratch_, logits, false, embeddings, true);
        recorded_ = record_ && n == 1;
    }
    int64_t n_past() const override { return lazy_src_ ? lazy_n_ : kv_.n_past(); }
    void reset() override {
        lazy_src_ = nullptr;
        backed = 0;
        kv_.clear();
        attention_->reset_state();
    }
    void truncate(int64_t n) override {
        fill();
        if (n > kv_.n_past()) throw sl::Error("HostRunner: truncate past the context");
        kv_.set_n_past(n);
        backed = std::min(backed, n);
        ++truncations;
    }
    void set_backing(const sl::KvCache* mirror, int64_t n) override {  // clamped as CudaLlamaRunner does
        backing = mirror;
        backed = mirror ? std::clamp<int64_t>(n, 0, n_past()) : 0;
    }
    void download_kv(sl::KvCache& dst, int64_t from) const override {
        if (fail_download) throw sl::DeviceError("HostRunner: simulated download failure");
        fill();
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = from; p < kv_.n_past(); ++p) {
                kv_.read(l, p, k.data(), v.data());
                dst.write(l, p, k.data(), v.data());
            }
        dst.set_n_past(kv_.n_past());
        downloaded += kv_.n_past() - from;
    }
    // With `streams` on, saves come straight from the "device" (KvStorePages over HostBlocks, two
    // blocks a batch so that a save reads several batches); `fail_stream_at`: the read that fails.
    bool save_pages(const sl::KvCache& mirror, int64_t from, const std::function<void(sl::KvPageSource&)>& write) const override {
        if (!streams) return false;
        fill();
        HostBlocks blocks(kv_, mirror.block_size(), fail_stream_at);
        sl::KvStorePages pages(blocks, mirror, from, kv_.n_past(), 2, 2);
        write(pages);
        streamed += kv_.n_past() - from;
        return true;
    }
    void upload_kv(const sl::KvCache& src, int64_t from, int64_t n) override {
        if (fail_upload) throw sl::DeviceError("HostRunner: simulated upload failure");
        fill();
        if (from > kv_.n_past()) throw sl::Error("HostRunner: upload after a gap");
        if (from == 0) reset();
        else truncate(from), attention_->truncate_state(from);
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = from; p < n; ++p) {
                src.read(l, p, k.data(), v.data());
                kv_.write(l, p, k.data(), v.data());
            }
        kv_.set_n_past(n);
        uploaded += n - from;
    }
    // A lazy restore, as CudaLlamaRunner's (MSA, the mirror's pages its blocks): the means kept
    // (regrouped into its blocks) for the tests to check, the K/V read from `src` only when the
    // context is first used (forward, truncate, a save), as a device reads the blocks it picks.
    bool place_kv(const sl::KvCache& src, int64_t n, int means_block,
                  const std::function<std::vector<float>(int)>& means) override {
        if (!places || !msa_ || src.block_size() != kv_.block_size()) return false;
        const size_t dkv = static_cast<size_t>(kv_.row());
        std::vector<std::vector<float>> got;
        for (int l = 0; l < kv_.n_layer(); ++l) {
            const std::vector<float> f = means(l);
            if (f.size() != static_cast<size_t>((n + means_block - 1) / means_block) * dkv) return false;
            got.push_back(sl::kv_regroup_means(f, means_block, n, kv_.block_size(), static_cast<int>(dkv)));
        }
        if (fail_upload) throw sl::DeviceError("HostRunner: simulated upload failure");
        reset();
        placed_means = std::move(got);
        lazy_src_ = &src;
        lazy_n_ = n;
        out_blocks_ = n / kv_.block_size() * kv_.n_layer();
        ++placements;
        return true;
    }
    // Idle fills: the placed context's whole blocks counted back a slice at a time (read from
    // `src` when the last one comes, or by the first step, as fill() does).
    int64_t fill_placed(int64_t max_blocks) override {
        if (fail_fill) throw sl::DeviceError("HostRunner: simulated fill failure");
        if (!lazy_src_) return 0;
        const int64_t n = std::min(max_blocks, out_blocks_);
        out_blocks_ -= n;
        ++fill_calls;
        if (out_blocks_ == 0) fill();
        return n;
    }
    // The mean keys of its own blocks, as a device keeps them (bf16), read back as CudaLlamaRunner
    // reads them: from the first block a save asks for on (counted in means_fetched).
    sl::KvBlockSummaries key_means(int layer) const override {
        fill();
        if (!msa_ || kv_.n_past() == 0) return {};
        return sl::kv_lazy_bf16_summaries(kv_.n_past(), kv_.block_size(), kv_.row(), [this, layer](int64_t b0, int64_t b1, uint16_t* dst) {
            std::vector<float> row(static_cast<size_t>(kv_.head_dim())), mean(static_cast<size_t>(kv_.row()));
            const int64_t B = kv_.block_size();
            for (int64_t b = b0; b < b1; ++b) {
                const int64_t end = std::min(kv_.n_past(), (b + 1) * B);
                std::fill(mean.begin(), mean.end(), 0.0f);
                for (int h = 0; h < kv_.n_kv_head(); ++h) {
                    float* o = mean.data() + static_cast<size_t>(h) * kv_.head_dim();
                    for (int64_t p = b * B; p < end; ++p) {
                        const float* k = kv_.k_rows(layer, h, p, 1, row.data());
                        for (int j = 0; j < kv_.head_dim(); ++j) o[j] += k[j];
                    }
                    for (int j = 0; j < kv_.head_dim(); ++j) o[j] /= static_cast<float>(end - b * B);
                }
                sl::kernels::f32_to_bf16(dst + (b - b0) * kv_.row(), mean.data(), mean.size());
                ++means_fetched;
            }
        });
    }
    void set_record_mass(bool on) override { record_ = on; }
    std::vector<sl::Selection> recorded_selections(int layer) const override {
        return recorded_ && msa_ ? msa_->last_selections(layer) : std::vector<sl::Selection>{};
    }

    bool fail_upload = false, fail_download = false, streams = false;
    bool places = false;  // takes place_kv
    bool fail_fill = false;
    int fill_calls = 0;
    int placements = 0;
    std::vector<std::vector<float>> placed_means;  // per layer, (blocks of its size, n_kv_head, head_dim)
    mutable int64_t filled = 0;                    // positions read from a placed context
    mutable int64_t means_fetched = 0;             // rows of mean keys key_means read back
    int fail_stream_at = 0;
    mutable int64_t downloaded = 0, streamed = 0;
    const sl::KvCache* backing = nullptr;  // set_backing: what the session's mirror holds
    int64_t backed = 0;
    int64_t uploaded = 0;
    int truncations = 0;

private:
    // The placed context's K/V from the mirror, once (its pages checked as they are read).
    void fill() const {
        if (!lazy_src_) return;
        const sl::KvCache& src = *lazy_src_;
        lazy_src_ = nullptr;
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = 0; p < lazy_n_; ++p) {
                src.read(l, p, k.data(), v.data());
                kv_.write(l, p, k.data(), v.data());
            }
        kv_.set_n_past(lazy_n_);
        filled += lazy_n_;
    }
    int64_t out_blocks_ = 0;  // whole blocks of a placed context not counted back yet
    mutable const sl::KvCache* lazy_src_ = nullptr;
    int64_t lazy_n_ = 0;
    const sl::LoadedModel& m_;
    sl::ThreadPool pool_;
    mutable sl::KvCache kv_;
    std::unique_ptr<sl::Attention> attention_;
    sl::MsaAttention* msa_ = nullptr;
    sl::ForwardScratch scratch_;
    int fail_at_;
    int* calls_;
    bool record_ = false, recorded_ = false;
};

std::vector<int32_t> ids(int n, int n_vocab, int salt = 0) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11 + salt * 101 + (i * i) % 13) % n_vocab);
    return t;
}

std::vector<float> copy(std::span<const float> v) { return {v.begin(), v.end()}; }

// The MSA both engines run in these tests: blocks of 32 (the session's pages), top 4.
sl::MsaConfig small_msa() {
    sl::MsaConfig mc;
    mc.block_size = 32;
    mc.top_k = 4;
    sl::parse_msa_scoring("hybrid4/group-mean/sink", mc);
    return mc;
}

// Mean keys of every block of B positions of `layer` of `kv`, (blocks, n_kv_head, head_dim).
std::vector<float> block_means(const sl::KvCache& kv, int layer, int B) {
    const int64_t n = kv.n_past(), nb = (n + B - 1) / B;
    const int hd = kv.head_dim();
    std::vector<float> out(static_cast<size_t>(nb * kv.row())), row(static_cast<size_t>(hd));
    for (int64_t b = 0; b < nb; ++b)
        for (int h = 0; h < kv.n_kv_head(); ++h) {
            std::vector<double> sum(static_cast<size_t>(hd), 0.0);
            const int64_t end = std::min(n, (b + 1) * B);
            for (int64_t p = b * B; p < end; ++p) {
                const float* k = kv.k_rows(layer, h, p, 1, row.data());
                for (int j = 0; j < hd; ++j) sum[static_cast<size_t>(j)] += k[j];
            }
            for (int j = 0; j < hd; ++j)
                out[static_cast<size_t>(b * kv.row() + h * hd + j)] = static_cast<float>(sum[static_cast<size_t>(j)] / static_cast<double>(end - b * B));
        }
    return out;
}

// Flips bits `mask` of byte `at` of the file's page record number `page` (layer * blocks + block).
void flip_page_byte(const std::string& path, size_t page, uint64_t at, int mask) {
    uint64_t off = 0;
    {
        const sl::MappedFile map(path);
        off = sl::parse_kv_file(map.bytes(), path, sl::KvVerify::Headers).page_offset[page] + at;
    }
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(off));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ mask);
    f.seekp(static_cast<std::streamoff>(off));
    f.write(&byte, 1);
}

int64_t imported(sl::Session& s) { return dynamic_cast<sl::MsaAttention&>(s.attention()).stats().imported_indexes; }

// Positions of [from, to), over every layer, where the K or V rows of `a` and `b` differ.
int differing_rows(const sl::KvCache& a, const sl::KvCache& b, int64_t from, int64_t to) {
    std::vector<float> k1(static_cast<size_t>(a.row())), v1(k1.size()), k2(k1.size()), v2(k1.size());
    int differ = 0;
    for (int l = 0; l < a.n_layer(); ++l)
        for (int64_t p = from; p < to; ++p) {
            a.read(l, p, k1.data(), v1.data());
            b.read(l, p, k2.data(), v2.data());
            differ += k1 != k2 || v1 != v2;
        }
    return differ;
}

}  // namespace

class TstSessionDevice : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void savesAndRestoresThroughTheMirror();
    void truncateReachesTheRunner();
    void msaSelectionsReachTheObserver();
    void deviceFailureGoesOnOnTheCpu_data();
    void deviceFailureGoesOnOnTheCpu();
    void restoreFailureGoesOnOnTheCpu();
    void saveFailureNamesTheFile();
    void deltaOntoHeldContextUploadsItsOwn();
    void savesStraightFromTheDevice_data();
    void savesStraightFromTheDevice();
    void streamedSaveFailureKeepsTheFile();
    void deltaSavedStraightFromTheDevice();
    void streamedSavesToOtherFiles();
    void deltaOfAContextNeverSaved();
    void deltaOverAPartlyMirroredBlock();
    void damagedBaseLeavesTheMirror();
    void lazyRestoreLeavesThePagesInTheFile();
    void deviceSaveKeepsItsMeanKeys();
    void lazyBaseTakesADelta();
    void idleFillBringsThePlacedBlocks();

private:
    sl::SessionOptions options(bool device, int fail_at = 0, const sl::MsaConfig* = nullptr) {
        sl::SessionOptions so;
        so.n_ctx = 640;
        so.n_threads = 1;
        so.n_batch = 48;
        so.kv_block = 32;
        so.device = "cpu";
        if (device)
            so.runner_factory = [this, fail_at](const sl::LoadedModel& m, const sl::MsaConfig* msa) {
                auto r = std::make_unique<HostRunner>(m, 640, msa, fail_at, &calls_);
                runner_ = r.get();
                return r;
            };
        return so;
    }
    QTemporaryDir dir_;
    std::unique_ptr<sl::LoadedModel> model_;
    int n_vocab_ = 0;
    int calls_ = 0;
    HostRunner* runner_ = nullptr;
};

void TstSessionDevice::initTestCase() {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) QSKIP("needs the project's venv (scripts/setup.sh) for make_tiny_model.py");
    const QString path = dir_.filePath("tiny.gguf");
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), path,
                                       QStringLiteral("--wtype"), QStringLiteral("f32"), QStringLiteral("--seed"),
                                       QStringLiteral("7")},
                                  nullptr));
    model_ = sl::load_model(path.toStdString());
    n_vocab_ = model_->model->config().n_vocab;
}

void TstSessionDevice::savesAndRestoresThroughTheMirror() {
    const std::vector<int32_t> a = ids(150, n_vocab_), b = ids(70, n_vocab_, 1);
    const std::string file = dir_.filePath("dev.slkv").toStdString();
    sl::Session dev(*model_, options(true));
    QVERIFY(dev.on_gpu());
    HostRunner* r = runner_;
    dev.prefill(a);
    QCOMPARE(r->downloaded, int64_t{0});  // nothing is mirrored until a save
    dev.save(file);
    QCOMPARE(r->downloaded, int64_t{150});
    dev.prefill(b);
    dev.save(file);  // appends: only the new positions come down
    QCOMPARE(r->downloaded, int64_t{220});
    const std::vector<float> saved = copy(dev.last_logits());

    sl::Session cpu(*model_, options(false));
    cpu.restore(file);
    std::vector<int32_t> all = a;
    all.insert(all.end(), b.begin(), b.end());
    QCOMPARE(cpu.tokens(), all);
    QCOMPARE(copy(cpu.last_logits()), saved);
    const int32_t next = 5;
    cpu.prefill(std::span<const int32_t>(&next, 1));
    dev.prefill(std::span<const int32_t>(&next, 1));
    // The CPU session reads the f16 file, the runner its f32 cache: close, not equal.
    QVERIFY(sl::test::normalized_error(cpu.last_logits().data(), dev.last_logits().data(), dev.last_logits().size()) < 1e-2);

    // A restore hands the context to the runner, which goes on from it.
    sl::Session dev2(*model_, options(true));
    dev2.restore(file);
    QCOMPARE(runner_->backed, int64_t{220});
    QCOMPARE(runner_->uploaded, int64_t{220});
    QCOMPARE(runner_->n_past(), int64_t{220});
    QCOMPARE(copy(dev2.last_logits()), saved);
    dev2.prefill(std::span<const int32_t>(&next, 1));
    // Both now read the file's f16 prefix; only the new token's K/V differ (f32 on the runner).
    const double err = sl::test::normalized_error(dev2.last_logits().data(), cpu.last_logits().data(), cpu.last_logits().size());
    QVERIFY2(err < 1e-3, qPrintable(QString::number(err)));
    // And a save right after a restore brings nothing down from the device: the mirror holds it.
    sl::Session dev3(*model_, options(true));
    dev3.restore(file);
    dev3.save(dir_.filePath("dev3.slkv").toStdString());
    QCOMPARE(runner_->downloaded, int64_t{0});
    sl::Session cpu3(*model_, options(false));
    cpu3.restore(dir_.filePath("dev3.slkv").toStdString());
    QCOMPARE(cpu3.tokens(), all);
}

void TstSessionDevice::truncateReachesTheRunner() {
    const std::vector<int32_t> a = ids(200, n_vocab_, 2);
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    dev.prefill(a);
    const std::vector<float> want = copy(dev.last_logits());
    dev.save(dir_.filePath("t.slkv").toStdString());
    QCOMPARE(r->backed, int64_t{200});
    dev.truncate(77);
    QCOMPARE(r->backed, int64_t{77});
    QCOMPARE(r->truncations, 1);
    QCOMPARE(r->n_past(), int64_t{77});
    QCOMPARE(dev.kv_cache().n_past(), int64_t{77});  // the mirror shrinks with it
    dev.prefill(std::span<const int32_t>(a.data() + 77, a.size() - 77));
    QVERIFY(sl::test::normalized_error(dev.last_logits().data(), want.data(), want.size()) < 1e-5);
    // The next save brings down nothing: the file holds these 200 tokens already, and the mirror
    // takes positions 77.. from its pages.
    const int64_t before = r->downloaded;
    const auto size = QFileInfo(dir_.filePath("t.slkv")).size();
    dev.save(dir_.filePath("t.slkv").toStdString());
    QCOMPARE(r->downloaded - before, int64_t{0});
    QCOMPARE(QFileInfo(dir_.filePath("t.slkv")).size(), size);
    QCOMPARE(dev.kv_cache().n_past(), int64_t{200});
    // Another prefix cut: only what changed after the truncation comes down to a new file.
    dev.truncate(150);
    dev.prefill(std::span<const int32_t>(a.data() + 150, 20));
    dev.save(dir_.filePath("t2.slkv").toStdString());
    QCOMPARE(r->downloaded - before, int64_t{170 - 150});
    sl::Session cpu(*model_, options(false));
    cpu.restore(dir_.filePath("t.slkv").toStdString());
    QCOMPARE(cpu.tokens(), a);
}

void TstSessionDevice::msaSelectionsReachTheObserver() {
    sl::MsaConfig mc;
    mc.block_size = 32;
    mc.top_k = 4;
    sl::parse_msa_scoring("hybrid4/group-mean/sink", mc);
    std::map<int, std::vector<sl::Selection>> seen[2];
    std::unique_ptr<sl::Session> s[2];
    for (int d = 0; d < 2; ++d) {
        auto msa = std::make_unique<sl::MsaAttention>(mc);
        msa->set_token_mass(true);
        msa->set_observer([&seen, d](int layer, const sl::AttentionCall& call, const std::vector<sl::Selection>& x) {
            if (call.n_tokens == 1) seen[d][layer] = x;
        });
        s[d] = std::make_unique<sl::Session>(*model_, options(d == 1, 0, &mc), std::move(msa));
    }
    QVERIFY(s[1]->on_gpu() && !s[0]->on_gpu());
    const std::vector<int32_t> a = ids(300, n_vocab_, 3);  // ~10 blocks of 32: more than top-k
    s[0]->prefill(a);
    s[1]->prefill(a);
    for (int step = 0; step < 3; ++step) {
        const int32_t next = 7 + step;
        seen[0].clear();
        seen[1].clear();
        s[0]->prefill(std::span<const int32_t>(&next, 1));
        s[1]->prefill(std::span<const int32_t>(&next, 1));
        QCOMPARE(seen[1].size(), seen[0].size());
        QVERIFY(!seen[1].empty());
        for (const auto& [layer, cs] : seen[0]) {
            const auto& ds = seen[1][layer];
            QCOMPARE(ds.size(), cs.size());
            for (size_t i = 0; i < cs.size(); ++i) {
                QCOMPARE(ds[i].blocks, cs[i].blocks);
                QCOMPARE(ds[i].token_mass.size(), cs[i].blocks.size() * 32);
                for (size_t j = 0; j < cs[i].mass.size(); ++j) QVERIFY(std::abs(ds[i].mass[j] - cs[i].mass[j]) < 1e-4f);
            }
        }
    }
    // Without citations (token_mass off) the device records nothing and the observer hears nothing.
    for (auto& x : seen) x.clear();
    dynamic_cast<sl::MsaAttention&>(s[1]->attention()).set_token_mass(false);
    const int32_t next = 3;
    s[1]->prefill(std::span<const int32_t>(&next, 1));
    QVERIFY(seen[1].empty());
}

void TstSessionDevice::deviceFailureGoesOnOnTheCpu_data() {
    QTest::addColumn<bool>("saved_first");
    QTest::addColumn<int>("fail_at");
    QTest::newRow("during the prefill, nothing saved") << false << 3;
    QTest::newRow("mid-answer, nothing saved") << false << 9;
    QTest::newRow("mid-answer, after a save") << true << 9;
}

void TstSessionDevice::deviceFailureGoesOnOnTheCpu() {
    QFETCH(bool, saved_first);
    QFETCH(int, fail_at);
    const std::vector<int32_t> a = ids(180, n_vocab_, 4);  // 4 prefill calls of 48
    sl::GenerateOptions go;
    go.max_tokens = 12;
    go.sampling.greedy = true;
    sl::Session cpu(*model_, options(false));
    cpu.prefill(a);
    std::vector<int32_t> want;
    cpu.generate(go, [](std::string_view) { return true; });
    want = cpu.tokens();

    calls_ = 0;
    sl::Session dev(*model_, options(true, fail_at));
    dev.prefill(a);
    if (saved_first) dev.save(dir_.filePath("f.slkv").toStdString());
    const sl::GenerateStats st = dev.generate(go, [](std::string_view) { return true; });
    QVERIFY(calls_ >= fail_at);  // the failure happened
    QVERIFY(!dev.on_gpu());
    QVERIFY2(dev.device_reason().rfind("CPU: the CUDA device failed (HostRunner: simulated device failure)", 0) == 0,
             dev.device_reason().c_str());
    QCOMPARE(st.generated_tokens, 12);
    QCOMPARE(dev.tokens(), want);  // the same greedy answer as on the CPU throughout
    QVERIFY(sl::test::normalized_error(dev.last_logits().data(), cpu.last_logits().data(), cpu.last_logits().size()) < 1e-3);
    // And it keeps working there: save, restore.
    dev.save(dir_.filePath("after.slkv").toStdString());
    sl::Session back(*model_, options(false));
    back.restore(dir_.filePath("after.slkv").toStdString());
    QCOMPARE(back.tokens(), want);
}

void TstSessionDevice::restoreFailureGoesOnOnTheCpu() {
    // The device fails while the restored context goes up: the session holds it on the CPU.
    const std::vector<int32_t> a = ids(130, n_vocab_, 5);
    const std::string file = dir_.filePath("r.slkv").toStdString();
    sl::Session cpu(*model_, options(false));
    cpu.prefill(a);
    cpu.save(file);
    sl::Session dev(*model_, options(true));
    runner_->fail_upload = true;
    dev.restore(file);
    QVERIFY(!dev.on_gpu());
    QVERIFY2(dev.device_reason().rfind("CPU: the CUDA device failed (HostRunner: simulated upload failure)", 0) == 0,
             dev.device_reason().c_str());
    QCOMPARE(dev.tokens(), a);
    sl::Session back(*model_, options(false));
    back.restore(file);
    const int32_t next = 9;
    dev.prefill(std::span<const int32_t>(&next, 1));
    back.prefill(std::span<const int32_t>(&next, 1));
    QCOMPARE(copy(dev.last_logits()), copy(back.last_logits()));  // both CPU sessions on the same pages
}

void TstSessionDevice::saveFailureNamesTheFile() {
    // The device fails while a save brings the context down: the save fails naming the file and
    // writes nothing; the context is still the session's (the next call falls back to the CPU).
    const std::vector<int32_t> a = ids(90, n_vocab_, 6);
    const std::string file = dir_.filePath("s.slkv").toStdString();
    calls_ = 0;
    sl::Session dev(*model_, options(true, 3));  // its 3rd forward call fails too
    dev.prefill(a);                               // 2 calls of 48
    runner_->fail_download = true;
    try {
        dev.save(file);
        QFAIL("a save whose download failed succeeded");
    } catch (const sl::DeviceError& e) {
        QVERIFY2(std::string(e.what()).rfind(file + ": cannot save: HostRunner: simulated download failure", 0) == 0, e.what());
    }
    QVERIFY(!QFile::exists(QString::fromStdString(file)));
    const int32_t next = 4;
    dev.prefill(std::span<const int32_t>(&next, 1));  // fails on the device: goes on on the CPU
    QVERIFY(!dev.on_gpu());
    dev.save(file);
    sl::Session cpu(*model_, options(false));
    cpu.prefill(a);
    cpu.prefill(std::span<const int32_t>(&next, 1));
    sl::Session back(*model_, options(false));
    back.restore(file);
    QCOMPARE(back.tokens(), cpu.tokens());
    QVERIFY(sl::test::normalized_error(dev.last_logits().data(), cpu.last_logits().data(), cpu.last_logits().size()) < 1e-5);
}

// Session::restore_delta on the device: the held context's base positions stay on the runner,
// only the delta's own positions go up; the session goes on as one restored afresh (on the CPU, and
// on the runner); when the upload fails, the context goes on on the CPU.
void TstSessionDevice::deltaOntoHeldContextUploadsItsOwn() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 6), b = ids(45, n_vocab_, 7), q = ids(70, n_vocab_, 8);
    const std::string base = dir_.filePath("db.slkv").toStdString(), delta = dir_.filePath("dd.slkv").toStdString();
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
        w.prefill(b);
        w.save_delta(delta, base, 150);
    }
    sl::Session cpu(*model_, options(false));
    cpu.restore(delta);
    for (bool fail : {false, true}) {
        sl::Session dev(*model_, options(true));
        HostRunner* r = runner_;
        dev.restore(base);
        QCOMPARE(r->uploaded, int64_t{150});
        dev.prefill(q);  // another question after the base
        const int64_t downloaded = r->downloaded;
        r->fail_upload = fail;
        QVERIFY(dev.restore_delta(delta));
        QCOMPARE(dev.tokens(), cpu.tokens());
        QCOMPARE(copy(dev.last_logits()), copy(cpu.last_logits()));
        if (fail) {  // the runner is gone (r dangles)
            QVERIFY(!dev.on_gpu());
            QVERIFY2(dev.device_reason().rfind("CPU: the CUDA device failed (HostRunner: simulated upload failure)", 0) == 0,
                     dev.device_reason().c_str());
        } else {
            QVERIFY(dev.on_gpu());
            QCOMPARE(r->downloaded, downloaded);  // nothing came down
            QCOMPARE(r->uploaded, int64_t{150 + 45});  // the base's 150 at the restore, the delta's 45 now
            QCOMPARE(r->n_past(), int64_t{195});
        }
        const int32_t next = 11;
        sl::Session fresh(*model_, options(false));
        fresh.restore(delta);
        fresh.prefill(std::span<const int32_t>(&next, 1));
        dev.prefill(std::span<const int32_t>(&next, 1));
        // Both read the files' f16 K/V; only the new token's differ on the runner (f32).
        const double err =
            sl::test::normalized_error(dev.last_logits().data(), fresh.last_logits().data(), fresh.last_logits().size());
        QVERIFY2(err < (fail ? 1e-6 : 1e-3), qPrintable(QString::number(err)));
    }
}

void TstSessionDevice::savesStraightFromTheDevice_data() {
    QTest::addColumn<bool>("msa");
    QTest::addColumn<bool>("budget");
    QTest::newRow("dense") << false << false;
    QTest::newRow("msa") << true << false;
    QTest::newRow("dense, host RAM budget") << false << true;
}

// A save on the device whose runner hands out its pages (DeviceRunner::save_pages, as
// CudaLlamaRunner does): nothing comes down into host RAM (the host cache then maps the saved
// pages from the file); the file restores on the CPU with the same tokens and logits, a second
// save appends only the new blocks, and a device failure afterwards goes on on the CPU from the
// mapped pages exactly as a CPU session restored from the file does.
void TstSessionDevice::savesStraightFromTheDevice() {
    QFETCH(bool, msa);
    QFETCH(bool, budget);
    sl::MsaConfig mc;
    mc.block_size = 32;
    mc.top_k = 4;
    sl::parse_msa_scoring("hybrid4/group-mean/sink", mc);
    auto session = [&](bool device, int fail_at) {
        std::unique_ptr<sl::Attention> att;
        if (msa) att = std::make_unique<sl::MsaAttention>(mc);
        else att = std::make_unique<sl::DenseAttention>();
        sl::SessionOptions so = options(device, fail_at, msa ? &mc : nullptr);
        if (budget) so.kv_budget_bytes = 64 * 1024;  // a few pages: the rest spills or is mapped
        return std::make_unique<sl::Session>(*model_, so, std::move(att));
    };
    const std::vector<int32_t> a = ids(150, n_vocab_, 9), b = ids(70, n_vocab_, 10);
    const std::string file = dir_.filePath(QStringLiteral("s%1%2.slkv").arg(int(msa)).arg(int(budget))).toStdString();
    calls_ = 0;
    auto dev = session(true, 7);  // 4 prefill calls of 48 for a, 2 for b: the 7th (a decode) fails
    HostRunner* r = runner_;
    r->streams = true;
    dev->prefill(a);
    QCOMPARE(r->backed, int64_t{0});
    dev->save(file);
    QCOMPARE(r->downloaded, int64_t{0});
    QCOMPARE(r->streamed, int64_t{150});
    QCOMPARE(r->backing, &dev->kv_cache());  // the runner is told what the mirror holds
    QCOMPARE(r->backed, int64_t{150});
    QCOMPARE(dev->kv_cache().n_past(), int64_t{150});
    QCOMPARE(dev->kv_cache().ram_bytes(), size_t{0});  // the mirror reads the file
    QVERIFY(dev->kv_cache().bytes() > 0);
    const auto size1 = QFileInfo(QString::fromStdString(file)).size();
    dev->prefill(b);
    dev->save(file);  // appends from the partial block at 150 on
    QCOMPARE(r->downloaded, int64_t{0});
    QCOMPARE(r->streamed, int64_t{150 + 70});
    QCOMPARE(r->backed, int64_t{220});
    QCOMPARE(dev->kv_cache().ram_bytes(), size_t{0});
    const auto size2 = QFileInfo(QString::fromStdString(file)).size();
    const int64_t page = static_cast<int64_t>(dev->kv_cache().page_bytes());
    const int n_layer = model_->model->config().n_layer;
    // Blocks 4..6 (positions 128..219) of every layer were appended, not the first four again.
    QVERIFY2(size2 - size1 < (3 * n_layer + 1) * (page + 64) + 64 * 1024, qPrintable(QString::number(size2 - size1)));
    dev->save(file);  // nothing new: the file is left alone
    QCOMPARE(QFileInfo(QString::fromStdString(file)).size(), size2);

    std::vector<int32_t> all = a;
    all.insert(all.end(), b.begin(), b.end());
    auto cpu = session(false, 0);
    cpu->restore(file);
    QCOMPARE(cpu->tokens(), all);
    QCOMPARE(copy(cpu->last_logits()), copy(dev->last_logits()));
    // The runner's bf16 blocks went into the file: what the CPU reads is close to its f32 cache.
    const int32_t next = 5;
    cpu->prefill(std::span<const int32_t>(&next, 1));
    dev->prefill(std::span<const int32_t>(&next, 1));  // the 7th call: fails, goes on on the CPU
    QVERIFY(!dev->on_gpu());
    // On the CPU from the mirror (the file's pages) and its tokens: the restored session's result.
    QCOMPARE(dev->tokens(), cpu->tokens());
    const double err = sl::test::normalized_error(dev->last_logits().data(), cpu->last_logits().data(), cpu->last_logits().size());
    QVERIFY2(err < 1e-6, qPrintable(QString::number(err)));
    // And that is the context's: a CPU session that computed it all (f16 pages, not bf16) agrees.
    auto ref = session(false, 0);
    ref->prefill(all);
    ref->prefill(std::span<const int32_t>(&next, 1));
    const double ref_err = sl::test::normalized_error(ref->last_logits().data(), cpu->last_logits().data(), cpu->last_logits().size());
    qInfo("restored from the streamed file vs computed on the CPU: normalized error %.3g", ref_err);
    // (MSA: a block picked differently over bf16 keys moves it more; damaged pages give ~0.2.)
    QVERIFY2(ref_err < (msa ? 5e-2 : 5e-3), qPrintable(QString::number(ref_err)));
}

// A device failure while a save reads the device's blocks: DeviceError naming the file, a new file
// not created, an existing one as it was (its last commit restores), the session's context its
// own; the next save, the device well again, writes it all.
void TstSessionDevice::streamedSaveFailureKeepsTheFile() {
    const std::vector<int32_t> a = ids(100, n_vocab_, 11), b = ids(120, n_vocab_, 12);
    const std::string file = dir_.filePath("sf.slkv").toStdString();
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    r->fail_stream_at = 2 * model_->model->config().n_layer + 1;  // in the second batch of two blocks
    dev.prefill(a);
    try {
        dev.save(file);
        QFAIL("a save whose device failed succeeded");
    } catch (const sl::DeviceError& e) {
        QVERIFY2(std::string(e.what()).rfind(file + ": cannot save: HostRunner: simulated download failure", 0) == 0, e.what());
    }
    QVERIFY(!QFile::exists(QString::fromStdString(file)));
    QVERIFY(!QFile::exists(QString::fromStdString(file + ".tmp")));
    r->fail_stream_at = 0;
    dev.save(file);
    const QByteArray saved = [&] {
        QFile f(QString::fromStdString(file));
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }();
    dev.prefill(b);
    r->fail_stream_at = 2 * model_->model->config().n_layer + 1;
    QVERIFY_THROWS_EXCEPTION(sl::DeviceError, dev.save(file));
    {
        sl::Session cpu(*model_, options(false));
        cpu.restore(file);
        QCOMPARE(cpu.tokens(), a);  // the last commit
        QFile f(QString::fromStdString(file));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.read(saved.size()).mid(512), saved.mid(512));  // its records untouched
    }
    r->fail_stream_at = 0;
    dev.save(file);
    sl::Session cpu(*model_, options(false));
    cpu.restore(file);
    std::vector<int32_t> all = a;
    all.insert(all.end(), b.begin(), b.end());
    QCOMPARE(cpu.tokens(), all);
    QCOMPARE(copy(cpu.last_logits()), copy(dev.last_logits()));
}

// A question's context saved as a delta on the device: only its own blocks are read from the
// device (the partial block at the base's end takes its first positions from the mirror), the
// delta restores onto the base on the CPU as the device's context, and the mirror maps it.
void TstSessionDevice::deltaSavedStraightFromTheDevice() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 13), q = ids(60, n_vocab_, 14);
    const std::string base = dir_.filePath("xb.slkv").toStdString(), delta = dir_.filePath("xd.slkv").toStdString();
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
    }
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    dev.restore(base);
    dev.prefill(q);
    dev.save_delta(delta, base, 150);
    QCOMPARE(r->downloaded, int64_t{0});
    QCOMPARE(r->streamed, int64_t{60});
    QCOMPARE(dev.kv_cache().ram_bytes(), size_t{0});
    sl::Session cpu(*model_, options(false));
    cpu.restore(delta);
    std::vector<int32_t> all = a;
    all.insert(all.end(), q.begin(), q.end());
    QCOMPARE(cpu.tokens(), all);
    QCOMPARE(copy(cpu.last_logits()), copy(dev.last_logits()));
    // The base's positions of the shared block are the base file's, bit for bit.
    sl::Session from_base(*model_, options(false));
    from_base.restore(base);
    QCOMPARE(differing_rows(cpu.kv_cache(), from_base.kv_cache(), 128, 150), 0);
    const int32_t next = 9;
    cpu.prefill(std::span<const int32_t>(&next, 1));
    dev.prefill(std::span<const int32_t>(&next, 1));
    const double err = sl::test::normalized_error(dev.last_logits().data(), cpu.last_logits().data(), cpu.last_logits().size());
    QVERIFY2(err < 1e-2, qPrintable(QString::number(err)));
}

// Saves on the device to files other than the one the mirror reads (a new file, deltas one after
// another): the blocks wholly before what the mirror holds are its own pages, the rest the
// device's; each file restores on the CPU as the context; the mirror maps the last file saved and
// lets go of the earlier one.
void TstSessionDevice::streamedSavesToOtherFiles() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 15), q = ids(60, n_vocab_, 16), q2 = ids(40, n_vocab_, 17);
    const std::string f1 = dir_.filePath("o1.slkv").toStdString(), f2 = dir_.filePath("o2.slkv").toStdString();
    const std::string d1 = dir_.filePath("o3.slkv").toStdString(), d2 = dir_.filePath("o4.slkv").toStdString(),
                      d3 = dir_.filePath("o5.slkv").toStdString();
    auto mapped = [](const std::string& path) {  // whether this process maps `path`
        std::ifstream maps("/proc/self/maps");
        for (std::string line; std::getline(maps, line);)
            if (line.find(path) != std::string::npos) return true;
        return false;
    };
    auto restores_as = [&](const std::string& path, const sl::Session& dev) {
        sl::Session cpu(*model_, options(false));
        cpu.restore(path);
        return cpu.tokens() == dev.tokens() && copy(cpu.last_logits()) == copy(dev.last_logits());
    };
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    dev.prefill(a);
    dev.save(f1);
    QVERIFY(mapped(f1));
    dev.save(f2);  // a new file: blocks 0..3 are the mirror's (mapped from f1), block 4 partly
    QVERIFY(restores_as(f2, dev));
    QVERIFY(!mapped(f1));  // the mirror reads f2 now
    QVERIFY(mapped(f2));
    dev.prefill(q);
    dev.save_delta(d1, f2, 150);
    QVERIFY(restores_as(d1, dev));
    dev.save_delta(d2, f2, 150);  // the same context again: the mirror holds it, nothing read
    QVERIFY(restores_as(d2, dev));
    dev.prefill(q2);
    dev.save_delta(d3, f2, 150);  // blocks 4..5 the mirror's (mapped from d2), then the device's
    QVERIFY(restores_as(d3, dev));
    QCOMPARE(r->downloaded, int64_t{0});
    QCOMPARE(r->streamed, int64_t{150 + 60 + 40});
    QCOMPARE(dev.kv_cache().ram_bytes(), size_t{0});
    QCOMPARE(dev.kv_cache().n_past(), int64_t{250});
}

// A delta saved on the device by a session that never saved nor restored (its base written by
// another): only the delta's blocks come from the device, and the mirror maps the rest from the base.
void TstSessionDevice::deltaOfAContextNeverSaved() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 18), q = ids(50, n_vocab_, 19);
    const std::string base = dir_.filePath("nb.slkv").toStdString(), delta = dir_.filePath("nd.slkv").toStdString();
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
    }
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    dev.prefill(a);
    dev.prefill(q);
    dev.save_delta(delta, base, 150);
    QCOMPARE(r->downloaded, int64_t{0});
    QCOMPARE(dev.kv_cache().ram_bytes(), size_t{0});
    QCOMPARE(dev.kv_cache().n_past(), int64_t{200});
    sl::Session cpu(*model_, options(false));
    cpu.restore(delta);
    QCOMPARE(cpu.tokens(), dev.tokens());
    QCOMPARE(copy(cpu.last_logits()), copy(dev.last_logits()));
    // The mirror holds the context: a device failure now goes on on the CPU from it, as the
    // restored session does.
    QCOMPARE(differing_rows(cpu.kv_cache(), dev.kv_cache(), 0, 200), 0);
}

// The mirror holds 40 positions (a save, block 1 of 32 partly), then a delta over a 150-token
// base written elsewhere: the base's blocks 1..3 and the delta's from 4 on are mapped, and the
// mirror reads as the delta restored on the CPU from position 32 on (block 0 stays the first
// save's, the device's own K/V).
void TstSessionDevice::deltaOverAPartlyMirroredBlock() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 20), q = ids(50, n_vocab_, 21);
    const std::string base = dir_.filePath("pb.slkv").toStdString(), first = dir_.filePath("pf.slkv").toStdString(),
                      delta = dir_.filePath("pd.slkv").toStdString();
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
    }
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    dev.prefill(std::span<const int32_t>(a.data(), 40));
    dev.save(first);
    QCOMPARE(r->backed, int64_t{40});
    dev.prefill(std::span<const int32_t>(a.data() + 40, 110));
    dev.prefill(q);
    dev.save_delta(delta, base, 150);
    QCOMPARE(r->backed, int64_t{200});
    QCOMPARE(dev.kv_cache().ram_bytes(), size_t{0});
    sl::Session cpu(*model_, options(false)), cpu_first(*model_, options(false));
    cpu.restore(delta);
    cpu_first.restore(first);
    QCOMPARE(cpu.tokens(), dev.tokens());
    QCOMPARE(differing_rows(cpu_first.kv_cache(), dev.kv_cache(), 0, 32), 0);
    QCOMPARE(differing_rows(cpu.kv_cache(), dev.kv_cache(), 32, 200), 0);
}

// A delta whose base has a damaged page where the mirror would map it: the save stands (the delta
// restores on the CPU), the mirror is left as it was (the 40 positions of an earlier save, nothing
// of the base) and the runner still told so.
void TstSessionDevice::damagedBaseLeavesTheMirror() {
    const std::vector<int32_t> a = ids(150, n_vocab_, 22), q = ids(30, n_vocab_, 23);
    const std::string base = dir_.filePath("db2.slkv").toStdString(), delta = dir_.filePath("dd2.slkv").toStdString(),
                      first = dir_.filePath("df2.slkv").toStdString();
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
    }
    flip_page_byte(base, 2, 100, 0x10);  // layer 0, block 2 (the mirror would map blocks 1..3 of the base)
    sl::Session dev(*model_, options(true));
    HostRunner* r = runner_;
    r->streams = true;
    dev.prefill(std::span<const int32_t>(a.data(), 40));
    dev.save(first);
    QCOMPARE(r->backed, int64_t{40});
    const size_t bytes = dev.kv_cache().bytes();
    dev.prefill(std::span<const int32_t>(a.data() + 40, 110));
    dev.prefill(q);
    dev.save_delta(delta, base, 150);  // the delta's own blocks come from the device: it stands
    QCOMPARE(dev.kv_cache().n_past(), int64_t{40});
    QCOMPARE(dev.kv_cache().bytes(), bytes);
    QCOMPARE(r->backed, int64_t{40});
    const sl::MappedFile map(delta);
    QCOMPARE(sl::parse_kv_file(map.bytes(), delta, sl::KvVerify::Full).tokens.size(), size_t{30});
    // Without the damage the same save maps the base's blocks (the check is what refused it).
    {
        sl::Session w(*model_, options(false));
        w.prefill(a);
        w.save(base);
    }
    dev.save_delta(delta, base, 150);
    QCOMPARE(dev.kv_cache().n_past(), int64_t{180});
    QCOMPARE(r->backed, int64_t{180});
}

// A restore on a device with MSA (DeviceRunner::place_kv): the saved block summaries' mean keys
// go to the runner instead of the context, whose pages stay unread in the file until the device
// reads them; the answer is the eager restore's; a damaged page is found when first read.
void TstSessionDevice::lazyRestoreLeavesThePagesInTheFile() {
    const sl::MsaConfig mc = small_msa();
    const std::vector<int32_t> a = ids(300, n_vocab_, 30), q = ids(20, n_vocab_, 31);
    const std::string file = dir_.filePath("lazy.slkv").toStdString(), dense = dir_.filePath("lazy_dense.slkv").toStdString();
    const int n_layer = model_->model->config().n_layer;
    auto session = [&](bool device) {
        return std::make_unique<sl::Session>(*model_, options(device, 0, &mc), std::make_unique<sl::MsaAttention>(mc));
    };
    {  // a CPU session's save: its MSA block summaries (min, max, mean, absmax) in blocks of 32
        auto cpu = session(false);
        cpu->prefill(a);
        cpu->save(file);
        sl::Session d(*model_, options(false));
        d.prefill(a);
        d.save(dense);  // dense attention: no summaries
    }
    auto eager = session(true);
    eager->restore(file);  // this runner does not take place_kv: every position goes up
    QCOMPARE(runner_->placements, 0);
    QCOMPARE(runner_->uploaded, int64_t{300});
    auto lazy = session(true);
    HostRunner* r = runner_;
    r->places = true;
    lazy->restore(file);
    QCOMPARE(r->placements, 1);
    QCOMPARE(r->uploaded, int64_t{0});
    QCOMPARE(r->filled, int64_t{0});
    QCOMPARE(r->n_past(), int64_t{300});
    QCOMPARE(r->backed, int64_t{300});  // the mirror (the file's pages) backs every position
    QCOMPARE(lazy->kv_cache().unchecked_pages(), int64_t{n_layer} * 10);  // not one page read
    QCOMPARE(copy(lazy->last_logits()), copy(eager->last_logits()));
    // The means it got are the blocks' mean keys (as read back from the restored pages).
    auto ref = session(false);
    ref->restore(file);
    for (int l = 0; l < n_layer; ++l) {
        const std::vector<float> want = block_means(ref->kv_cache(), l, 32);
        const std::vector<float>& got = r->placed_means[static_cast<size_t>(l)];
        QCOMPARE(got.size(), want.size());
        QVERIFY2(sl::test::normalized_error(got.data(), want.data(), want.size()) < 1e-6, qPrintable(QString::number(l)));
    }
    // It answers as the eager restore does (the runner reads the context when it first runs).
    lazy->prefill(q);
    eager->prefill(q);
    QCOMPARE(r->filled, int64_t{300});
    QCOMPARE(copy(lazy->last_logits()), copy(eager->last_logits()));
    QVERIFY(lazy->on_gpu());
    // Only the first 250 tokens (a part restore: the last block partial) are placed the same way.
    auto part = session(true);
    runner_->places = true;
    part->restore(file, 250);
    QCOMPARE(runner_->placements, 1);
    QCOMPARE(runner_->n_past(), int64_t{250});
    QCOMPARE(runner_->placed_means[0].size(), static_cast<size_t>(8 * model_->model->config().n_kv_head *
                                                                  model_->model->config().head_dim));
    // A file without summaries (dense) goes up whole.
    auto d = session(true);
    runner_->places = true;
    d->restore(dense);
    QCOMPARE(runner_->placements, 0);
    QCOMPARE(runner_->uploaded, int64_t{300});
    // A device failure in the placement: the restored context goes on on the CPU.
    auto f = session(true);
    runner_->places = true;
    runner_->fail_upload = true;
    f->restore(file);
    QVERIFY(!f->on_gpu());
    QCOMPARE(f->tokens(), a);
    f->prefill(q);
    QVERIFY(sl::test::normalized_error(f->last_logits().data(), lazy->last_logits().data(), lazy->last_logits().size()) < 1e-3);

    // A damaged page is not read by the restore; the step that first reads it reports it.
    const std::string bad = dir_.filePath("lazy_bad.slkv").toStdString();
    std::filesystem::copy_file(file, bad, std::filesystem::copy_options::overwrite_existing);
    flip_page_byte(bad, 5, 64, 0x20);  // layer 0, block 5
    auto b = session(true);
    runner_->places = true;
    b->restore(bad);
    QCOMPARE(runner_->placements, 1);
    try {
        b->prefill(q);
        QFAIL("a damaged page was read without an error");
    } catch (const sl::DamagedContextError& e) {
        QVERIFY2(std::string(e.what()).find(bad) != std::string::npos, e.what());
    }
    QVERIFY(b->tokens().empty());
}

// A save on a device writes the device's mean keys (kind 4 records of the means alone): a CPU
// restore leaves them (its index comes from the keys), a device restore places them.
void TstSessionDevice::deviceSaveKeepsItsMeanKeys() {
    const sl::MsaConfig mc = small_msa();
    const std::vector<int32_t> a = ids(250, n_vocab_, 32), q = ids(40, n_vocab_, 33);
    const std::string file = dir_.filePath("means.slkv").toStdString();
    const int n_layer = model_->model->config().n_layer;
    const auto dkv = static_cast<uint32_t>(model_->model->config().n_kv_head * model_->model->config().head_dim);
    auto session = [&](bool device) {
        return std::make_unique<sl::Session>(*model_, options(device, 0, &mc), std::make_unique<sl::MsaAttention>(mc));
    };
    auto dev = session(true);
    HostRunner* w = runner_;
    w->streams = true;
    dev->prefill(a);
    dev->save(file);
    QCOMPARE(w->means_fetched, int64_t{8} * n_layer);  // 250 positions: 8 blocks of 32
    dev->prefill(q);
    w->means_fetched = 0;
    dev->save(file);  // appended: the means continue, read back from the block holding position 250 on
    QCOMPARE(w->means_fetched, int64_t{3} * n_layer);  // blocks 7, 8, 9 of 290 positions
    {
        const sl::MappedFile map(file);
        const sl::KvFileContents c = sl::parse_kv_file(map.bytes(), file, sl::KvVerify::Full);
        for (int l = 0; l < n_layer; ++l) {
            QVERIFY(c.has_summaries(l));
            QCOMPARE(c.summary_block[static_cast<size_t>(l)], 32u);
            QCOMPARE(c.summary_floats[static_cast<size_t>(l)], dkv);
            const std::vector<float> got = sl::read_block_summaries(map.bytes(), c, l);
            const sl::KvBlockSummaries km = w->key_means(l);
            std::vector<float> want(got.size());
            QCOMPARE(want.size(), static_cast<size_t>(10) * dkv);
            for (int64_t b = 0; b < 10; ++b) km.get(b, want.data() + b * dkv);
            QCOMPARE(got, want);
        }
    }
    const int32_t next = 9;
    auto cpu = session(false);
    cpu->restore(file);
    cpu->prefill(std::span<const int32_t>(&next, 1));
    QCOMPARE(imported(*cpu), int64_t{0});  // the means alone are not an index
    auto dev2 = session(true);
    HostRunner* r = runner_;
    r->places = true;
    dev2->restore(file);
    QCOMPARE(r->placements, 1);
    for (int l = 0; l < n_layer; ++l) {
        const sl::KvBlockSummaries km = w->key_means(l);
        std::vector<float> want(static_cast<size_t>(10) * dkv);
        for (int64_t b = 0; b < 10; ++b) km.get(b, want.data() + b * dkv);
        QCOMPARE(r->placed_means[static_cast<size_t>(l)], want);
    }
    dev2->prefill(std::span<const int32_t>(&next, 1));
    // The CPU reads the f16 file, the runner its f32 copy of it: close.
    const double err = sl::test::normalized_error(dev2->last_logits().data(), cpu->last_logits().data(), cpu->last_logits().size());
    QVERIFY2(err < 1e-3, qPrintable(QString::number(err)));
    // A delta saved on the device over that file: its means from its own blocks on, the base's
    // before, placed whole by a restore of the delta.
    const std::string delta = dir_.filePath("means_delta.slkv").toStdString();
    const std::vector<int32_t> q2 = ids(50, n_vocab_, 34);
    dev->prefill(q2);
    dev->save_delta(delta, file, 290);
    auto dev3 = session(true);
    runner_->places = true;
    dev3->restore(delta);
    QCOMPARE(runner_->placements, 1);
    QCOMPARE(runner_->n_past(), int64_t{340});
    for (int l = 0; l < n_layer; ++l) {
        const sl::KvBlockSummaries km = w->key_means(l);
        std::vector<float> want(static_cast<size_t>(11) * dkv);
        for (int64_t b = 0; b < 11; ++b) km.get(b, want.data() + b * dkv);
        QCOMPARE(runner_->placed_means[static_cast<size_t>(l)], want);
    }
}

// The ask flow on a device: the library prefill (MSA, saved on the CPU) restored lazily, a
// question on it, then a question's delta restored onto it (only the delta's positions go up) —
// as a CPU restore of the delta; and the delta restored whole on a device places the base's and
// the delta's means together.
void TstSessionDevice::lazyBaseTakesADelta() {
    const sl::MsaConfig mc = small_msa();
    const std::vector<int32_t> a = ids(300, n_vocab_, 40), b = ids(45, n_vocab_, 41), q = ids(30, n_vocab_, 42);
    const std::string base = dir_.filePath("lb.slkv").toStdString(), delta = dir_.filePath("ld.slkv").toStdString();
    const int n_layer = model_->model->config().n_layer;
    auto session = [&](bool device) {
        return std::make_unique<sl::Session>(*model_, options(device, 0, &mc), std::make_unique<sl::MsaAttention>(mc));
    };
    {
        auto w = session(false);
        w->prefill(a);
        w->save(base);
        w->prefill(b);
        w->save_delta(delta, base, 300);
    }
    auto cpu = session(false);
    cpu->restore(delta);
    auto dev = session(true);
    HostRunner* r = runner_;
    r->places = true;
    dev->restore(base);
    QCOMPARE(r->placements, 1);
    dev->prefill(q);  // a question after the library
    QVERIFY(dev->restore_delta(delta));
    QCOMPARE(r->uploaded, int64_t{45});  // the delta's own positions only
    QCOMPARE(r->n_past(), int64_t{345});
    QCOMPARE(dev->tokens(), cpu->tokens());
    QCOMPARE(copy(dev->last_logits()), copy(cpu->last_logits()));
    const int32_t next = 12;
    cpu->prefill(std::span<const int32_t>(&next, 1));
    dev->prefill(std::span<const int32_t>(&next, 1));
    const double err = sl::test::normalized_error(dev->last_logits().data(), cpu->last_logits().data(), cpu->last_logits().size());
    QVERIFY2(err < 1e-3, qPrintable(QString::number(err)));
    // The delta restored whole: its means from the base's summaries, then its own.
    auto whole = session(true);
    runner_->places = true;
    whole->restore(delta);
    QCOMPARE(runner_->placements, 1);
    QCOMPARE(runner_->n_past(), int64_t{345});
    auto ref = session(false);
    ref->restore(delta);
    for (int l = 0; l < n_layer; ++l) {
        const std::vector<float> want = block_means(ref->kv_cache(), l, 32);
        const std::vector<float>& got = runner_->placed_means[static_cast<size_t>(l)];
        QCOMPARE(got.size(), want.size());
        QVERIFY2(sl::test::normalized_error(got.data(), want.data(), want.size()) < 1e-6, qPrintable(QString::number(l)));
    }
}

// Idle time after a lazy restore (the app and serve between questions: WarmContext::fill): the
// placed blocks come back a slice at a time until none is out, the context unchanged (it answers
// as an eager restore does); a damaged page found by a fill drops the held session (the next
// question restores), as does a device that fails there (a session stepped after such a failure
// goes on on the CPU); a CPU session's is kept, with nothing to fill.
void TstSessionDevice::idleFillBringsThePlacedBlocks() {
    const sl::MsaConfig mc = small_msa();
    const std::vector<int32_t> a = ids(300, n_vocab_, 40), q = ids(20, n_vocab_, 41);
    const std::string file = dir_.filePath("fill.slkv").toStdString();
    const int n_layer = model_->model->config().n_layer;
    auto session = [&](bool device) {
        return std::make_unique<sl::Session>(*model_, options(device, 0, &mc), std::make_unique<sl::MsaAttention>(mc));
    };
    {
        auto cpu = session(false);
        cpu->prefill(a);
        cpu->save(file);
    }
    auto held = [&](std::unique_ptr<sl::Session> s) {
        sl::WarmSession w;
        w.session = std::move(s);
        w.key = file;
        w.saved = 300;
        return w;
    };
    auto lazy = session(true);
    HostRunner* r = runner_;
    r->places = true;
    lazy->restore(file);
    QCOMPARE(r->placements, 1);
    QCOMPARE(lazy->fill_device(0), int64_t{0});
    QCOMPARE(lazy->fill_device(4), int64_t{4});
    sl::WarmContext warm;
    warm.keep(held(std::move(lazy)), true);
    int64_t total = 4, n = 0;
    while ((n = warm.fill(7)) > 0) total += n;
    QCOMPARE(total, int64_t{n_layer} * 9);  // 300 positions: 9 whole blocks of 32 a layer
    QCOMPARE(r->filled, int64_t{300});
    QCOMPARE(r->fill_calls, (n_layer * 9 - 4 + 6) / 7 + 1);
    QVERIFY(warm.holds());
    QCOMPARE(warm.fill(7), int64_t{0});  // nothing left: none brought, the session kept
    QVERIFY(warm.holds());
    sl::WarmSession back = warm.take(file, 0);
    QVERIFY(back.session && back.session->on_gpu());
    auto whole = session(true);  // a restore that uploads every position
    whole->restore(file);
    QCOMPARE(runner_->placements, 0);
    back.session->prefill(q);
    whole->prefill(q);
    QCOMPARE(copy(back.session->last_logits()), copy(whole->last_logits()));

    // A damaged page: found by the fill that reads it; the held session is dropped.
    const std::string bad = dir_.filePath("fill_bad.slkv").toStdString();
    std::filesystem::copy_file(file, bad, std::filesystem::copy_options::overwrite_existing);
    flip_page_byte(bad, 4, 64, 0x20);  // layer 0, block 4
    auto b = session(true);
    runner_->places = true;
    b->restore(bad);
    QCOMPARE(runner_->placements, 1);
    warm.keep(held(std::move(b)), true);
    while (warm.fill() > 0) {
    }
    QVERIFY(!warm.holds());
    // A device failure in a fill: the context goes on on the CPU; the held session is dropped.
    auto f = session(true);
    runner_->places = true;
    f->restore(file);
    runner_->fail_fill = true;
    QVERIFY_THROWS_EXCEPTION(sl::DeviceError, f->fill_device(8));
    QVERIFY(f->on_gpu());  // nothing recomputed in idle time: the next step goes on on the CPU
    f->prefill(q);
    QVERIFY(!f->on_gpu());
    QVERIFY(f->device_reason().find("simulated fill failure") != std::string::npos);
    std::vector<int32_t> aq = a;
    aq.insert(aq.end(), q.begin(), q.end());
    QCOMPARE(f->tokens(), aq);
    QVERIFY(sl::test::normalized_error(f->last_logits().data(), whole->last_logits().data(), whole->last_logits().size()) < 1e-3);
    auto f2 = session(true);
    runner_->places = true;
    f2->restore(file);
    runner_->fail_fill = true;
    warm.keep(held(std::move(f2)), true);
    QCOMPARE(warm.fill(), int64_t{0});
    QVERIFY(!warm.holds());
    // A CPU session: nothing to fill, kept.
    auto cpu = session(false);
    cpu->restore(file);
    QCOMPARE(cpu->fill_device(8), int64_t{0});
    warm.keep(held(std::move(cpu)), true);
    QCOMPARE(warm.fill(), int64_t{0});
    QVERIFY(warm.holds());
}

QTEST_GUILESS_MAIN(TstSessionDevice)
#include "tst_session_device.moc"
