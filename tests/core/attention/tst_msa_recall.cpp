// Recall of MSA's training-free selections on real SmolLM2 activations over a long real text
// (refman.pdf). SmolLM2 prefills the text with the engine's own MSA attention, the mode under test
// (default: the library prefill's, sl::kTrainingFreeMode, blocks of 128, top-k 16; positions as the
// library prefill picks them: remapped past the model's training context), so the queries and the
// K/V measured are the ones the product sees. A probe wraps that attention; at every layer call it
// samples query rows (the query blocks qb with qb % stride == stride - 1, stride chosen so that
// about SIGHTLINE_MSA_RECALL_QBLOCKS blocks are sampled over the context, and in each the rows at
// offsets B/R - 1, 2B/R - 1, ..., B - 1, less a call's last query, which selects on its own as
// decode does) and, for every sampled row and head:
//   - the exact dense softmax mass per KV block over ALL visible keys (read from the KvCache) of
//     the attention the MSA approximates: "as attended" — at the positions the sparse branch uses
//     (with Remap, a block W or more before the query at its remapped distance, see
//     msa_attention.h; the same as true positions without Remap) — and at the true positions, and
//   - for every variant, the blocks MSA would select for the row's query block (the part of it in
//     this call) and KV group: select_blocks over the MSA's own block index with the index-query
//     rows MsaAttention builds (the max over the block's queries, and over the group's heads for
//     head-max; with Remap, far blocks scored at their remapped distance as the MSA does). The mode
//     under test's selection is read from the MSA itself, and recomputed on every 4th sampled query
//     block: the two must match exactly (the reproduction is faithful). The variant "true-pos"
//     selects as the MSA did before remap-aware selection (every block at its true distance).
// Recall = Σ mass over the selected blocks, averaged over sampled (row, head) pairs whose row sees
// more than top-k blocks (otherwise it is 1 trivially). Apart from those (RECALL-DECODE): each
// call's last query, which selects on its own as a decode step does, every call, with every
// variant selecting from that one query's rows. Reported per layer and variant: the mean
// over layers, the worst layer, and the mean over layers of the rows in the last quarter of the
// context, against both references. Asserted: the mode under test's mean over layers against the
// attention as attended >= 0.95 (the floor). Without Remap the two references are equal.
// With Remap the true-position reference is the attention an 8K-trained model would compute at
// distances it never saw in training; it is printed for comparison, not asserted.
//
// Environment: SIGHTLINE_MSA_RECALL_TOKENS (default 8192, a few minutes on two cores; the issue's
// goal is 0.95 at 32768: with remapped positions, 21 min on two cores, the default mode
// hybrid8/group-mean/sink/w16/p98x8 measured 0.951 (decode-like 0.953, 54.0 blocks per selection),
// where no choice of 16 blocks plus the window does better than 0.921-0.930 (oracle/w16) and
// hybrid8/group-mean/sink/w16 kept 0.904-0.912; the default's /c32k changes nothing up to 32K; at
// 131072, 38 min, no mode keeps 0.95: oracle/w16 0.822, hybrid8/group-mean/sink/w16 0.782, with
// /p98x8 0.846 at 2.6x the blocks; see issue #5's notes),
// _BLOCK (128), _TOPK (16), _MODE (default sl::kTrainingFreeMode, the library prefill's; or
// block-max | hybrid | mean-key with head-max index queries; or any variant's name), _POSITIONS (auto | original |
// remap), _WINDOW (the remap window; default as the library prefill: min(4096, n_ctx_train / 2)),
// _QBLOCKS (about how many query blocks to sample, default 32), _ROWS (rows per sampled
// query block, default 8), _DUMP (a folder: at the end of the prefill, write the activations of
// the layers _DUMP_LAYERS (default 1,8,15,22,29) for bench_attention's SIGHTLINE_BENCH_REAL).
#include <QTest>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/attention/block_index.h"
#include "core/attention/block_select.h"
#include "core/attention/msa_attention.h"
#include "core/attention/rope_shift.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/thread_pool.h"
#include "core/util/assets.h"
#include "kernels/cpu/ops.h"
#include "tests/common/activation_dump.h"
#include "tests/common/test_support.h"

