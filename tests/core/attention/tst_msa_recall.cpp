// Recall of MSA's training-free selections on real SmolLM2 activations: SmolLM2 prefills a long
// real text (refman.pdf) with dense attention; a probe attention sees every layer's call (the real
// RoPE'd q and K/V cache), runs MSA in each mode on the same inputs, and measures the fraction of the
// exact (dense) softmax mass that falls in the blocks MSA selected. Reported per layer and mode;
// a sane floor is asserted for the default mode. Length: SIGHTLINE_MSA_RECALL_TOKENS (default 2048,
// a minute or two of prefill on two cores); block 64, top-k 8 (a quarter of the context at 2K).
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/thread_pool.h"
#include "core/util/assets.h"
#include "kernels/cpu/ops.h"
#include "tests/common/test_support.h"

namespace {

struct Variant {
    const char* name;
    std::unique_ptr<sl::MsaAttention> msa;
    std::vector<double> recall_sum, count;  // per layer, over (query, head) pairs with more blocks than top-k
};

// Runs dense attention for the model and, beside it, every MSA variant on the same call.
class RecallProbe final : public sl::Attention {
public:
    RecallProbe(int block, int top_k, int n_layer) : block_(block), top_k_(top_k) {
        auto add = [&](const char* name, sl::BlockScoring s, sl::IndexQuery iq, bool sink = false) {
            sl::MsaConfig cfg;
            cfg.block_size = block;
            cfg.top_k = top_k;
            cfg.sink = sink;
            cfg.scoring = s;
            cfg.index_query = iq;
            variants.push_back({name, std::make_unique<sl::MsaAttention>(cfg), std::vector<double>(static_cast<size_t>(n_layer)),
                                std::vector<double>(static_cast<size_t>(n_layer))});
        };
        add("block-max/head-max", sl::BlockScoring::BlockMax, sl::IndexQuery::HeadMax);
        add("block-max/group-mean", sl::BlockScoring::BlockMax, sl::IndexQuery::GroupMean);
        add("mean-key/head-max", sl::BlockScoring::MeanKey, sl::IndexQuery::HeadMax);
        add("mean-key/group-mean", sl::BlockScoring::MeanKey, sl::IndexQuery::GroupMean);
        add("block-max/head+sink", sl::BlockScoring::BlockMax, sl::IndexQuery::HeadMax, true);
        add("hybrid4/head-max", sl::BlockScoring::Hybrid, sl::IndexQuery::HeadMax);
    }

    void forward(const sl::AttentionCall& c, const sl::KvCache& kv, sl::ThreadPool& pool) override {
        dense_.forward(c, kv, pool);
        const int64_t end = c.pos0 + c.n_tokens;
        const int64_t nb = (end + block_ - 1) / block_;
        // Exact softmax mass per block for every (query, head).
        mass_.assign(static_cast<size_t>(c.n_tokens) * c.n_head * static_cast<size_t>(nb), 0.0f);
        scratch_.resize(static_cast<size_t>(pool.size()));
        const int G = c.n_head / c.n_kv_head;
        pool.parallel_for(static_cast<int64_t>(c.n_tokens) * c.n_head, [&](int64_t b, int64_t e, int ti) {
            std::vector<float>& s = scratch_[static_cast<size_t>(ti)];
            const size_t kb = static_cast<size_t>(kv.block_size()) * static_cast<size_t>(c.head_dim);
            s.resize(static_cast<size_t>(end) + kb);
            float* kbuf = s.data() + end;
            for (int64_t it = b; it < e; ++it) {
                const int64_t t = it / c.n_head;
                const int h = static_cast<int>(it % c.n_head);
                const int64_t n_keys = c.pos0 + t + 1;
                const float* q = c.q + it * c.head_dim;
                for (int64_t j0 = 0; j0 < n_keys; j0 += kv.block_size()) {
                    const int n = static_cast<int>(std::min<int64_t>(kv.block_size(), n_keys - j0));
                    const float* K = kv.k_rows(c.layer, h / G, j0, n, kbuf);
                    for (int j = 0; j < n; ++j)
                        s[static_cast<size_t>(j0 + j)] = sl::kernels::dot_f32(q, K + static_cast<int64_t>(j) * c.head_dim, c.head_dim) * c.scale;
                }
                sl::kernels::softmax(s.data(), n_keys);
                float* m = mass_.data() + it * nb;
                for (int64_t j = 0; j < n_keys; ++j) m[j / block_] += s[static_cast<size_t>(j)];
            }
        });
        out_.resize(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim);
        sl::AttentionCall mc = c;
        mc.out = out_.data();
        for (Variant& v : variants) {
            v.msa->forward(mc, kv, pool);
            for (const sl::Selection& sel : v.msa->last_selections(c.layer)) {
                const int64_t local = sel.q_pos0 / block_;
                if (local + 1 <= top_k_) continue;  // every block selected: recall 1 trivially
                for (int64_t t = sel.q_pos0 - c.pos0; t < sel.q_pos0 - c.pos0 + sel.n_queries; ++t)
                    for (int h = sel.kv_head * G; h < (sel.kv_head + 1) * G; ++h) {
                        const float* m = mass_.data() + (t * c.n_head + h) * nb;
                        double r = 0;
                        for (int32_t blk : sel.blocks) r += m[blk];
                        v.recall_sum[static_cast<size_t>(c.layer)] += r;
                        v.count[static_cast<size_t>(c.layer)] += 1;
                    }
            }
        }
    }
    const char* name() const override { return "recall-probe"; }

