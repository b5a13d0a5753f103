// Native MSA (a model's own learned indexer, MiniMax-M3 style; /work/shared/MSA.md) against the
// independent numpy reference (tests/reference/model/gguf_llama_ref.py --msa native) on tiny random
// models written by make_tiny_model.py --msa: GQA, a dense leading layer, several blocks and top-k
// below the block count. Logits of every position (normalized error) and the selections of every
// sparse layer, for one prefill call and for chunked prefill + decode; top-k covering every block
// equals dense; hostile indexer metadata and shapes are refused naming the tensor or key; restored
// contexts (whose index keys are gone) fall back to training-free block-max, and continue natively
// when the keys are supplied.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <map>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention/block_select.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

// Tiny GQA model: 3 layers (layer 0 dense), 4 query / 2 KV heads of dim 16, blocks of 8, top-3.
constexpr int kBlock = 8;
constexpr int kTopK = 3;
constexpr double kTol = 1e-4;  // f32 weights and activations; KV stored f32

// (q_pos0, n_queries, kv group, blocks): one selection, as the reference prints it.
using Sel = std::tuple<int64_t, int, int, std::vector<int32_t>>;
using Selections = std::map<int, std::vector<Sel>>;  // by layer

QString csv(const std::vector<int32_t>& v) {
    QStringList s;
    for (int32_t x : v) s << QString::number(x);
    return s.join(QLatin1Char(','));
}

bool make_model(const QString& path, const QStringList& extra, unsigned seed) {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return false;
    const QStringList args = QStringList{sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), path,
                                         QStringLiteral("--seed"), QString::number(seed), QStringLiteral("--n-layers"),
                                         QStringLiteral("3"), QStringLiteral("--n-heads"), QStringLiteral("4"),
                                         QStringLiteral("--n-kv-heads"), QStringLiteral("2"), QStringLiteral("--msa"),
                                         QStringLiteral("--msa-top-k"), QString::number(kTopK), QStringLiteral("--msa-block-size"),
                                         QString::number(kBlock), QStringLiteral("--msa-dense-layers"), QStringLiteral("1")} +
                             extra;
    return sl::test::run_process(py, args, nullptr);
}

// The reference's all-position logits (and selections) for `ids`; `calls`: the engine's call sizes.
bool reference(const QString& model, const std::vector<int32_t>& ids, const QStringList& extra, std::vector<float>* logits,
               Selections* sel) {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return false;
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("logits.bin"));
    QStringList args{sl::test::reference_script(QStringLiteral("model/gguf_llama_ref.py")), model, QStringLiteral("--tokens"),
                     csv(ids), QStringLiteral("--logits-out"), out, QStringLiteral("--msa-selections")};
    args += extra;
    QByteArray stdout_bytes;
    if (!sl::test::run_process(py, args, &stdout_bytes, 300000)) return false;
    QFile f(out);
    if (!f.open(QIODevice::ReadOnly)) return false;
    const QByteArray raw = f.readAll();
    logits->resize(static_cast<size_t>(raw.size()) / sizeof(float));
    std::memcpy(logits->data(), raw.constData(), logits->size() * sizeof(float));
    if (sel) {
        QJsonObject o;
        for (const QByteArray& line : stdout_bytes.split('\n'))
            if (line.startsWith('{')) o = QJsonDocument::fromJson(line).object();
        const QJsonObject s = o.value(QStringLiteral("msa_selections")).toObject();
        for (auto it = s.begin(); it != s.end(); ++it)
            for (const auto& e : it.value().toArray()) {
                const QJsonArray a = e.toArray();
                std::vector<int32_t> blocks;
                for (const auto& b : a[3].toArray()) blocks.push_back(b.toInt());
                (*sel)[it.key().toInt()].emplace_back(a[0].toInteger(), a[1].toInt(), a[2].toInt(), blocks);
            }
    }
    return true;
}

// Options of the saved-context tests: a small f32 cache in this model's blocks, on the CPU.
sl::SessionOptions small_session() {
    sl::SessionOptions so;
    so.n_ctx = 128;
    so.n_batch = 16;
    so.kv_type = sl::KvType::F32;
    so.kv_block = kBlock;
    so.device = "cpu";
    return so;
}

struct EngineRun {
    std::vector<float> logits;  // (n, n_vocab): every position
    Selections sel;             // every call's selections, by layer
    sl::MsaStats stats;
};

