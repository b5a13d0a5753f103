// Session::save / Session::restore on tiny generated llama models (tests/reference/model/
// make_tiny_model.py): restored sessions give bitwise identical logits (f32 and f16 storage; int8
// too, since rounding is deterministic), for dense and MSA attention; saves after more prefill
// append; other models, other cache settings and damaged files are refused naming the file; a
// small RAM budget (pages spilled to a mapped file) gives the same logits as no budget.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_file.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/assets.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

std::unique_ptr<sl::LoadedModel> tiny(const QTemporaryDir& dir, const QString& name, int seed) {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return nullptr;
    const QString path = dir.filePath(name);
    if (!QFile::exists(path) &&
        !sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), path,
                                    QStringLiteral("--wtype"), QStringLiteral("f32"), QStringLiteral("--seed"), QString::number(seed)},
                               nullptr))
        return nullptr;
    return sl::load_model(path.toStdString());
}

std::vector<int32_t> ids(int n, int n_vocab, int salt = 0) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11 + salt * 101 + (i * i) % 13) % n_vocab);
    return t;
}

std::unique_ptr<sl::Attention> attention(bool msa, bool remap = false) {
    if (!msa) return nullptr;
    sl::MsaConfig c;
    c.block_size = 16;
    c.top_k = 3;
    if (remap) c.positions = sl::PositionMode::Remap;  // block-relative summaries too
    return std::make_unique<sl::MsaAttention>(c);
}

// 400 positions in f16 pages of 16 (a cut at 150 falls inside a page), prefill chunks of 24.
sl::SessionOptions f16_blocks_of_16() {
    sl::SessionOptions so;
    so.n_ctx = 400;
    so.n_batch = 24;
    so.kv_type = sl::KvType::F16;
    so.kv_block = 16;
    return so;
}

std::vector<float> logits(const sl::Session& s) { return {s.last_logits().begin(), s.last_logits().end()}; }

// MSA: whether two sessions' block indexes hold the same summaries of every block of every
// layer, bit for bit (BlockIndex::export_block: min, max, mean, the relative ones, absmax).
bool same_indexes(sl::Session& a, sl::Session& b) {
    auto& ma = dynamic_cast<sl::MsaAttention&>(a.attention());
    auto& mb = dynamic_cast<sl::MsaAttention&>(b.attention());
    for (int l = 0; l < a.kv_cache().n_layer(); ++l) {
        const sl::BlockIndex *ia = ma.index(l), *ib = mb.index(l);
        if (!ia || !ib || ia->n_tokens() != ib->n_tokens() || ia->floats_per_block() != ib->floats_per_block()) return false;
        std::vector<float> x(ia->floats_per_block()), y(x.size());
        for (int64_t blk = 0; blk < ia->n_blocks(); ++blk) {
            ia->export_block(blk, x.data());
            ib->export_block(blk, y.data());
            if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) return false;
        }
    }
    return true;
}

// MSA: whether a session's block index holds, bit for bit, what one built afresh from its cache's
// keys holds (the independent reference: BlockIndex::update over every key).
bool index_is_of_keys(sl::Session& s) {
    auto& msa = dynamic_cast<sl::MsaAttention&>(s.attention());
    for (int l = 0; l < s.kv_cache().n_layer(); ++l) {
        const sl::BlockIndex* ia = msa.index(l);
        if (!ia) return false;
        sl::BlockIndex fresh(ia->block_size(), ia->n_kv_head(), ia->head_dim(), ia->relative());
        fresh.update(s.kv_cache(), l, 0, ia->n_tokens());
        std::vector<float> x(ia->floats_per_block()), y(x.size());
        for (int64_t blk = 0; blk < ia->n_blocks(); ++blk) {
            ia->export_block(blk, x.data());
            fresh.export_block(blk, y.data());
            if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) return false;
        }
    }
    return true;
}

int64_t imported(sl::Session& s) { return dynamic_cast<sl::MsaAttention&>(s.attention()).stats().imported_indexes; }

std::vector<uint8_t> slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

class TstSessionSave : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void restoreGivesSameLogits_data();
    void restoreGivesSameLogits();
    void refusals();
    void budgetSameLogits_data();
    void budgetSameLogits();
    void smollm2SaveRestore();
    void truncateThenContinue_data();
    void truncateThenContinue();
    void deltaOverBase_data();
    void deltaOverBase();
    void deltaOntoHeldContext_data();
    void deltaOntoHeldContext();