namespace {

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

std::string env_str(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string(fallback);
}

// One way of selecting blocks, measured on the same sampled rows.
struct Variant {
    std::string name;
    sl::BlockScoring scoring;
    sl::IndexQuery index_query;
    bool sink = false;
    bool true_pos = false;  // select with every block at its true distance (no remap-aware scoring)
    int top_k = 0;          // 0: the configuration's
    // The upper bound of any selection of top-k blocks: for each (row, head) on its own, the local
    // block and the top_k - 1 blocks of most mass in the reference (selections are shared by a
    // query block's rows and a group's heads, so none can do better).
    bool oracle = false;
    int hybrid_factor = 0;  // Hybrid: the shortlist factor; 0: the configuration's
    int window = -1;        // SelectParams::window (blocks forced before the local one); -1: the configuration's
    float top_p = 0.0f;     // SelectParams::mass (mass-adaptive growth); 0: none
    int grow = 4;           // SelectParams::grow
    int full_ctx = 0;       // MsaConfig::top_p_full_ctx (tokens; SelectParams::grow_full in blocks)
    // Per layer: Σ recall and the number of (row, head) pairs; the same over the last quarter;
    // against the attention as attended, and (_t) at true positions.
    std::vector<double> sum = {}, count = {}, tail_sum = {}, tail_count = {}, sum_t = {}, tail_sum_t = {};
    // Per layer, decode-like selections (a call's last query, which selects on its own): Σ recall
    // as attended and the number of (query, head) pairs.
    std::vector<double> dec_sum = {}, dec_count = {};
    sl::SelectStats stats = {};  // index-branch work of the sampled selections
    double sel_blocks = 0, sel_count = 0;  // Σ blocks selected and selections (sampled, not decode-like)
};

std::vector<Variant> make_variants(int n_layer, int top_k) {
    using S = sl::BlockScoring;
    using Q = sl::IndexQuery;
    std::vector<Variant> v = {
        {"block-max/head-max", S::BlockMax, Q::HeadMax},
        {"block-max/group-mean", S::BlockMax, Q::GroupMean},
        {"hybrid4/head-max", S::Hybrid, Q::HeadMax},
        {"hybrid8/head-max", S::Hybrid, Q::HeadMax, false, false, 0, false, 8},
        {"hybrid8/group-mean", S::Hybrid, Q::GroupMean, false, false, 0, false, 8},
        {"mean-key/group-mean", S::MeanKey, Q::GroupMean},
        {"block-max/head-max/sink", S::BlockMax, Q::HeadMax, true},
        {"block-max/true-pos", S::BlockMax, Q::HeadMax, false, true},
        {"block-max/group-mean/sink", S::BlockMax, Q::GroupMean, true},
        {"hybrid8/group-mean/sink", S::Hybrid, Q::GroupMean, true, false, 0, false, 8},
        {"block-max/group-mean/k" + std::to_string(2 * top_k), S::BlockMax, Q::GroupMean, false, false, 2 * top_k},
        {"oracle (bound)", S::BlockMax, Q::HeadMax, false, false, 0, true},
    };
    // A local window forced on top of the top-k (InfLLM's), of 16 and 32 blocks.
    for (const int w : {16, 32}) {
        const std::string tag = "/w" + std::to_string(w);
        v.push_back({"hybrid8/group-mean" + tag, S::Hybrid, Q::GroupMean, false, false, 0, false, 8, w});
        v.push_back({"hybrid8/group-mean/sink" + tag, S::Hybrid, Q::GroupMean, true, false, 0, false, 8, w});
        v.push_back({"block-max/group-mean/sink" + tag, S::BlockMax, Q::GroupMean, true, false, 0, false, 0, w});
        v.push_back({"oracle" + tag, S::BlockMax, Q::HeadMax, false, false, 0, true, 0, w});
    }
    // Mass-adaptive growth on top of the window (SelectParams::mass): pN grows each selection to N%
    // of the estimated mass, at most (grow - 1) x top-k more blocks.
    for (const auto& [pct, grow] : {std::pair{90, 4}, std::pair{95, 4}, std::pair{95, 8}, std::pair{97, 8}, std::pair{98, 8},
                                    std::pair{99, 8}, std::pair{98, 6}, std::pair{98, 12}, std::pair{98, 2},
                                    std::pair{98, 3}, std::pair{98, 4}, std::pair{95, 3}}) {
        const std::string tag = "/sink/w16/p" + std::to_string(pct) + (grow != 4 ? "x" + std::to_string(grow) : "");
        v.push_back({"hybrid8/group-mean" + tag, S::Hybrid, Q::GroupMean, true, false, 0, false, 8, 16,
                     static_cast<float>(pct) / 100.0f, grow});
    }
    // The growth's room shrinking past 32K tokens (/c32k, SelectParams::grow_full).
    v.push_back({"hybrid8/group-mean/sink/w16/p98x8/c32k", S::Hybrid, Q::GroupMean, true, false, 0, false, 8, 16, 0.98f, 8,
                 32768});
    v.push_back({"block-max/group-mean/sink/w16/p95", S::BlockMax, Q::GroupMean, true, false, 0, false, 0, 16, 0.95f, 4});
    v.push_back({"hybrid8/head-max/sink/w16/p98x8", S::Hybrid, Q::HeadMax, true, false, 0, false, 8, 16, 0.98f, 8});
    // SIGHTLINE_MSA_RECALL_VARIANTS (comma-separated names): measure only those (and the mode under test).
    if (const char* only = std::getenv("SIGHTLINE_MSA_RECALL_VARIANTS"); only && *only) {
        const std::string list = "," + std::string(only) + ",";
        const std::string tested = std::getenv("SIGHTLINE_MSA_RECALL_MODE") ? std::getenv("SIGHTLINE_MSA_RECALL_MODE") : sl::kTrainingFreeMode;
        std::erase_if(v, [&](const Variant& x) { return x.name != tested && list.find("," + x.name + ",") == std::string::npos; });
    }
    for (Variant& x : v) {
        x.sum.assign(static_cast<size_t>(n_layer), 0.0);
        x.count = x.tail_sum = x.tail_count = x.sum_t = x.tail_sum_t = x.dec_sum = x.dec_count = x.sum;
    }
    return v;
}

// Σ mass of the local block, the `window` blocks before it and the top_k - 1 other blocks of most
// mass (blocks [0, local]).
double oracle(const std::vector<double>& mass, int64_t local, int top_k, int window, std::vector<double>& sorted) {
    const int64_t end = local - std::clamp<int64_t>(window, 0, local);
    sorted.assign(mass.begin(), mass.begin() + end);
    const auto m = static_cast<size_t>(std::clamp<int64_t>(top_k - 1, 0, end));
    std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(m), sorted.end(), std::greater<>());
    double r = 0;
    for (int64_t b = end; b <= local; ++b) r += mass[static_cast<size_t>(b)];
    for (size_t i = 0; i < m; ++i) r += sorted[i];
    return r;
}