// Runs `ids` through the model in forward calls of the sizes in `calls` (the rest as one call),
// with `att` (MSA or dense).
EngineRun run_engine(const sl::LoadedModel& m, const std::vector<int32_t>& ids, sl::Attention& att,
                     const std::vector<int>& calls = {}) {
    const auto& c = m.model->config();
    const int nv = c.n_vocab;
    sl::ThreadPool pool(2);
    sl::KvCacheOptions ko;
    ko.block_size = kBlock;
    sl::KvCache kv(c.n_layer, static_cast<int>(ids.size()), c.n_kv_head, c.head_dim, ko);
    sl::ForwardScratch scratch;
    EngineRun r;
    r.logits.resize(ids.size() * static_cast<size_t>(nv));
    auto* msa = dynamic_cast<sl::MsaAttention*>(&att);
    if (msa)
        msa->set_observer([&](int layer, const sl::AttentionCall&, const std::vector<sl::Selection>& sels) {
            for (const auto& s : sels) r.sel[layer].emplace_back(s.q_pos0, s.n_queries, s.kv_head, s.blocks);
        });
    size_t pos = 0, ci = 0;
    while (pos < ids.size()) {
        const size_t n = ci < calls.size() ? std::min<size_t>(static_cast<size_t>(calls[ci++]), ids.size() - pos) : ids.size() - pos;
        m.model->forward(ids.data() + pos, static_cast<int>(n), static_cast<int64_t>(pos), kv, att, pool, scratch,
                         r.logits.data() + pos * static_cast<size_t>(nv), true);
        pos += n;
    }
    if (msa) {
        r.stats = msa->stats();
        msa->set_observer({});
    }
    return r;
}

// Worst per-position normalized error of a against b, (rows, nv).
double worst_error(const std::vector<float>& a, const std::vector<float>& b, int nv) {
    double worst = 0;
    for (size_t r = 0; r < b.size() / static_cast<size_t>(nv); ++r)
        worst = std::max(worst, sl::test::normalized_error(a.data() + r * nv, b.data() + r * nv, static_cast<size_t>(nv)));
    return worst;
}

std::vector<int32_t> random_ids(int n, int n_vocab) {
    std::uniform_int_distribution<int> tok(0, n_vocab - 1);
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(tok(sl::test::rng()));
    return ids;
}

QString first_difference(const Selections& got, const Selections& want) {
    for (const auto& [layer, w] : want) {
        const auto it = got.find(layer);
        if (it == got.end()) return QStringLiteral("layer %1: no selections").arg(layer);
        if (it->second.size() != w.size()) return QStringLiteral("layer %1: %2 selections, want %3").arg(layer).arg(it->second.size()).arg(w.size());
        for (size_t i = 0; i < w.size(); ++i)
            if (it->second[i] != w[i])
                return QStringLiteral("layer %1 query block at %2 group %3: blocks %4, want %5")
                    .arg(layer).arg(std::get<0>(w[i])).arg(std::get<2>(w[i])).arg(csv(std::get<3>(it->second[i])), csv(std::get<3>(w[i])));
    }
    return {};
}

}  // namespace

class TstMsaNative : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void loaderReadsIndexer();
    void prefillMatchesReference();
    void chunkedPrefillAndDecodeMatchReference();
    void suppliedKeysContinueAContext();
    void topKCoveringEveryBlockEqualsDense();
    void hostileIndexer_data();
    void hostileIndexer();
    void nativeWithoutIndexerIsAnError();
    void restoredContextKeepsIndexKeys();
    void restoredContextWithoutKeysFallsBackToTrainingFree();
    void deltaOntoHeldContextKeepsIndex();
    void minimaxM3MatchesReference();
    void minimaxM3SessionSavesAndRestores();
    void prunedSelectionEqualsBruteForce_data();
    void prunedSelectionEqualsBruteForce();

private:
    QTemporaryDir dir_;
    QString model_;
    std::unique_ptr<sl::LoadedModel> m_;
    sl::MsaConfig native_;
};

void TstMsaNative::initTestCase() {
    model_ = dir_.filePath(QStringLiteral("tiny_msa.gguf"));
    QVERIFY(make_model(model_, {}, static_cast<unsigned>(sl::test::rng()() % 100000)));
    m_ = sl::load_model(model_.toStdString());
    native_ = sl::native_msa_config(m_->model->config(), {});
}

