// A Session's device branch, restores with MSA that leave the context in the file (the seam of
// host_runner.h, no GPU): a lazy restore places the saved block summaries' mean keys on the
// runner and reads pages when they are first used; a save on the device writes its own mean keys
// (read back from the first block it writes); a question's delta restores onto a lazily restored
// base; idle fills bring the rest onto the device between questions (WarmContext::fill).
// tests/gpu/tst_cuda_model lazyRestoreAsAllResident checks CudaLlamaRunner's side on a GPU.
#include <QtTest>

#include "core/ask/warm_context.h"
#include "tests/core/runtime/host_runner.h"

using namespace sl::test::device;

class TstSessionDeviceLazy : public QObject, public sl::test::device::DeviceSessionFixture {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void lazyRestoreLeavesThePagesInTheFile();
    void deviceSaveKeepsItsMeanKeys();
    void lazyBaseTakesADelta();
    void idleFillBringsThePlacedBlocks();
};

void TstSessionDeviceLazy::initTestCase() {
    if (sl::test::require_venv_python().isEmpty()) QSKIP("needs the project's venv (scripts/setup.sh) for make_tiny_model.py");
    QVERIFY(load_tiny_model());
}

// A restore on a device with MSA (DeviceRunner::place_kv): the saved block summaries' mean keys
// go to the runner instead of the context, whose pages stay unread in the file until the device
// reads them; the answer is the eager restore's; a damaged page is found when first read.
void TstSessionDeviceLazy::lazyRestoreLeavesThePagesInTheFile() {
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
void TstSessionDeviceLazy::deviceSaveKeepsItsMeanKeys() {
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
void TstSessionDeviceLazy::lazyBaseTakesADelta() {
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
void TstSessionDeviceLazy::idleFillBringsThePlacedBlocks() {
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

QTEST_GUILESS_MAIN(TstSessionDeviceLazy)
#include "tst_session_device_lazy.moc"