struct Sampling {
    int stride = 1;          // query blocks qb with qb % stride == stride - 1
    int rows = 8;            // rows per sampled query block
    int64_t tail_from = 0;   // positions >= tail_from count in the last-quarter figure
};

// Runs the MSA under test for the model and measures every variant's recall on sampled rows.
class RecallProbe final : public sl::Attention {
public:
    RecallProbe(const sl::MsaConfig& config, int tested, Sampling sampling, int n_layer)
        : variants(make_variants(n_layer, config.top_k)), msa_(config), tested_(tested), sampling_(sampling) {
        const int B = config.block_size;
        is_row_.assign(static_cast<size_t>(B), 0);
        const int R = std::clamp(sampling.rows, 1, B);
        for (int i = 0; i < R; ++i) is_row_[static_cast<size_t>((static_cast<int64_t>(i) + 1) * B / R - 1)] = 1;
    }

    void forward(const sl::AttentionCall& c, const sl::KvCache& kv, sl::ThreadPool& pool) override {
        msa_.forward(c, kv, pool);
        if (!dump_dir.empty() && c.pos0 + c.n_tokens == dump_at &&
            std::find(dump_layers.begin(), dump_layers.end(), c.layer) != dump_layers.end())
            dump(c, kv);
        const auto start = std::chrono::steady_clock::now();
        measure(c, kv, pool);
        probe_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    const char* name() const override { return msa_.name(); }
    std::string signature() const override { return msa_.signature(); }
    void reset_state() override { msa_.reset_state(); }

    const sl::MsaAttention& msa() const { return msa_; }

    std::vector<Variant> variants;
    int64_t checked = 0, mismatches = 0;  // selections of the mode under test recomputed / differing
    double probe_seconds = 0;
    // SIGHTLINE_MSA_RECALL_DUMP: at the call that ends at position dump_at, each layer of
    // dump_layers writes its activations (the format bench_attention's SIGHTLINE_BENCH_REAL reads).
    std::string dump_dir;
    std::vector<int> dump_layers;
    int64_t dump_at = -1;

private:
    // Per pool thread.
    struct Scratch {
        std::vector<float> rows_head, rows_mean;    // index-query rows as MsaAttention builds them
        std::vector<float> far_head, far_mean, cs;  // Remap: the same as R(W - p) q; cos/sin
        std::vector<int64_t> pos_head, pos_mean;    // Remap: each row's query position
        std::vector<float> qhat;                    // Remap: one query as R(W - p) q (head_dim)
        std::vector<float> scores_t;                // (pairs, keys): at true positions
        sl::SelectScratch select;
        std::vector<std::vector<int32_t>> blocks;   // per variant: the selection
        std::vector<int32_t> check;
        std::vector<int64_t> ts;                    // sampled rows (call-relative)
        std::vector<float> scores;                  // (pairs, keys): scores, then probabilities
        std::vector<double> mass;                   // (blocks): one pair's mass per block
        std::vector<float> kbuf, rk;                // (B, head_dim): a block's keys, as k^
        std::vector<double> mass_t;                 // (blocks): at true positions
        std::vector<double> sorted;                 // oracle: candidate masses
        std::vector<double> sum, count, tail_sum, tail_count, sum_t, tail_sum_t, dec_sum, dec_count;  // per variant
        std::vector<double> sel_blocks, sel_count;  // per variant
        std::vector<sl::SelectStats> stats;                    // per variant
        int64_t checked = 0, mismatches = 0;
    };

    // <dump_dir>/layer<L>.kvdump in the format of tests/common/activation_dump.h.
    void dump(const sl::AttentionCall& c, const sl::KvCache& kv) const {
        const int n_q = std::min(c.n_tokens, msa_.config().block_size);
        const int64_t n_ctx = c.pos0 + c.n_tokens;
        sl::test::ActivationDump d;
        d.layer = c.layer;
        d.n_ctx = n_ctx;
        d.n_head = c.n_head;
        d.n_kv_head = c.n_kv_head;
        d.head_dim = c.head_dim;
        d.n_q = n_q;
        d.rope_dim = c.rope_dim;
        d.rope_neox = c.rope_neox;
        d.scale = c.scale;
        d.rope_base = c.rope_base;
        d.rope_freq_scale = c.rope_freq_scale;
        int64_t h[sl::test::kActivationDumpHeaderWords];
        sl::test::pack_activation_dump(d, h);
        const std::string path = dump_dir + "/layer" + std::to_string(c.layer) + ".kvdump";
        FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) { qWarning("cannot write %s", path.c_str()); return; }
        bool ok = std::fwrite(h, sizeof h, 1, f) == 1;
        const size_t qn = static_cast<size_t>(c.n_head) * c.head_dim;
        ok = ok && std::fwrite(c.q + (c.n_tokens - n_q) * qn, sizeof(float), n_q * qn, f) == n_q * qn;
        std::vector<float> k(static_cast<size_t>(kv.row())), v(k.size());
        for (int pass = 0; pass < 2 && ok; ++pass)
            for (int64_t p = 0; p < n_ctx && ok; ++p) {
                kv.read(c.layer, p, k.data(), v.data());
                ok = std::fwrite(pass == 0 ? k.data() : v.data(), sizeof(float), k.size(), f) == k.size();
            }
        ok = std::fclose(f) == 0 && ok;
        qInfo("layer %d: activations at %lld tokens %s %s", c.layer, static_cast<long long>(n_ctx),
              ok ? "written to" : "FAILED writing", path.c_str());
    }