private:
    QTemporaryDir dir_;
};

void TstSessionSave::restoreGivesSameLogits_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<bool>("msa");
    QTest::addColumn<int>("block");
    QTest::addColumn<bool>("remap");
    QTest::newRow("f32 dense") << static_cast<int>(sl::KvType::F32) << false << 16 << false;
    QTest::newRow("f16 dense") << static_cast<int>(sl::KvType::F16) << false << 32 << false;
    QTest::newRow("int8 dense") << static_cast<int>(sl::KvType::Int8) << false << 16 << false;
    QTest::newRow("f32 msa") << static_cast<int>(sl::KvType::F32) << true << 16 << false;
    QTest::newRow("f16 msa, pages of 24") << static_cast<int>(sl::KvType::F16) << true << 24 << false;
    QTest::newRow("f16 msa remap") << static_cast<int>(sl::KvType::F16) << true << 16 << true;
}

void TstSessionSave::restoreGivesSameLogits() {
    QFETCH(int, type);
    QFETCH(bool, msa);
    QFETCH(int, block);
    QFETCH(bool, remap);
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    QVERIFY(m);
    const int nv = m->model->config().n_vocab;
    sl::SessionOptions so;
    so.n_ctx = 400;
    so.n_batch = 24;
    so.kv_type = static_cast<sl::KvType>(type);
    so.kv_block = block;
    const std::string path = dir_.filePath(QStringLiteral("ctx-%1-%2-%3-%4.slkv").arg(type).arg(msa).arg(block).arg(remap)).toStdString();
    const auto all = ids(300, nv);
    sl::Session a(*m, so, attention(msa, remap));
    a.prefill(std::span<const int32_t>(all.data(), 150));
    a.save(path);
    const auto first = slurp(path);

    sl::Session b(*m, so, attention(msa, remap));
    b.restore(path);
    QCOMPARE(b.tokens(), a.tokens());
    QVERIFY(logits(b) == logits(a));
    // The next tokens after a restore: bitwise the same as in the session that never stopped.
    for (int i = 150; i < 160; ++i) {
        a.prefill(std::span<const int32_t>(all.data() + i, 1));
        b.prefill(std::span<const int32_t>(all.data() + i, 1));
        QVERIFY2(logits(b) == logits(a), qPrintable(QStringLiteral("token %1").arg(i)));
    }
    // MSA: the restored session's block index came from the file (every layer), not from its
    // keys, and holds what the one built from the keys as they came holds.
    if (msa) {
        QCOMPARE(imported(b), int64_t{m->model->config().n_layer});
        QVERIFY(same_indexes(a, b));
        QVERIFY(index_is_of_keys(b));
    }
    // More prefill, save again: appended (the first save's records stay byte for byte).
    a.prefill(std::span<const int32_t>(all.data() + 160, 97));
    a.save(path);
    const auto second = slurp(path);
    QVERIFY(second.size() > first.size());
    QVERIFY(std::equal(first.begin() + 512, first.end(), second.begin() + 512));
    qInfo("first save %zu bytes, after appending 107 tokens %zu bytes", first.size(), second.size());
    sl::Session c(*m, so, attention(msa, remap));
    c.restore(path);
    QCOMPARE(c.tokens(), a.tokens());
    QVERIFY(logits(c) == logits(a));
    a.prefill(std::span<const int32_t>(all.data() + 257, 5));
    c.prefill(std::span<const int32_t>(all.data() + 257, 5));
    QVERIFY(logits(c) == logits(a));
    if (msa) {  // restored from an appended file: its summaries continued from the first save's
        QVERIFY(same_indexes(a, c));
        QVERIFY(index_is_of_keys(c));
    }
    // Saving a restored session that grew, into the file it came from: appends again.
    c.save(path);
    sl::Session d(*m, so, attention(msa, remap));
    d.restore(path);
    QVERIFY(logits(d) == logits(a));
    if (msa) {  // c saved its imported-then-grown index: d's came from the file too
        d.prefill(std::span<const int32_t>(all.data() + 262, 1));
        a.prefill(std::span<const int32_t>(all.data() + 262, 1));
        QCOMPARE(imported(d), int64_t{m->model->config().n_layer});
        QVERIFY(same_indexes(a, d));
        QVERIFY(index_is_of_keys(d));
    }
    // A different context saved over the file: rewritten, not appended.
    sl::Session e(*m, so, attention(msa, remap));
    e.prefill(ids(40, nv, 7));
    e.save(path);
    sl::Session f(*m, so, attention(msa, remap));
    f.restore(path);
    QCOMPARE(f.tokens(), e.tokens());
    QVERIFY(logits(f) == logits(e));
}

