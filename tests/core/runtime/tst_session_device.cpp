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

#include <map>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

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
        if (msa_) msa_->set_token_mass(record_ && n == 1);
        m_.model->forward(tokens, n, kv_.n_past(), kv_, *attention_, pool_, scratch_, logits, false, embeddings, true);
        recorded_ = record_ && n == 1;
    }
    int64_t n_past() const override { return kv_.n_past(); }
    void reset() override {
        kv_.clear();
        attention_->reset_state();
    }
    void truncate(int64_t n) override {
        if (n > kv_.n_past()) throw sl::Error("HostRunner: truncate past the context");
        kv_.set_n_past(n);
        ++truncations;
    }
    void download_kv(sl::KvCache& dst, int64_t from) const override {
        if (fail_download) throw sl::DeviceError("HostRunner: simulated download failure");
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = from; p < kv_.n_past(); ++p) {
                kv_.read(l, p, k.data(), v.data());
                dst.write(l, p, k.data(), v.data());
            }
        dst.set_n_past(kv_.n_past());
        downloaded += kv_.n_past() - from;
    }
    void upload_kv(const sl::KvCache& src, int64_t from, int64_t n) override {
        if (fail_upload) throw sl::DeviceError("HostRunner: simulated upload failure");
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
    void set_record_mass(bool on) override { record_ = on; }
    std::vector<sl::Selection> recorded_selections(int layer) const override {
        return recorded_ && msa_ ? msa_->last_selections(layer) : std::vector<sl::Selection>{};
    }

    bool fail_upload = false, fail_download = false;
    mutable int64_t downloaded = 0;
    int64_t uploaded = 0;
    int truncations = 0;

private:
    const sl::LoadedModel& m_;
    sl::ThreadPool pool_;
    sl::KvCache kv_;
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
    dev.truncate(77);
    QCOMPARE(r->truncations, 1);
    QCOMPARE(r->n_past(), int64_t{77});
    QCOMPARE(dev.kv_cache().n_past(), int64_t{77});  // the mirror shrinks with it
    dev.prefill(std::span<const int32_t>(a.data() + 77, a.size() - 77));
    QVERIFY(sl::test::normalized_error(dev.last_logits().data(), want.data(), want.size()) < 1e-5);
    // The next save brings down only what changed after the truncation.
    const int64_t before = r->downloaded;
    dev.save(dir_.filePath("t.slkv").toStdString());
    QCOMPARE(r->downloaded - before, int64_t{200 - 77});
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

QTEST_GUILESS_MAIN(TstSessionDevice)
#include "tst_session_device.moc"