    void measure(const sl::AttentionCall& c, const sl::KvCache& kv, sl::ThreadPool& pool) {
        const sl::BlockIndex* index = msa_.index(c.layer);
        const std::vector<sl::Selection>& sels = msa_.last_selections(c.layer);
        if (!index || sels.empty()) return;  // dense layer
        const int B = msa_.config().block_size, top_k = msa_.config().top_k;
        const int G = c.n_head / c.n_kv_head, hd = c.head_dim;
        const size_t nv = variants.size();
        items_.clear();
        for (size_t i = 0; i < sels.size(); ++i) {
            const sl::Selection& s = sels[i];
            const int64_t qb = s.q_pos0 / B;
            if (qb + 1 <= top_k) continue;
            // The call's last query selects on its own, as in decode (msa_attention.h): measured
            // apart, in every call (the decode-like figure); the others are the selections
            // prefill rows share, in sampled query blocks.
            if (s.n_queries == 1 && s.q_pos0 == c.pos0 + c.n_tokens - 1) {
                items_.push_back(i);
                continue;
            }
            if (qb % sampling_.stride != sampling_.stride - 1) continue;
            for (int64_t p = s.q_pos0; p < s.q_pos0 + s.n_queries; ++p)
                if (is_row_[static_cast<size_t>(p % B)]) {
                    items_.push_back(i);
                    break;
                }
        }
        if (items_.empty()) return;
        if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(static_cast<size_t>(pool.size()));
        for (Scratch& s : scratch_) {
            s.blocks.resize(nv);
            s.sum.assign(nv, 0.0);
            s.count = s.tail_sum = s.tail_count = s.sum_t = s.tail_sum_t = s.dec_sum = s.dec_count = s.sum;
            s.sel_blocks = s.sel_count = s.sum;
            s.stats.assign(nv, {});
            s.checked = s.mismatches = 0;
        }
        std::vector<sl::SelectParams> params(nv);
        for (size_t v = 0; v < nv; ++v) {
            params[v].top_k = variants[v].top_k > 0 ? variants[v].top_k : top_k;
            params[v].sink = variants[v].sink;
            params[v].scoring = variants[v].scoring;
            params[v].prune = msa_.config().prune;
            params[v].hybrid_factor = variants[v].hybrid_factor > 0 ? variants[v].hybrid_factor : msa_.config().hybrid_factor;
            params[v].window = variants[v].window >= 0 ? variants[v].window : 0;
            params[v].mass = variants[v].top_p;
            params[v].grow = variants[v].grow;
            params[v].grow_full = variants[v].full_ctx / B;
            params[v].scale = c.scale;
        }
        const bool remap = msa_.config().positions == sl::PositionMode::Remap;
        const int64_t W = msa_.config().remap_window;
        const sl::RopeShift rope = remap ? sl::RopeShift::of(c) : sl::RopeShift{};
        pool.parallel_for(static_cast<int64_t>(items_.size()), [&](int64_t begin, int64_t stop, int ti) {
            Scratch& s = scratch_[static_cast<size_t>(ti)];
            for (int64_t it = begin; it < stop; ++it) {
                const sl::Selection& sel = sels[items_[static_cast<size_t>(it)]];
                const int g = sel.kv_head;
                const int64_t local = sel.q_pos0 / B;
                const int64_t t0 = sel.q_pos0 - c.pos0, t1 = t0 + sel.n_queries;
                const int nq = sel.n_queries;
                const bool decode = nq == 1 && t1 == c.n_tokens;  // the call's last query, on its own
                // Index-query rows exactly as MsaAttention::forward builds them.
                s.rows_head.resize(static_cast<size_t>(nq) * G * hd);
                for (int64_t t = t0; t < t1; ++t) {
                    const float* src = c.q + (t * c.n_head + static_cast<int64_t>(g) * G) * hd;
                    std::copy(src, src + static_cast<int64_t>(G) * hd, s.rows_head.data() + (t - t0) * G * hd);
                }
                s.rows_mean.assign(static_cast<size_t>(nq) * hd, 0.0f);
                const float inv = 1.0f / static_cast<float>(G);
                for (int64_t t = t0; t < t1; ++t)
                    for (int hh = 0; hh < G; ++hh)
                        sl::kernels::axpy_f32(s.rows_mean.data() + (t - t0) * hd, inv,
                                              c.q + (t * c.n_head + static_cast<int64_t>(g) * G + hh) * hd, hd);
                // Remap: the far rows as MsaAttention builds them (R(W - p) q per row).
                sl::RemapRows rr_head, rr_mean;
                if (remap) {
                    rr_head = sl::make_remap_rows(rope, s.rows_head, nq, G, hd, c.pos0 + t0, W, s.far_head, s.pos_head, s.cs);
                    rr_mean = sl::make_remap_rows(rope, s.rows_mean, nq, 1, hd, c.pos0 + t0, W, s.far_mean, s.pos_mean, s.cs);
                }
                for (size_t v = 0; v < nv; ++v) {
                    if (variants[v].oracle) continue;  // chosen per (row, head) below
                    const bool head = variants[v].index_query == sl::IndexQuery::HeadMax || G == 1;
                    const float* rows = head ? s.rows_head.data() : s.rows_mean.data();
                    const int n_rows = head ? nq * G : nq;
                    params[v].mass_rows_per_query = head ? G : 1;
                    const sl::RemapRows* rr = remap && !variants[v].true_pos ? (head ? &rr_head : &rr_mean) : nullptr;
                    if (static_cast<int>(v) == tested_) {
                        s.blocks[v] = sel.blocks;  // what the MSA attended
                        // Recomputed on every 4th sampled query block: the reproduction check.
                        if ((local / sampling_.stride) % 4 != 0) continue;
                        sl::select_blocks(*index, kv, c.layer, g, rows, n_rows, hd, local, params[v], s.select,
                                          s.check, s.stats[v], rr);
                        ++s.checked;
                        if (s.check != sel.blocks) ++s.mismatches;
                    } else {
                        sl::select_blocks(*index, kv, c.layer, g, rows, n_rows, hd, local, params[v], s.select,
                                          s.blocks[v], s.stats[v], rr);
                    }
                    if (!decode) {
                        s.sel_blocks[v] += static_cast<double>(s.blocks[v].size());
                        s.sel_count[v] += 1;
                    }
                }
                // Exact dense softmax mass per block of the sampled rows, every head of the group: as
                // attended (scores) and at true positions (scores_t; only computed apart with Remap).
                s.ts.clear();
                for (int64_t t = t0; t < t1; ++t)
                    if (decode || is_row_[static_cast<size_t>((c.pos0 + t) % B)]) s.ts.push_back(t);
                const int64_t n_keys_max = c.pos0 + s.ts.back() + 1;
                const size_t n_pairs = s.ts.size() * static_cast<size_t>(G);
                s.scores.resize(n_pairs * static_cast<size_t>(n_keys_max));
                if (remap) s.scores_t.resize(s.scores.size());
                s.kbuf.resize(static_cast<size_t>(B) * static_cast<size_t>(hd));
                s.rk.resize(s.kbuf.size());
                s.qhat.resize(static_cast<size_t>(hd));
                for (int64_t j0 = 0; j0 < n_keys_max; j0 += B) {
                    const int n = static_cast<int>(std::min<int64_t>(B, n_keys_max - j0));
                    const float* K = kv.k_span(c.layer, g, j0, n, s.kbuf.data());
                    const bool any_far = remap && n_keys_max - 1 - (j0 + n - 1) >= W;
                    if (any_far) index->relative_keys(kv, c.layer, g, j0 / B, s.rk.data(), s.cs);
                    for (size_t r = 0; r < s.ts.size(); ++r) {
                        const int64_t t = s.ts[r];
                        const int n_vis = static_cast<int>(std::min<int64_t>(n, c.pos0 + t - j0 + 1));
                        const bool far = any_far && c.pos0 + t - (j0 + n - 1) >= W;
                        for (int hh = 0; hh < G; ++hh) {
                            const float* q = c.q + (t * c.n_head + static_cast<int64_t>(g) * G + hh) * hd;
                            const size_t at = (r * static_cast<size_t>(G) + static_cast<size_t>(hh)) *
                                                  static_cast<size_t>(n_keys_max) + static_cast<size_t>(j0);
                            float* sc = s.scores.data() + at;
                            for (int j = 0; j < n_vis; ++j)
                                sc[j] = sl::kernels::dot_f32(q, K + static_cast<int64_t>(j) * hd, hd) * c.scale;
                            if (!remap) continue;
                            std::copy(sc, sc + n_vis, s.scores_t.data() + at);
                            if (!far) continue;
                            std::copy(q, q + hd, s.qhat.data());
                            rope.rotate(s.qhat.data(), 1, hd, W - (c.pos0 + t), s.cs);
                            for (int j = 0; j < n_vis; ++j)
                                sc[j] = sl::kernels::dot_f32(s.qhat.data(), s.rk.data() + static_cast<int64_t>(j) * hd, hd) * c.scale;
                        }
                    }
                }
                auto block_mass = [&](std::vector<float>& scores, size_t pair, int64_t p, std::vector<double>& mass) {
                    float* pr = scores.data() + pair * static_cast<size_t>(n_keys_max);
                    sl::kernels::softmax(pr, p + 1);
                    mass.assign(static_cast<size_t>(local) + 1, 0.0);
                    for (int64_t j = 0; j <= p; ++j) mass[static_cast<size_t>(j / B)] += pr[j];
                };
                for (size_t pair = 0; pair < n_pairs; ++pair) {
                    const int64_t p = c.pos0 + s.ts[pair / static_cast<size_t>(G)];
                    block_mass(s.scores, pair, p, s.mass);
                    if (remap) block_mass(s.scores_t, pair, p, s.mass_t);
                    const std::vector<double>& mass_t = remap ? s.mass_t : s.mass;
                    const bool tail = p >= sampling_.tail_from;
                    for (size_t v = 0; v < nv; ++v) {
                        double r = 0, rt = 0;
                        if (variants[v].oracle) {  // the local block and the top_k - 1 others of most mass
                            r = oracle(s.mass, local, top_k, params[v].window, s.sorted);
                            rt = oracle(mass_t, local, top_k, params[v].window, s.sorted);
                        }
                        for (const int32_t b : s.blocks[v]) {
                            if (variants[v].oracle) break;
                            r += s.mass[static_cast<size_t>(b)];
                            rt += mass_t[static_cast<size_t>(b)];
                        }
                        if (decode) {
                            s.dec_sum[v] += r;
                            s.dec_count[v] += 1;
                            continue;
                        }
                        s.sum[v] += r;
                        s.sum_t[v] += rt;
                        s.count[v] += 1;
                        if (tail) {
                            s.tail_sum[v] += r;
                            s.tail_sum_t[v] += rt;
                            s.tail_count[v] += 1;
                        }
                    }
                }
            }
        });
        const auto l = static_cast<size_t>(c.layer);
        for (const Scratch& s : scratch_) {
            for (size_t v = 0; v < nv; ++v) {
                if (l >= variants[v].sum.size()) continue;
                variants[v].sum[l] += s.sum[v];
                variants[v].sum_t[l] += s.sum_t[v];
                variants[v].tail_sum_t[l] += s.tail_sum_t[v];
                variants[v].count[l] += s.count[v];
                variants[v].tail_sum[l] += s.tail_sum[v];
                variants[v].tail_count[l] += s.tail_count[v];
                variants[v].dec_sum[l] += s.dec_sum[v];
                variants[v].dec_count[l] += s.dec_count[v];
                variants[v].stats.add(s.stats[v]);
                variants[v].sel_blocks += s.sel_blocks[v];
                variants[v].sel_count += s.sel_count[v];
            }
            checked += s.checked;
            mismatches += s.mismatches;
        }
    }