void TstSessionSave::refusals() {
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    auto other = tiny(dir_, QStringLiteral("b.gguf"), 2);
    QVERIFY(m && other);
    QVERIFY(sl::model_fingerprint(*m) != sl::model_fingerprint(*other));
    QCOMPARE(sl::model_fingerprint(*m).size(), size_t{64});
    sl::SessionOptions so;
    so.n_ctx = 200;
    so.kv_block = 16;
    const std::string path = dir_.filePath(QStringLiteral("refuse.slkv")).toStdString();
    sl::Session a(*m, so);
    a.prefill(ids(100, m->model->config().n_vocab));
    a.save(path);
    auto expect_refusal = [&](const sl::LoadedModel& model, sl::SessionOptions o, const std::string& p, const char* what) {
        sl::Session s(model, o);
        s.prefill(ids(5, model.model->config().n_vocab));
        try {
            s.restore(p);
            QFAIL(qPrintable(QStringLiteral("accepted: %1").arg(QLatin1String(what))));
        } catch (const sl::Error& e) {
            const QString msg = QString::fromUtf8(e.what());
            qInfo("%s: %s", what, qPrintable(msg));
            QVERIFY2(msg.startsWith(QString::fromStdString(p)), qPrintable(msg));
            QVERIFY(s.tokens().empty());  // left empty: the caller rebuilds
        }
    };
    expect_refusal(*other, so, path, "other model");
    sl::SessionOptions o2 = so;
    o2.kv_type = sl::KvType::Int8;
    expect_refusal(*m, o2, path, "other storage type");
    o2 = so;
    o2.kv_block = 32;
    expect_refusal(*m, o2, path, "other block size");
    o2 = so;
    o2.n_ctx = 50;
    expect_refusal(*m, o2, path, "context too small");
    // Damaged copies.
    const auto good = slurp(path);
    auto write = [&](const std::vector<uint8_t>& bytes) {
        const std::string p = path + ".bad";
        std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        return p;
    };
    expect_refusal(*m, so, write(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2))), "truncated");
    // A byte of a page flipped: the restore reads no page (each is checked when first read), so
    // the first prefill finds it: DamagedContextError naming the file, the session emptied.
    const sl::KvFileContents parsed = sl::parse_kv_file(good, path, sl::KvVerify::Full);
    auto flipped = good;
    flipped[parsed.page_offset[parsed.page_offset.size() / 3] + 100] ^= 0x10;
    {
        const std::string p = write(flipped);
        sl::Session s(*m, so);
        s.restore(p);
        QCOMPARE(s.tokens().size(), size_t{100});
        QVERIFY(s.kv_cache().unchecked_pages() > 0);
        try {
            s.prefill(ids(1, m->model->config().n_vocab));
            QFAIL("read a damaged page");
        } catch (const sl::DamagedContextError& e) {
            qInfo("flipped byte of a page: %s", e.what());
            QCOMPARE(e.path(), p);
            QVERIFY2(QString::fromUtf8(e.what()).startsWith(QString::fromStdString(p)), e.what());
            QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("page checksum mismatch")));
        }
        QVERIFY(s.tokens().empty());
        QVERIFY(!s.kv_cache().damaged());
        s.prefill(ids(5, m->model->config().n_vocab));  // and goes on
        // A save of a restored context reads its pages: the damaged one is not committed under a
        // fresh checksum (nothing written), and the error names the file it came from.
        sl::Session t(*m, so);
        t.restore(p);
        const std::string copy = path + ".copy";
        try {
            t.save(copy);
            QFAIL("saved a damaged page");
        } catch (const sl::DamagedContextError& e) {
            QCOMPARE(e.path(), p);
        }
        QVERIFY(!std::filesystem::exists(copy));
        QVERIFY(!std::filesystem::exists(copy + ".tmp"));
        // ...and the session that found it does not go on from it.
        QVERIFY_THROWS_EXCEPTION(sl::DamagedContextError, t.prefill(ids(1, m->model->config().n_vocab)));
        QVERIFY(t.tokens().empty());
    }
    // A byte of the tokens or logits (the commit record): refused by the restore itself.
    auto commit = good;
    commit[good.size() - 9] ^= 0x10;
    expect_refusal(*m, so, write(commit), "flipped byte of the commit");
    expect_refusal(*m, so, write({}), "empty file");
    expect_refusal(*m, so, path + ".missing", "missing file");
    // A save over a damaged file rewrites it: every page of the file intact afterwards.
    a.save(write(flipped));
    QVERIFY(sl::parse_kv_file(slurp(path + ".bad"), path, sl::KvVerify::Full).n_tokens() == 100);
    sl::Session r(*m, so);
    r.restore(path + ".bad");
    QVERIFY(logits(r) == logits(a));
    r.prefill(ids(1, m->model->config().n_vocab));  // reads every page (dense)
    a.prefill(ids(1, m->model->config().n_vocab));
    QVERIFY(logits(r) == logits(a));
}