void TstMsaNative::loaderReadsIndexer() {
    const auto& c = m_->model->config();
    QVERIFY(c.has_indexer());
    QCOMPARE(c.indexer.n_head, c.n_kv_head);
    QCOMPARE(c.indexer.head_dim, c.head_dim);
    QCOMPARE(c.indexer.top_k, kTopK);
    QCOMPARE(c.indexer.block_size, kBlock);
    QCOMPARE(c.indexer.dense_layers, 1);
    QVERIFY(!m_->model->weights().layers[0].has_indexer());
    for (int l = 1; l < c.n_layer; ++l) {
        const auto& L = m_->model->weights().layers[static_cast<size_t>(l)];
        QVERIFY(L.has_indexer() && L.idx_q_norm && L.idx_k_norm);
        QCOMPARE(L.idx_wq.ne1, static_cast<int64_t>(c.indexer.n_head) * c.indexer.head_dim);
        QCOMPARE(L.idx_wk.ne1, static_cast<int64_t>(c.indexer.head_dim));
    }
    QVERIFY(native_.scoring == sl::BlockScoring::Native);
    QCOMPARE(native_.top_k, kTopK);
    QCOMPARE(native_.block_size, kBlock);
    QCOMPARE(native_.dense_layers, 1);
    QVERIFY(sl::MsaAttention(native_).signature().find("native") != std::string::npos);
}

void TstMsaNative::prefillMatchesReference() {
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(11 * kBlock + 5, nv);  // 12 blocks, top-3
    std::vector<float> want, dense_want;
    Selections want_sel;
    QVERIFY(reference(model_, ids, {QStringLiteral("--msa"), QStringLiteral("native")}, &want, &want_sel));
    QVERIFY(reference(model_, ids, {}, &dense_want, nullptr));
    sl::MsaAttention att(native_);
    const EngineRun got = run_engine(*m_, ids, att);
    QCOMPARE(got.logits.size(), want.size());
    const double err = worst_error(got.logits, want, nv);
    // The selection must matter here, or this test could not tell sparse from dense.
    const double gap = worst_error(dense_want, want, nv);
    qInfo("%zu tokens: native vs reference %.2e; reference native vs dense %.3f; %lld selections",
          ids.size(), err, gap, static_cast<long long>(got.stats.selections));
    QVERIFY2(gap > 100 * kTol, qPrintable(QStringLiteral("selection does not matter (gap %1)").arg(gap)));
    QVERIFY2(err < kTol, qPrintable(QStringLiteral("normalized error %1").arg(err)));
    const QString diff = first_difference(got.sel, want_sel);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    QVERIFY(got.sel.count(0) == 0);  // the dense leading layer selects nothing
    QCOMPARE(got.stats.native_fallbacks, 0);
    QVERIFY(got.stats.selected_blocks < got.stats.visible_blocks);
}

void TstMsaNative::chunkedPrefillAndDecodeMatchReference() {
    // Calls that cut blocks (13, 13, 22), then decode one token at a time: the query grouping
    // follows the calls; decode is M3's per-token selection.
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(9 * kBlock + 3, nv);
    std::vector<int> calls{13, 13, 22};
    while (std::accumulate(calls.begin(), calls.end(), 0) < static_cast<int>(ids.size())) calls.push_back(1);
    QStringList cs;
    for (int c : calls) cs << QString::number(c);
    std::vector<float> want;
    Selections want_sel;
    QVERIFY(reference(model_, ids, {QStringLiteral("--msa"), QStringLiteral("native"), QStringLiteral("--msa-calls"), cs.join(QLatin1Char(','))},
                      &want, &want_sel));
    sl::MsaAttention att(native_);
    const EngineRun got = run_engine(*m_, ids, att, calls);
    const double err = worst_error(got.logits, want, nv);
    qInfo("chunked + %zu decode calls: normalized error %.2e", calls.size() - 3, err);
    QVERIFY2(err < kTol, qPrintable(QStringLiteral("normalized error %1").arg(err)));
    const QString diff = first_difference(got.sel, want_sel);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
    QCOMPARE(att.native_keys(1), static_cast<int64_t>(ids.size()));
    QCOMPARE(att.native_keys(0), 0);
}