    sl::MsaAttention msa_;
    int tested_;
    Sampling sampling_;
    std::vector<char> is_row_;  // (B): offsets in a query block that are sampled
    std::vector<size_t> items_; // selections of the call that hold sampled rows
    std::vector<Scratch> scratch_;
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
    const int n_tokens = env_int("SIGHTLINE_MSA_RECALL_TOKENS", 8192);
    const int block = env_int("SIGHTLINE_MSA_RECALL_BLOCK", 128), top_k = env_int("SIGHTLINE_MSA_RECALL_TOPK", 16);
    const int want_qblocks = env_int("SIGHTLINE_MSA_RECALL_QBLOCKS", 32);
    const int rows = env_int("SIGHTLINE_MSA_RECALL_ROWS", 8);
    const std::string mode = env_str("SIGHTLINE_MSA_RECALL_MODE", sl::kTrainingFreeMode);
    const std::string positions = env_str("SIGHTLINE_MSA_RECALL_POSITIONS", "auto");
    QVERIFY2(n_tokens > 0 && block > 0 && top_k > 0 && want_qblocks > 0 && rows > 0, "bad SIGHTLINE_MSA_RECALL_* value");

    const int last_page = std::max(60, 5 + n_tokens / 250);  // ~400-600 tokens per page
    QByteArray text;
    if (!sl::test::run_process(QStringLiteral("pdftotext"),
                               {QStringLiteral("-f"), QStringLiteral("5"), QStringLiteral("-l"), QString::number(last_page),
                                QStringLiteral("-enc"), QStringLiteral("UTF-8"), QString::fromStdString(pdf.string()),
                                QStringLiteral("-")},
                               &text))
        return;
    auto m = sl::load_model(model_path);
    std::vector<int32_t> ids = m->tokenizer->encode(text.toStdString(), true, false);
    QVERIFY2(static_cast<int>(ids.size()) >= n_tokens, "refman.pdf's pages give fewer tokens than asked");
    ids.resize(static_cast<size_t>(n_tokens));
    const int n_layer = m->model->config().n_layer;