    std::vector<Variant> variants;

private:
    int block_, top_k_;
    sl::DenseAttention dense_;
    std::vector<float> mass_, out_;
    std::vector<std::vector<float>> scratch_;
};

}  // namespace

class TstMsaRecall : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void recallOnRefman();
};

void TstMsaRecall::recallOnRefman() {
    REQUIRE_ASSET(model_path, sl::assets::kDefaultModel);
    REQUIRE_ASSET(pdf, "samples/pdf/refman.pdf");
    const char* env = std::getenv("SIGHTLINE_MSA_RECALL_TOKENS");
    const int n_tokens = env ? std::atoi(env) : 2048;
    const int last_page = std::max(60, 5 + n_tokens / 250);  // ~400-600 tokens per page
    QByteArray text;
    if (!sl::test::run_process(QStringLiteral("pdftotext"),
                               {QStringLiteral("-f"), QStringLiteral("5"), QStringLiteral("-l"), QString::number(last_page),
                                QStringLiteral("-enc"), QStringLiteral("UTF-8"), QString::fromStdString(pdf.string()),
                                QStringLiteral("-")},
                               &text))
        return;
    // SIGHTLINE_MSA_RECALL_TOKENS / _BLOCK / _TOPK: e.g. 32768 / 128 / 16 for the goal
    // (>= 0.95 in the default mode at 32K; a 32K prefill with the dense probe takes long on 2 cores).
    const char* env_b = std::getenv("SIGHTLINE_MSA_RECALL_BLOCK");
    const char* env_k = std::getenv("SIGHTLINE_MSA_RECALL_TOPK");
    const int block = env_b ? std::atoi(env_b) : 64, top_k = env_k ? std::atoi(env_k) : 8;
    auto m = sl::load_model(model_path);
    std::vector<int32_t> ids = m->tokenizer->encode(text.toStdString(), true, false);
    QVERIFY2(static_cast<int>(ids.size()) >= n_tokens, "refman.pdf's pages give fewer tokens than asked");
    ids.resize(static_cast<size_t>(n_tokens));
    const int n_layer = m->model->config().n_layer;
    auto probe_owned = std::make_unique<RecallProbe>(block, top_k, n_layer);
    RecallProbe* probe = probe_owned.get();
    sl::SessionOptions so;
    so.n_ctx = n_tokens + 8;
    sl::Session session(*m, so, std::move(probe_owned));
    session.prefill(ids);
    qInfo("%d tokens of refman.pdf, block %d, top-k %d (%.0f%% of the context at the end); recall of the dense "
          "attention mass by the selected blocks, over (query, head) pairs that see more than top-k blocks:",
          n_tokens, block, top_k, 100.0 * top_k * block / n_tokens);
    QString header = QStringLiteral("layer");
    for (const auto& v : probe->variants) header += QStringLiteral(" | %1").arg(QString::fromLatin1(v.name), 20);
    qInfo("%s", qPrintable(header));
    std::vector<double> mean(probe->variants.size(), 0.0), worst(probe->variants.size(), 1.0);
    for (int l = 0; l < n_layer; ++l) {
        QString line = QStringLiteral("%1").arg(l, 5);
        for (size_t i = 0; i < probe->variants.size(); ++i) {
            const auto& v = probe->variants[i];
            const double r = v.recall_sum[static_cast<size_t>(l)] / std::max(1.0, v.count[static_cast<size_t>(l)]);
            mean[i] += r / n_layer;
            worst[i] = std::min(worst[i], r);
            line += QStringLiteral(" | %1").arg(r, 20, 'f', 4);
        }
        qInfo("%s", qPrintable(line));
    }
    for (size_t i = 0; i < probe->variants.size(); ++i) {
        const auto& v = probe->variants[i];
        const sl::MsaStats& st = v.msa->stats();
        qInfo("%-20s mean recall %.4f, worst layer %.4f; exact block scores for %.1f%% of candidate blocks, "
              "%.1f%% of brute-force (row, block) pairs",
              v.name, mean[i], worst[i],
              100.0 * static_cast<double>(st.select.exact_blocks) / std::max<double>(1, static_cast<double>(st.select.candidates)),
              100.0 * static_cast<double>(st.select.exact_rows) / std::max<double>(1, static_cast<double>(st.select.brute_rows)));
    }
    QVERIFY2(mean[0] >= 0.8, qPrintable(QString::number(mean[0])));
}

// The prefill takes minutes on a busy two-core machine: lift QtTest's 5-minute watchdog.
int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QTEST_FUNCTION_TIMEOUT")) qputenv("QTEST_FUNCTION_TIMEOUT", "1200000");
    TstMsaRecall t;
    return QTest::qExec(&t, argc, argv);
}
#include "tst_msa_recall.moc"