void TstMsaNative::suppliedKeysContinueAContext() {
    // A context continued by a new MsaAttention given the first one's index keys (set_native_keys)
    // equals one attention running throughout; without them it falls back (and differs in stats).
    const auto& c = m_->model->config();
    const int nv = c.n_vocab;
    const std::vector<int32_t> ids = random_ids(8 * kBlock + 6, nv);
    const int cut = 5 * kBlock + 2;
    sl::MsaAttention one(native_);
    const EngineRun whole = run_engine(*m_, ids, one, {cut});
    sl::ThreadPool pool(2);
    sl::KvCacheOptions ko;
    ko.block_size = kBlock;
    sl::KvCache kv(c.n_layer, static_cast<int>(ids.size()), c.n_kv_head, c.head_dim, ko);
    sl::ForwardScratch scratch;
    std::vector<float> logits(ids.size() * static_cast<size_t>(nv));
    sl::MsaAttention first(native_), second(native_);
    m_->model->forward(ids.data(), cut, 0, kv, first, pool, scratch, logits.data(), true);
    for (int l = native_.dense_layers; l < c.n_layer; ++l) {
        QCOMPARE(first.native_keys(l), static_cast<int64_t>(cut));
        second.set_native_keys(l, kv, first.native_key_data(l), cut, c.indexer.head_dim);
    }
    m_->model->forward(ids.data() + cut, static_cast<int>(ids.size()) - cut, cut, kv, second, pool, scratch,
                       logits.data() + static_cast<size_t>(cut) * nv, true);
    QCOMPARE(second.stats().native_fallbacks, 0);
    const double err = worst_error(logits, whole.logits, nv);
    QVERIFY2(err < 1e-6, qPrintable(QString::number(err)));
}

void TstMsaNative::topKCoveringEveryBlockEqualsDense() {
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(6 * kBlock + 1, nv);
    sl::MsaConfig all = native_;
    all.top_k = 100;
    sl::MsaAttention att(all);
    sl::DenseAttention dense;
    const EngineRun a = run_engine(*m_, ids, att, {20});
    const EngineRun d = run_engine(*m_, ids, dense, {20});
    const double err = worst_error(a.logits, d.logits, nv);
    qInfo("top-k covering every block vs dense: %.2e", err);
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    QVERIFY(a.stats.selections > 0);
    QCOMPARE(a.stats.selected_blocks, a.stats.visible_blocks);
}

void TstMsaNative::hostileIndexer_data() {
    QTest::addColumn<QStringList>("gen_args");
    QTest::addColumn<QString>("names");
    QTest::newRow("q_proj rows") << QStringList{QStringLiteral("--msa-bad-q-rows"), QStringLiteral("31")}
                                 << QStringLiteral("blk.1.indexer.q_proj.weight");
    QTest::newRow("one index head for two groups") << QStringList{QStringLiteral("--msa-heads"), QStringLiteral("1")}
                                                   << QStringLiteral("indexer.head_count");
    QTest::newRow("two local blocks") << QStringList{QStringLiteral("--msa-local-blocks"), QStringLiteral("2")}
                                      << QStringLiteral("indexer.local_blocks");
    QTest::newRow("key length below rope dims") << QStringList{QStringLiteral("--msa-key-length"), QStringLiteral("8")}
                                                << QStringLiteral("indexer.key_length");
}

void TstMsaNative::hostileIndexer() {
    QFETCH(QStringList, gen_args);
    QFETCH(QString, names);
    const QString path = dir_.filePath(QStringLiteral("hostile.gguf"));
    QVERIFY(make_model(path, gen_args, 7));
    try {
        sl::load_model(path.toStdString());
        QFAIL("loaded a hostile file");
    } catch (const sl::FormatError& e) {
        const QString msg = QString::fromUtf8(e.what());
        qInfo("%s", e.what());
        QVERIFY2(msg.contains(names) && msg.contains(path), qPrintable(msg));
    }
}

void TstMsaNative::nativeWithoutIndexerIsAnError() {
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return;
    const QString path = dir_.filePath(QStringLiteral("plain.gguf"));
    QVERIFY(sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), path}, nullptr));
    const auto m = sl::load_model(path.toStdString());
    QVERIFY(!m->model->config().has_indexer());
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::native_msa_config(m->model->config(), {}));
    sl::MsaConfig cfg = native_;  // native scoring forced on a file without an indexer
    sl::MsaAttention att(cfg);
    const std::vector<int32_t> ids = random_ids(3 * kBlock, m->model->config().n_vocab);
    try {
        run_engine(*m, ids, att);
        QFAIL("native MSA ran without index queries");
    } catch (const sl::Error& e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("index")), e.what());
    }
    // Training-free MSA on an indexer file ignores the indexer (and is not asked for it).
    sl::MsaConfig tf = native_;
    tf.scoring = sl::BlockScoring::BlockMax;
    QVERIFY(!sl::MsaAttention(tf).wants_index());
    QVERIFY(sl::MsaAttention(native_).wants_index());
}