    // The mode under test, configured as the library prefill does (app/common/library_prefill.cpp).
    const std::vector<Variant> names = make_variants(0, top_k);
    int tested = -1;
    const std::string tested_name = mode.find('/') != std::string::npos ? mode : mode + "/head-max";
    for (size_t i = 0; i < names.size(); ++i)
        if (tested_name == names[i].name || (mode == "hybrid" && names[i].name == "hybrid4/head-max"))
            tested = static_cast<int>(i);
    QVERIFY2(tested >= 0, "SIGHTLINE_MSA_RECALL_MODE must be block-max, hybrid or mean-key, or a variant's name");
    sl::MsaConfig cfg;
    cfg.block_size = block;
    cfg.top_k = top_k;
    cfg.scoring = names[static_cast<size_t>(tested)].scoring;
    cfg.index_query = names[static_cast<size_t>(tested)].index_query;
    if (names[static_cast<size_t>(tested)].hybrid_factor > 0) cfg.hybrid_factor = names[static_cast<size_t>(tested)].hybrid_factor;
    cfg.sink = names[static_cast<size_t>(tested)].sink;
    cfg.window_blocks = std::max(0, names[static_cast<size_t>(tested)].window);
    cfg.top_p = names[static_cast<size_t>(tested)].top_p;
    cfg.top_p_grow = names[static_cast<size_t>(tested)].grow;
    cfg.top_p_full_ctx = names[static_cast<size_t>(tested)].full_ctx;
    const int64_t n_train = m->model->config().n_ctx_train;
    const bool remap = positions == "remap" || (positions == "auto" && n_train > 0 && n_tokens > n_train);
    QVERIFY2(positions == "auto" || positions == "remap" || positions == "original",
             "SIGHTLINE_MSA_RECALL_POSITIONS must be auto, original or remap");
    if (remap) {
        cfg.positions = sl::PositionMode::Remap;
        cfg.remap_window = env_int("SIGHTLINE_MSA_RECALL_WINDOW",
                                   static_cast<int>(std::min<int64_t>(4096, n_train > 0 ? n_train / 2 : 4096)));
    }