void TstSessionSave::budgetSameLogits_data() {
    QTest::addColumn<bool>("msa");
    QTest::newRow("dense") << false;
    QTest::newRow("msa") << true;
}

void TstSessionSave::budgetSameLogits() {
    // A RAM budget of 4 pages for a context of ~2 layers x 19 pages: most pages are spilled to the
    // mapped file, reads come from it, and logits stay bitwise the same.
    QFETCH(bool, msa);
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    QVERIFY(m);
    const int nv = m->model->config().n_vocab;
    sl::SessionOptions so;
    so.n_ctx = 320;
    so.n_batch = 32;
    so.kv_block = 16;
    sl::SessionOptions tight = so;
    const size_t page = sl::KvCache::page_bytes_for(so.kv_type, so.kv_block, m->model->config().n_kv_head, m->model->config().head_dim);
    tight.kv_budget_bytes = static_cast<int64_t>(4 * page);
    sl::Session a(*m, so, attention(msa)), b(*m, tight, attention(msa));
    const auto t = ids(300, nv, 3);
    a.prefill(t);
    b.prefill(t);
    QVERIFY(logits(a) == logits(b));
    for (int i = 0; i < 8; ++i) {
        const int32_t one[1] = {(i * 13 + 5) % nv};
        a.prefill(one);
        b.prefill(one);
        QVERIFY(logits(a) == logits(b));
    }
    QVERIFY(b.kv_cache().ram_bytes() <= 4 * page);
    QVERIFY(b.kv_cache().pages_spilled() > 0);
    qInfo("budget %zu bytes: RAM %zu of %zu bytes, %lld pages spilled, %lld reads from the map", 4 * page,
          b.kv_cache().ram_bytes(), a.kv_cache().ram_bytes(), static_cast<long long>(b.kv_cache().pages_spilled()),
          static_cast<long long>(b.kv_cache().mapped_reads()));
    // Saving a spilled session and restoring it into another budgeted one.
    const std::string path = dir_.filePath(QStringLiteral("spilled.slkv")).toStdString();
    b.save(path);
    sl::Session c(*m, tight, attention(msa)), c2(*m, so, attention(msa));
    c.restore(path);
    c2.restore(path);
    QVERIFY(logits(a) == logits(c));
    const int32_t one[1] = {7};
    a.prefill(one);
    b.prefill(one);
    c.prefill(one);
    c2.prefill(one);
    qInfo("normalized logit difference to the unbudgeted session after one more token: budgeted %g, restored "
          "into a budget %g, restored without one %g", sl::test::normalized_error(logits(b).data(), logits(a).data(), logits(a).size()),
          sl::test::normalized_error(logits(c).data(), logits(a).data(), logits(a).size()),
          sl::test::normalized_error(logits(c2).data(), logits(a).data(), logits(a).size()));
    QVERIFY(logits(a) == logits(c));
}

