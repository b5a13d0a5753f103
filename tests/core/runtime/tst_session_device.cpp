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

#include "tests/core/runtime/host_runner.h"

using namespace sl::test::device;

class TstSessionDevice : public QObject, public sl::test::device::DeviceSessionFixture {
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
};

void TstSessionDevice::initTestCase() {
    if (sl::test::require_venv_python().isEmpty()) QSKIP("needs the project's venv (scripts/setup.sh) for make_tiny_model.py");
    QVERIFY(load_tiny_model());
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

QTEST_GUILESS_MAIN(TstSessionDevice)
#include "tst_session_device.moc"