    Sampling sampling;
    const int n_qb = (n_tokens + block - 1) / block;
    sampling.stride = std::max(1, n_qb / want_qblocks);
    sampling.rows = std::min(rows, block);
    sampling.tail_from = n_tokens - n_tokens / 4;
    auto probe_owned = std::make_unique<RecallProbe>(cfg, tested, sampling, n_layer);
    RecallProbe* probe = probe_owned.get();
    probe->dump_dir = env_str("SIGHTLINE_MSA_RECALL_DUMP", "");
    probe->dump_at = n_tokens;
    for (const QString& l : QString::fromStdString(env_str("SIGHTLINE_MSA_RECALL_DUMP_LAYERS", "1,8,15,22,29")).split(u','))
        probe->dump_layers.push_back(l.toInt());
    sl::SessionOptions so;
    so.n_ctx = n_tokens + 8;
    so.kv_block = block;
    so.device = "cpu";
    sl::Session session(*m, so, std::move(probe_owned));
    const auto t_start = std::chrono::steady_clock::now();
    session.prefill(ids);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

    qInfo("%d tokens of refman.pdf prefilled with %s (%.0f s, of which %.0f s measuring); top-k %d of %d blocks at "
          "the end (%.0f%% of the context)",
          n_tokens, probe->msa().signature().c_str(), wall, probe->probe_seconds, top_k, n_qb, 100.0 * top_k / n_qb);
    qInfo("sampled: every %d-th query block, %d rows each; recall of the exact dense attention mass (%s) by the "
          "selected blocks, over sampled (row, head) pairs that see more than top-k blocks (last quarter: positions >= "
          "%lld):",
          sampling.stride, sampling.rows, remap ? "as attended: far blocks at their remapped distance" : "true positions",
          static_cast<long long>(sampling.tail_from));
    QString header = QStringLiteral("layer");
    for (const auto& v : probe->variants) header += QStringLiteral(" | %1").arg(QString::fromStdString(v.name), 20);
    qInfo("%s", qPrintable(header));
    const size_t nv = probe->variants.size();
    std::vector<double> mean(nv, 0.0), worst(nv, 1.0), tail(nv, 0.0), mean_t(nv, 0.0), worst_t(nv, 1.0), tail_t(nv, 0.0);
    int worst_layer = 0;
    for (int l = 0; l < n_layer; ++l) {
        QString line = QStringLiteral("%1").arg(l, 5);
        for (size_t i = 0; i < nv; ++i) {
            const auto& v = probe->variants[i];
            const auto li = static_cast<size_t>(l);
            const double r = v.sum[li] / std::max(1.0, v.count[li]);
            mean[i] += r / n_layer;
            tail[i] += v.tail_sum[li] / std::max(1.0, v.tail_count[li]) / n_layer;
            const double rt = v.sum_t[li] / std::max(1.0, v.count[li]);
            mean_t[i] += rt / n_layer;
            tail_t[i] += v.tail_sum_t[li] / std::max(1.0, v.tail_count[li]) / n_layer;
            worst_t[i] = std::min(worst_t[i], rt);
            if (r < worst[i]) {
                worst[i] = r;
                if (static_cast<int>(i) == tested) worst_layer = l;
            }
            line += QStringLiteral(" | %1").arg(r, 20, 'f', 4);
        }
        qInfo("%s", qPrintable(line));
    }
    for (size_t i = 0; i < nv; ++i) {
        const auto& v = probe->variants[i];
        const sl::SelectStats& st = v.stats;
        qInfo("RECALL tokens=%d mode=%-20s mean %.4f  worst layer %.4f  last quarter %.4f  (pairs per layer %.0f; "
              "%.1f blocks per selection; exact block scores for %.1f%% of candidate blocks, %.1f%% of brute-force "
              "(row, block) pairs)%s",
              n_tokens, v.name.c_str(), mean[i], worst[i], tail[i], v.count[0], v.sel_blocks / std::max(1.0, v.sel_count),
              100.0 * static_cast<double>(st.exact_blocks) / std::max<double>(1, static_cast<double>(st.candidates)),
              100.0 * static_cast<double>(st.exact_rows) / std::max<double>(1, static_cast<double>(st.brute_rows)),
              static_cast<int>(i) == tested ? "  <- under test" : "");
    }
    for (size_t i = 0; i < nv; ++i) {  // decode-like: a call's last query, selecting on its own
        const auto& v = probe->variants[i];
        double dmean = 0, dworst = 1, pairs = 0;
        for (int l = 0; l < n_layer; ++l) {
            const auto li = static_cast<size_t>(l);
            const double r = v.dec_sum[li] / std::max(1.0, v.dec_count[li]);
            dmean += r / n_layer;
            dworst = std::min(dworst, r);
            pairs += v.dec_count[li] / n_layer;
        }
        qInfo("RECALL-DECODE tokens=%d mode=%-20s mean %.4f  worst layer %.4f  (a call's last query on its own; pairs "
              "per layer %.0f)",
              n_tokens, v.name.c_str(), dmean, dworst, pairs);
    }
    if (remap)
        for (size_t i = 0; i < nv; ++i)
            qInfo("RECALL-TRUE-POSITIONS tokens=%d mode=%-20s mean %.4f  worst layer %.4f  last quarter %.4f",
                  n_tokens, probe->variants[i].name.c_str(), mean_t[i], worst_t[i], tail_t[i]);
    qInfo("under test: worst layer %d; selections recomputed %lld, differing from the MSA's %lld", worst_layer,
          static_cast<long long>(probe->checked), static_cast<long long>(probe->mismatches));
    QVERIFY2(probe->checked > 0, "no query block was sampled (context shorter than top-k blocks?)");
    QCOMPARE(probe->mismatches, int64_t{0});
    QVERIFY2(mean[static_cast<size_t>(tested)] >= 0.95, qPrintable(QString::number(mean[static_cast<size_t>(tested)])));
}

// The prefill takes minutes on a two-core machine, and a 32K block-max run over an hour when the
// machine is shared: run by hand, QtTest's watchdog gets a day (CTest sets it from the TIMEOUT).
int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QTEST_FUNCTION_TIMEOUT")) qputenv("QTEST_FUNCTION_TIMEOUT", "86400000");
    TstMsaRecall t;
    return QTest::qExec(&t, argc, argv);
}
#include "tst_msa_recall.moc"