void TstSessionSave::smollm2SaveRestore() {
    // The default model, f16 storage (the default), a 300-token prompt with MSA over blocks of 64:
    // restore gives bitwise the same logits, also after one more token.
    REQUIRE_ASSET(path, sl::assets::kDefaultModel);
    auto m = sl::load_model(path);
    const std::vector<int32_t> t = m->tokenizer->encode(
        std::string(
            "R is a language and environment for statistical computing and graphics. It is a GNU project which is "
            "similar to the S language and environment which was developed at Bell Laboratories by John Chambers and "
            "colleagues. R can be considered as a different implementation of S. ") +
            "There are some important differences, but much code written for S runs unaltered under R. " +
            "R provides a wide variety of statistical and graphical techniques, and is highly extensible. " +
            "One of R's strengths is the ease with which well-designed publication-quality plots can be produced. " +
            "R is available as Free Software under the terms of the Free Software Foundation's GNU General Public "
            "License in source code form. It compiles and runs on a wide variety of UNIX platforms and similar systems "
            "(including FreeBSD and Linux), Windows and MacOS. The term environment is intended to characterize it as "
            "a fully planned and coherent system, rather than an incremental accretion of very specific and "
            "inflexible tools, as is frequently the case with other data analysis software.",
        true, false);
    QVERIFY2(t.size() > 150, qPrintable(QString::number(t.size())));
    sl::SessionOptions so;
    so.n_ctx = 512;
    so.kv_block = 64;
    sl::MsaConfig mc;
    mc.block_size = 64;
    mc.top_k = 2;
    sl::Session a(*m, so, std::make_unique<sl::MsaAttention>(mc));
    a.prefill(t);
    const std::string file = dir_.filePath(QStringLiteral("smollm2.slkv")).toStdString();
    a.save(file);
    sl::Session b(*m, so, std::make_unique<sl::MsaAttention>(mc));
    b.restore(file);
    QVERIFY(logits(a) == logits(b));
    const int32_t one[1] = {t[5]};
    a.prefill(one);
    b.prefill(one);
    QVERIFY(logits(a) == logits(b));
    qInfo("SmolLM2: %zu tokens saved in %lld bytes, restored with identical logits", t.size(),
          static_cast<long long>(std::filesystem::file_size(file)));
}

void TstSessionSave::truncateThenContinue_data() {
    QTest::addColumn<bool>("msa");
    QTest::addColumn<bool>("restored");
    QTest::newRow("dense") << false << false;
    QTest::newRow("msa") << true << false;
    QTest::newRow("msa, restored pages") << true << true;
}

// Session::truncate: prefix, a probe, truncate back to the prefix, then more tokens gives bitwise
// the logits of a session that never saw the probe (the cut falls inside a page; with `restored`
// the pages come from a mapped saved file).
void TstSessionSave::truncateThenContinue() {
    QFETCH(bool, msa);
    QFETCH(bool, restored);
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    QVERIFY(m);
    const int nv = m->model->config().n_vocab;
    const sl::SessionOptions so = f16_blocks_of_16();
    const auto prefix = ids(150, nv), probe = ids(45, nv, 3), more = ids(30, nv, 5);
    sl::Session ref(*m, so, attention(msa));
    ref.prefill(prefix);
    ref.prefill(more);

    sl::Session s(*m, so, attention(msa));
    if (restored) {
        sl::Session w(*m, so, attention(msa));
        w.prefill(prefix);
        w.prefill(probe);
        const std::string path = dir_.filePath(QStringLiteral("trunc-%1.slkv").arg(msa)).toStdString();
        w.save(path);
        s.restore(path);  // prefix + probe, pages mapped from the file
    } else {
        s.prefill(prefix);
        s.prefill(probe);
    }
    s.truncate(static_cast<int64_t>(prefix.size()));
    QCOMPARE(s.tokens().size(), prefix.size());
    QVERIFY(s.last_logits().empty());
    s.prefill(more);
    QCOMPARE(s.tokens(), ref.tokens());
    QVERIFY(logits(s) == logits(ref));
    if (msa) {  // restored: the file's summaries cut back with the context, the cut block summarized again
        QCOMPARE(imported(s), restored ? int64_t{m->model->config().n_layer} : int64_t{0});
        QVERIFY(same_indexes(s, ref));
        QVERIFY(index_is_of_keys(s));
    }
    QVERIFY_THROWS_EXCEPTION(sl::Error, s.truncate(10000));
}

void TstSessionSave::deltaOverBase_data() {
    QTest::addColumn<bool>("msa");
    QTest::newRow("dense") << false;
    QTest::newRow("msa") << true;
}