void TstMsaNative::restoredContextKeepsIndexKeys() {
    // A saved context carries the index keys: restored, it continues natively, with the logits of
    // a session that never stopped; appending to the file keeps them whole.
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(10 * kBlock + 2, nv);
    const size_t cut = 6 * kBlock + 3, cut2 = 8 * kBlock + 1;
    const std::span<const int32_t> all(ids);
    const sl::SessionOptions so = small_session();
    const std::string file = dir_.filePath(QStringLiteral("keys.slkv")).toStdString();
    sl::Session ref(*m_, so, std::make_unique<sl::MsaAttention>(native_));  // never stops
    ref.prefill(all.first(cut));
    ref.prefill(all.subspan(cut, cut2 - cut));
    ref.prefill(all.subspan(cut2));
    {
        sl::Session a(*m_, so, std::make_unique<sl::MsaAttention>(native_));
        a.prefill(all.first(cut));
        a.save(file);
    }
    sl::Session b(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    b.restore(file);
    auto& bm = dynamic_cast<sl::MsaAttention&>(b.attention());
    QCOMPARE(bm.native_keys(0), 0);  // the dense leading layer keeps none
    for (int l = 1; l < m_->model->config().n_layer; ++l) QCOMPARE(bm.native_keys(l), static_cast<int64_t>(cut));
    b.prefill(all.subspan(cut, cut2 - cut));
    QCOMPARE(bm.stats().native_fallbacks, 0);
    b.save(file);  // appends pages, keys of [cut, cut2) and a commit
    sl::Session e(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    e.restore(file);
    auto& em = dynamic_cast<sl::MsaAttention&>(e.attention());
    QCOMPARE(em.native_keys(1), static_cast<int64_t>(cut2));
    e.prefill(all.subspan(cut2));
    QCOMPARE(em.stats().native_fallbacks, 0);
    QCOMPARE(em.native_keys(1), static_cast<int64_t>(ids.size()));
    QVERIFY2(std::equal(e.last_logits().begin(), e.last_logits().end(), ref.last_logits().begin()),
             "the restored native context differs from the uninterrupted one");
}

void TstMsaNative::restoredContextWithoutKeysFallsBackToTrainingFree() {
    // A file saved without index keys (here by a training-free session): after restore, sparse
    // layers score training-free (block-max) until the context restarts; a reset context is
    // native again.
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(10 * kBlock + 2, nv);
    const size_t cut = 6 * kBlock + 3;
    const std::span<const int32_t> head(ids.data(), cut), tail(ids.data() + cut, ids.size() - cut);
    const sl::SessionOptions so = small_session();
    const std::string file = dir_.filePath(QStringLiteral("ctx.slkv")).toStdString();
    sl::MsaConfig tf = native_;
    tf.scoring = sl::BlockScoring::BlockMax;
    {
        sl::Session a(*m_, so, std::make_unique<sl::MsaAttention>(tf));
        a.prefill(head);
        a.save(file);
    }
    sl::Session b(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    sl::Session c(*m_, so, std::make_unique<sl::MsaAttention>(tf));
    b.restore(file);
    c.restore(file);
    b.prefill(tail);
    c.prefill(tail);
    auto& bm = dynamic_cast<sl::MsaAttention&>(b.attention());
    QVERIFY(bm.stats().native_fallbacks > 0);
    QCOMPARE(bm.native_keys(1), 0);
    const std::vector<float> lb(b.last_logits().begin(), b.last_logits().end());
    const std::vector<float> lc(c.last_logits().begin(), c.last_logits().end());
    QCOMPARE(lb.size(), static_cast<size_t>(nv));
    QVERIFY2(lb == lc, "restored native session differs from the training-free one");

    // Reset and prefill everything: native again, and equal to a fresh native session.
    b.reset();
    bm.reset_stats();
    b.prefill(ids);
    QCOMPARE(bm.stats().native_fallbacks, 0);
    QCOMPARE(bm.native_keys(1), static_cast<int64_t>(ids.size()));
    sl::Session d(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    d.prefill(ids);
    QVERIFY(std::equal(b.last_logits().begin(), b.last_logits().end(), d.last_logits().begin()));
}

void TstMsaNative::deltaOntoHeldContextKeepsIndex() {
    // Session::restore_delta on a native session: the held block index and index keys of the
    // base's part stay (the layer's index object is the same one), the delta's keys follow them,
    // and the session goes on natively with the logits of one that restored the delta afresh.
    const int nv = m_->model->config().n_vocab;
    const std::vector<int32_t> ids = random_ids(12 * kBlock + 1, nv), other = random_ids(3 * kBlock + 5, nv);
    const size_t p = 6 * kBlock + 3, q = 9 * kBlock + 2;  // the base's part, the delta's end
    const std::span<const int32_t> all(ids);
    const sl::SessionOptions so = small_session();
    const std::string base = dir_.filePath(QStringLiteral("nb.slkv")).toStdString();
    const std::string delta = dir_.filePath(QStringLiteral("nd.slkv")).toStdString();
    {
        sl::Session w(*m_, so, std::make_unique<sl::MsaAttention>(native_));
        w.prefill(all.first(p));
        w.save(base);
        w.prefill(all.subspan(p, q - p));
        w.save_delta(delta, base, static_cast<int64_t>(p));
    }
    sl::Session ref(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    ref.restore(delta);
    sl::Session h(*m_, so, std::make_unique<sl::MsaAttention>(native_));
    h.restore(base);
    h.prefill(other);  // another question after the base: other keys where the delta's go
    auto& hm = dynamic_cast<sl::MsaAttention&>(h.attention());
    const sl::BlockIndex* index = hm.index(1);
    QVERIFY(index);
    QVERIFY(h.restore_delta(delta));
    QCOMPARE(hm.index(1), index);  // kept, not rebuilt
    QCOMPARE(hm.native_keys(1), static_cast<int64_t>(q));
    auto& rm = dynamic_cast<sl::MsaAttention&>(ref.attention());
    QVERIFY(std::equal(hm.native_key_data(1), hm.native_key_data(1) + q * static_cast<size_t>(m_->model->config().indexer.head_dim),
                       rm.native_key_data(1)));
    h.prefill(all.subspan(q));
    ref.prefill(all.subspan(q));
    QCOMPARE(hm.stats().native_fallbacks, 0);
    QVERIFY2(std::equal(h.last_logits().begin(), h.last_logits().end(), ref.last_logits().begin()),
             "the delta restored onto the held native context differs from a fresh restore");
    for (int l = 1; l < m_->model->config().n_layer; ++l) {
        const auto &a = hm.last_selections(l), &b = rm.last_selections(l);
        QCOMPARE(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) QVERIFY(a[i].blocks == b[i].blocks);
    }
}

void TstMsaNative::minimaxM3MatchesReference() {
    // The real M3 layout (arch minimax-m3, llama.cpp's names): NeoX RoPE on half of each head,
    // per-head q/k norms, swiglu_oai FFNs, and after the dense layer 4 routed experts (2 per token,
    // sigmoid router with a selection bias) plus a shared expert, in the same layers as the indexer.
    // Prefill in one call, then calls that cut blocks and decode, both against the reference.
    QTemporaryDir dir;
    const QString model = dir.filePath(QStringLiteral("tiny_m3.gguf"));
    QVERIFY(make_model(model, {QStringLiteral("--arch"), QStringLiteral("minimax-m3"), QStringLiteral("--experts"), QStringLiteral("4")},
                       static_cast<unsigned>(sl::test::rng()() % 100000)));
    const auto m = sl::load_model(model.toStdString());
    const auto& c = m->model->config();
    QVERIFY(c.has_moe() && c.has_indexer() && c.ffn_swiglu_oai);
    QCOMPARE(c.moe.dense_layers, 1);
    QVERIFY(!m->model->weights().layers[0].is_moe() && m->model->weights().layers[1].is_moe());
    const sl::MsaConfig native = sl::native_msa_config(c, {});
    const int nv = c.n_vocab;
    const std::vector<int32_t> ids = random_ids(9 * kBlock + 3, nv);
    std::vector<float> want, dense_want;
    Selections want_sel;
    QVERIFY(reference(model, ids, {QStringLiteral("--msa"), QStringLiteral("native")}, &want, &want_sel));
    QVERIFY(reference(model, ids, {}, &dense_want, nullptr));
    {
        sl::MsaAttention att(native);
        const EngineRun got = run_engine(*m, ids, att);
        const double err = worst_error(got.logits, want, nv);
        const double gap = worst_error(dense_want, want, nv);
        qInfo("M3 prefill: native vs reference %.2e; reference native vs dense %.3f", err, gap);
        QVERIFY2(gap > 100 * kTol, qPrintable(QStringLiteral("selection does not matter (gap %1)").arg(gap)));
        QVERIFY2(err < kTol, qPrintable(QStringLiteral("normalized error %1").arg(err)));
        const QString diff = first_difference(got.sel, want_sel);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        QCOMPARE(got.stats.native_fallbacks, 0);
    }
    std::vector<int> calls{13, 22};
    while (std::accumulate(calls.begin(), calls.end(), 0) < static_cast<int>(ids.size())) calls.push_back(1);
    QStringList cs;
    for (int x : calls) cs << QString::number(x);
    want_sel.clear();
    QVERIFY(reference(model, ids, {QStringLiteral("--msa"), QStringLiteral("native"), QStringLiteral("--msa-calls"), cs.join(QLatin1Char(','))},
                      &want, &want_sel));
    sl::MsaAttention att(native);
    const EngineRun got = run_engine(*m, ids, att, calls);
    const double err = worst_error(got.logits, want, nv);
    qInfo("M3 chunked + %zu decode calls: normalized error %.2e", calls.size() - 2, err);
    QVERIFY2(err < kTol, qPrintable(QStringLiteral("normalized error %1").arg(err)));
    const QString diff = first_difference(got.sel, want_sel);
    QVERIFY2(diff.isEmpty(), qPrintable(diff));
}

void TstMsaNative::minimaxM3SessionSavesAndRestores() {
    // A tiny M3 generates through a Session with native MSA, saves its context (index keys
    // included), and a restored session continues exactly as one that never stopped.
    QTemporaryDir dir;
    const QString model = dir.filePath(QStringLiteral("tiny_m3.gguf"));
    QVERIFY(make_model(model, {QStringLiteral("--arch"), QStringLiteral("minimax-m3"), QStringLiteral("--experts"), QStringLiteral("4")},
                       static_cast<unsigned>(sl::test::rng()() % 100000)));
    const auto m = sl::load_model(model.toStdString());
    const sl::MsaConfig native = sl::native_msa_config(m->model->config(), {});
    const std::vector<int32_t> ids = random_ids(8 * kBlock + 2, m->model->config().n_vocab);
    const std::span<const int32_t> all(ids);
    const size_t cut = 5 * kBlock + 3;
    const std::string file = dir.filePath(QStringLiteral("m3.slkv")).toStdString();
    sl::Session ref(*m, small_session(), std::make_unique<sl::MsaAttention>(native));
    ref.prefill(all.first(cut));
    ref.prefill(all.subspan(cut));
    {
        sl::Session a(*m, small_session(), std::make_unique<sl::MsaAttention>(native));
        a.prefill(all.first(cut));
        a.save(file);
    }
    sl::Session b(*m, small_session(), std::make_unique<sl::MsaAttention>(native));
    b.restore(file);
    b.prefill(all.subspan(cut));
    auto& bm = dynamic_cast<sl::MsaAttention&>(b.attention());
    QCOMPARE(bm.stats().native_fallbacks, 0);
    QVERIFY2(std::equal(b.last_logits().begin(), b.last_logits().end(), ref.last_logits().begin()),
             "the restored M3 context differs from the uninterrupted one");
    sl::GenerateOptions go;
    go.max_tokens = 6;
    go.sampling.temperature = 0.0f;
    std::string t1, t2;
    ref.generate(go, [&](std::string_view t) { t1 += t; return true; });
    b.generate(go, [&](std::string_view t) { t2 += t; return true; });
    QCOMPARE(b.stats().generated_tokens, ref.stats().generated_tokens);
    QCOMPARE(QString::fromStdString(t2), QString::fromStdString(t1));
}

void TstMsaNative::prunedSelectionEqualsBruteForce_data() {
    QTest::addColumn<int>("dim");
    QTest::addColumn<int>("block");
    QTest::addColumn<int>("n_blocks");
    QTest::addColumn<int>("n_rows");
    QTest::addColumn<int>("top_k");
    QTest::addColumn<bool>("sink");
    QTest::addColumn<int>("structure");  // 0 random, 1 clustered with a few matching blocks, 2 ties
    QTest::addColumn<int>("window");
    QTest::newRow("random d128 B128 decode row") << 128 << 128 << 40 << 1 << 16 << false << 0 << 0;
    QTest::newRow("clustered d128 B128 query block") << 128 << 128 << 48 << 128 << 16 << true << 1 << 0;
    QTest::newRow("clustered d64 B16 7 rows") << 64 << 16 << 60 << 7 << 6 << false << 1 << 0;
    QTest::newRow("random d17 B32 33 rows window 5") << 17 << 32 << 30 << 33 << 4 << true << 0 << 5;
    QTest::newRow("ties d32 B16 40 rows") << 32 << 16 << 45 << 40 << 6 << false << 2 << 0;
    QTest::newRow("ties d48 B8 one row k2") << 48 << 8 << 50 << 1 << 2 << false << 2 << 0;
}

void TstMsaNative::prunedSelectionEqualsBruteForce() {
    // select_blocks_native with NativeBounds (the Quest pruning msa_attention.cpp uses for M3's
    // indexer) against scoring every key: the same blocks, ties to the lower id, on fresh random
    // keys of odd sizes; and fewer dot products.
    QFETCH(int, dim);
    QFETCH(int, block);
    QFETCH(int, n_blocks);
    QFETCH(int, n_rows);
    QFETCH(int, top_k);
    QFETCH(bool, sink);
    QFETCH(int, structure);
    QFETCH(int, window);
    auto& rng = sl::test::rng();
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const auto n = static_cast<size_t>(n_blocks) * static_cast<size_t>(block);
    const auto d = static_cast<size_t>(dim);
    std::vector<float> keys(n * d);
    std::vector<float> centers(4 * d);
    for (float& x : centers) x = nd(rng);
    for (size_t p = 0; p < n; ++p) {
        const size_t b = p / static_cast<size_t>(block);
        for (size_t i = 0; i < d; ++i) {
            float v = nd(rng);
            if (structure == 1) v = 0.3f * v + centers[(b % 4) * d + i] * (b % 7 == 3 ? 2.0f : 0.5f);
            keys[p * d + i] = v;
        }
        if (structure == 2 && b % 3 == 2)  // a copy of the block before: exact ties
            std::copy_n(keys.begin() + static_cast<std::ptrdiff_t>((p - static_cast<size_t>(block)) * d), d,
                        keys.begin() + static_cast<std::ptrdiff_t>(p * d));
    }
    std::vector<float> kmin, kmax, kabs;
    sl::native_bounds(keys.data(), block, dim, 0, n_blocks, kmin, kmax, kabs);
    const sl::NativeBounds nb{kmin.data(), kmax.data(), kabs.data()};
    sl::SelectParams p;
    p.top_k = top_k;
    p.sink = sink;
    p.window = window;
    sl::SelectScratch scratch;
    sl::SelectStats st_p, st_b;
    std::vector<int32_t> a, b;
    for (int trial = 0; trial < 20; ++trial) {
        const int64_t local = n_blocks - 1 - trial % 5;
        // Half the trials: rows near a random key of the visible context (peaked scores).
        std::vector<float> rows(static_cast<size_t>(n_rows) * d);
        for (int r = 0; r < n_rows; ++r) {
            const size_t at = std::uniform_int_distribution<size_t>(0, static_cast<size_t>(local * block) - 1)(rng);
            for (size_t i = 0; i < d; ++i)
                rows[static_cast<size_t>(r) * d + i] = trial % 2 ? keys[at * d + i] + 0.5f * nd(rng) : nd(rng);
        }
        sl::select_blocks_native(keys.data(), block, dim, rows.data(), n_rows, dim, local, p, scratch, a, st_p, &nb);
        sl::select_blocks_native(keys.data(), block, dim, rows.data(), n_rows, dim, local, p, scratch, b, st_b);
        QCOMPARE(a, b);
    }
    qInfo("native selection: pruned scored %lld (row, block) pairs, brute force %lld (%.1f%%)",
          static_cast<long long>(st_p.exact_rows), static_cast<long long>(st_b.exact_rows),
          100.0 * static_cast<double>(st_p.exact_rows) / static_cast<double>(std::max<int64_t>(1, st_b.exact_rows)));
    QVERIFY(st_p.exact_rows <= st_b.exact_rows);
}

QTEST_APPLESS_MAIN(TstMsaNative)
#include "tst_msa_native.moc"