// Session::save_delta: a context that shares its first 150 tokens with a saved one (cut inside a
// page) is saved as a delta over it, much smaller; restored, it gives bitwise the logits of a
// session that prefilled it whole, grows by appending, and is refused naming the file when its
// base changed or is gone.
void TstSessionSave::deltaOverBase() {
    QFETCH(bool, msa);
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    QVERIFY(m);
    const int nv = m->model->config().n_vocab;
    const sl::SessionOptions so = f16_blocks_of_16();
    const auto prefix = ids(150, nv), tail = ids(60, nv, 3), more = ids(30, nv, 5), extra = ids(5, nv, 9);
    const std::string base = dir_.filePath(QStringLiteral("base-%1.slkv").arg(msa)).toStdString();
    const std::string delta = dir_.filePath(QStringLiteral("delta-%1.slkv").arg(msa)).toStdString();
    {
        sl::Session w(*m, so, attention(msa));
        w.prefill(prefix);
        w.prefill(tail);
        w.save(base);
    }
    sl::Session ref(*m, so, attention(msa));
    ref.prefill(prefix);
    ref.prefill(more);

    // The base holds 210 tokens, more than this session's context of 190: only its first 150 are restored.
    sl::SessionOptions small = so;
    small.n_ctx = 190;
    sl::Session s(*m, small, attention(msa));
    QVERIFY_THROWS_EXCEPTION(sl::Error, s.restore(base));
    s.restore(base, static_cast<int64_t>(prefix.size()));
    QCOMPARE(s.tokens(), prefix);
    QVERIFY(s.last_logits().empty());
    s.prefill(more);
    QVERIFY_THROWS_EXCEPTION(sl::Error, s.save_delta(delta, base, 151));  // the base's token 150 differs
    QVERIFY_THROWS_EXCEPTION(sl::Error, s.save_delta(delta, base, 0));
    s.save_delta(delta, base, static_cast<int64_t>(prefix.size()));
    const auto whole = std::filesystem::file_size(base), part = std::filesystem::file_size(delta);
    qInfo("base %llu bytes (210 tokens), delta %llu bytes (30 of 180 tokens its own)", static_cast<unsigned long long>(whole),
          static_cast<unsigned long long>(part));
    QVERIFY(part * 3 < whole);
    QCOMPARE(sl::kv_file_base(delta).tokens, uint64_t{150});
    QVERIFY(sl::kv_file_base(base).empty());
    std::vector<int32_t> want = prefix;
    want.insert(want.end(), more.begin(), more.end());
    QCOMPARE(sl::saved_context_tokens(delta), want);

    sl::Session r(*m, so, attention(msa));
    r.restore(delta);
    QCOMPARE(r.tokens(), want);
    QVERIFY(logits(r) == logits(ref));
    r.prefill(extra);
    ref.prefill(extra);
    QVERIFY(logits(r) == logits(ref));
    if (msa) {  // the summaries of the base's blocks from the base, the rest from the delta
        QCOMPARE(imported(r), int64_t{m->model->config().n_layer});
        QVERIFY(same_indexes(r, ref));
        QVERIFY(index_is_of_keys(r));
    }
    // Grown and saved into the same file: appended, still a delta over the same base.
    r.save(delta);
    QCOMPARE(sl::kv_file_base(delta).tokens, uint64_t{150});
    sl::Session r2(*m, so, attention(msa));
    r2.restore(delta);
    QCOMPARE(r2.tokens(), ref.tokens());
    QVERIFY(logits(r2) == logits(ref));
    // A delta is not a base.
    QVERIFY_THROWS_EXCEPTION(sl::Error, r2.save_delta(dir_.filePath(QStringLiteral("d2.slkv")).toStdString(), delta, 100));

    // A damaged page in the base's part (a byte flipped in every page before the delta's first
    // block): found when read after the restore, the error names the base, not the delta.
    {
        std::vector<uint8_t> bytes = slurp(base);
        const sl::KvFileContents bc = sl::parse_kv_file(bytes, base, sl::KvVerify::Full);
        for (int l = 0; l < m->model->config().n_layer; ++l)
            for (int64_t b = 0; b < 150 / 16; ++b) bytes[bc.page_offset[static_cast<size_t>(l * bc.n_blocks + b)] + 3] ^= 0x08;
        std::ofstream(base, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        sl::Session d(*m, so, attention(msa));
        d.restore(delta);
        try {
            d.prefill(extra);
            QFAIL("read a damaged page of the base");
        } catch (const sl::DamagedContextError& e) {
            QCOMPARE(std::filesystem::path(e.path()).lexically_normal(), std::filesystem::path(base).lexically_normal());
            QVERIFY(e.block() < 150 / 16);
        }
        QVERIFY(d.tokens().empty());
    }

    // The base rewritten with other tokens: refused, naming the delta; the session is left empty.
    {
        sl::Session w(*m, so, attention(msa));
        w.prefill(ids(200, nv, 11));
        w.save(base);
    }
    sl::Session bad(*m, so, attention(msa));
    try {
        bad.restore(delta);
        QFAIL("restored a delta whose base changed");
    } catch (const sl::FormatError& e) {
        QVERIFY2(QString::fromUtf8(e.what()).startsWith(QString::fromStdString(delta)), e.what());
    }
    QVERIFY(bad.tokens().empty());
    QVERIFY(sl::saved_context_tokens(delta).empty());
    std::filesystem::remove(base);
    QVERIFY_THROWS_EXCEPTION(sl::FormatError, bad.restore(delta));
}

void TstSessionSave::deltaOntoHeldContext_data() {
    QTest::addColumn<bool>("msa");
    QTest::addColumn<bool>("cut");
    QTest::newRow("dense") << false << false;
    QTest::newRow("msa") << true << false;
    QTest::newRow("msa, cut back first") << true << true;
}

// Session::restore_delta: a session that restored the base and went on with another question
// (its block index summarizing other tokens after the base's part) takes a delta over the base
// onto what it holds — the same tokens, logits, continuation and MSA selections, bit for bit, as a
// session that restored the delta afresh; only the delta's file is read. Refused (false, the
// session unchanged) for a whole file and for a session that does not hold the base's tokens;
// a damaged delta throws naming the file, the session unchanged.
void TstSessionSave::deltaOntoHeldContext() {
    QFETCH(bool, msa);
    QFETCH(bool, cut);
    auto m = tiny(dir_, QStringLiteral("a.gguf"), 1);
    QVERIFY(m);
    const int nv = m->model->config().n_vocab;
    const sl::SessionOptions so = f16_blocks_of_16();
    const auto prefix = ids(150, nv), tail = ids(60, nv, 3), more = ids(37, nv, 5), other = ids(90, nv, 7);
    const QString tag = QStringLiteral("%1%2").arg(msa).arg(cut);
    const std::string base = dir_.filePath(QStringLiteral("hb-%1.slkv").arg(tag)).toStdString();
    const std::string delta = dir_.filePath(QStringLiteral("hd-%1.slkv").arg(tag)).toStdString();
    {
        sl::Session w(*m, so, attention(msa));
        w.prefill(prefix);
        w.prefill(tail);
        w.save(base);
        w.truncate(static_cast<int64_t>(prefix.size()));
        w.prefill(more);
        w.save_delta(delta, base, static_cast<int64_t>(prefix.size()));
    }
    sl::Session ref(*m, so, attention(msa));
    ref.restore(delta);
    const std::vector<float> delta_logits = logits(ref);

    // Held: the base restored, then another question and answer after its first 150 tokens, so
    // that MSA summarized other keys where the delta's go.
    sl::Session h(*m, so, attention(msa));
    h.restore(base);
    h.truncate(static_cast<int64_t>(prefix.size()));
    h.prefill(other);
    const std::vector<int32_t> held = h.tokens();
    QVERIFY(!h.restore_delta(base));  // a whole file
    QCOMPARE(h.tokens(), held);
    if (cut) h.truncate(static_cast<int64_t>(prefix.size()) + 5);  // cut back past the base's part (as ask does)
    const int64_t imported_before = msa ? imported(h) : 0;
    QVERIFY(h.restore_delta(delta));
    if (msa) QCOMPARE(imported(h) - imported_before, int64_t{m->model->config().n_layer});  // onto the held index
    QCOMPARE(h.tokens(), ref.tokens());
    QVERIFY(logits(h) == logits(ref));
    QCOMPARE(h.kv_cache().n_past(), ref.kv_cache().n_past());
    // Going on: the same logits and selections at every step (a stale summary of the other
    // question's keys would change a selection).
    for (int step = 0; step < 4; ++step) {
        const auto t = step == 0 ? ids(20, nv, 9) : std::vector<int32_t>{static_cast<int32_t>((step * 13) % nv)};
        h.prefill(t);
        ref.prefill(t);
        QVERIFY2(logits(h) == logits(ref), qPrintable(QStringLiteral("step %1").arg(step)));
        if (msa) {
            QVERIFY(index_is_of_keys(h));
            QVERIFY(index_is_of_keys(ref));
            QCOMPARE(imported(ref), int64_t{m->model->config().n_layer});
            auto& ha = dynamic_cast<sl::MsaAttention&>(h.attention());
            auto& ra = dynamic_cast<sl::MsaAttention&>(ref.attention());
            for (int l = 0; l < m->model->config().n_layer; ++l) {
                const auto &a = ha.last_selections(l), &b = ra.last_selections(l);
                QCOMPARE(a.size(), b.size());
                for (size_t i = 0; i < a.size(); ++i) QVERIFY(a[i].blocks == b[i].blocks);
                // The block summaries themselves, every block.
                const sl::BlockIndex *ia = ha.index(l), *ib = ra.index(l);
                QVERIFY(ia && ib);
                QCOMPARE(ia->n_tokens(), ib->n_tokens());
                const int hd = ia->head_dim();
                for (int64_t blk = 0; blk < ia->n_blocks(); ++blk)
                    for (int kh = 0; kh < ia->n_kv_head(); ++kh)
                        QVERIFY2(std::equal(ia->kmin(blk, kh), ia->kmin(blk, kh) + 3 * hd, ib->kmin(blk, kh)),
                                 qPrintable(QStringLiteral("layer %1 block %2 head %3").arg(l).arg(blk).arg(kh)));
            }
        }
    }

    // A session that does not hold the base's first tokens, or fewer of them: false, unchanged.
    sl::Session o(*m, so, attention(msa));
    o.prefill(ids(200, nv, 11));
    QVERIFY(!o.restore_delta(delta));
    QCOMPARE(o.tokens().size(), size_t{200});
    sl::Session few(*m, so, attention(msa));
    few.prefill(std::span<const int32_t>(prefix.data(), 100));
    QVERIFY(!few.restore_delta(delta));
    QCOMPARE(few.tokens().size(), size_t{100});
    // A context too small for the delta: refused, unchanged.
    sl::SessionOptions small = so;
    small.n_ctx = 170;
    sl::Session sm(*m, small, attention(msa));
    sm.restore(base, static_cast<int64_t>(prefix.size()));
    QVERIFY_THROWS_EXCEPTION(sl::Error, sm.restore_delta(delta));
    QCOMPARE(sm.tokens(), prefix);
    // A damaged delta (a byte of its last page flipped): taken (its pages are checked when first
    // read), then the first prefill throws DamagedContextError naming it and empties the session.
    std::vector<uint8_t> bytes = slurp(delta);
    const sl::KvFileContents c = sl::parse_kv_file(bytes, delta, sl::KvVerify::Full);
    bytes[c.page_offset.back() + 7] ^= 0x40;
    const std::string bad = dir_.filePath(QStringLiteral("hbad-%1.slkv").arg(tag)).toStdString();
    {
        std::ofstream f(bad, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    sl::Session d(*m, so, attention(msa));
    d.restore(base, static_cast<int64_t>(prefix.size()));
    QVERIFY(d.restore_delta(bad));
    try {
        d.prefill(ids(3, nv, 4));
        QFAIL("read a damaged page of the delta");
    } catch (const sl::DamagedContextError& e) {
        QCOMPARE(e.path(), bad);
        QVERIFY2(QString::fromUtf8(e.what()).startsWith(QString::fromStdString(bad)), e.what());
    }
    QVERIFY(d.tokens().empty());
    // And it still takes the good one.
    d.restore(base, static_cast<int64_t>(prefix.size()));
    QVERIFY(d.restore_delta(delta));
    QCOMPARE(sl::saved_context_tokens(delta), d.tokens());
    QVERIFY(logits(d) == delta_logits);
}

QTEST_APPLESS_MAIN(TstSessionSave)
#include "tst_session_save.moc"
