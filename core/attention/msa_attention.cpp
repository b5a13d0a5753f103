#include "core/attention/msa_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/attention/rope_shift.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/ops.h"

namespace sl {

// One pool thread's buffers; sized by the largest call seen and reused.
struct MsaAttention::Scratch {
    std::vector<float> rows;    // index query rows (n_rows, head_dim)
    SelectScratch select;
    SelectStats stats;
    std::vector<float> m, l;    // per attention row: running max and sum of the online softmax
    std::vector<float> acc;     // (rows, head_dim): unnormalized output
    std::vector<float> bref;    // (rows, k): the running max a block's sum was taken against
    std::vector<float> bsum;    // (rows, k): Σ exp(s - bref) over the block's tokens
    std::vector<float> kt, rkt;     // (head_dim, tile_ldk(B)): a block's keys (or k^) transposed
    std::vector<float> p;           // (kTileRows, tile_ldk(B)): a tile's scores, then exp(s - m)
    std::vector<float> kbuf, vbuf;  // (B, head_dim): a block's keys / values as f32
    // Remap (rope_shift.h): index rows as R(W - p) q and their positions; the item's query rows
    // as R(W - p) q; a far block's keys as k^ = R(-b*B) k; cos/sin.
    std::vector<float> far_rows;    // (n_rows, head_dim)
    std::vector<int64_t> row_pos;   // (n_rows)
    std::vector<float> qhat;        // (queries * heads of the item, head_dim); rows rotated per
                                    // block (decode): (heads of the item, head_dim)
    std::vector<float> rk;          // (B, head_dim)
    std::vector<float> cs;
    std::vector<float> tok;         // token_mass: (rows, k, B) exp(s - bref) per token
};

namespace {

// Rows of a selection (queries x the group's heads) from which the sparse branch transposes its
// blocks for the tile kernel.
constexpr int kMinTileRows = 16;

std::string scoring_name(const MsaConfig& c) {
    switch (c.scoring) {
    case BlockScoring::BlockMax: return " block-max";
    case BlockScoring::MeanKey: return " mean-key";
    case BlockScoring::Hybrid:
        return " hybrid" + std::to_string(c.hybrid_factor) +
               (c.decode_hybrid_factor > 0 && c.decode_hybrid_factor != c.hybrid_factor
                    ? " decode" + std::to_string(c.decode_hybrid_factor) : "");
    case BlockScoring::Native: return " native";
    }
    return " ?";
}

}  // namespace

void parse_msa_scoring(const std::string& mode, MsaConfig& c) {
    std::string scoring = mode;
    IndexQuery query = IndexQuery::HeadMax;
    int window = 0;
    float top_p = 0.0f;
    int grow = 4;
    int full_ctx = 0;
    if (const size_t cp = scoring.rfind("/c"); cp != std::string::npos) {
        const std::string n = scoring.substr(cp + 2);
        if (n.size() < 2 || n.size() > 5 || n.back() != 'k' || n.find_first_not_of("0123456789") != n.size() - 1 ||
            std::atoi(n.c_str()) < 1)
            throw Error("MSA: bad growth length in '" + mode + "' (/cNk: N x 1024 tokens, N from 1)");
        full_ctx = std::atoi(n.c_str()) * 1024;
        scoring.resize(cp);
        if (scoring.rfind("/p") == std::string::npos || scoring.rfind("/p") < scoring.rfind('/'))
            throw Error("MSA: '" + mode + "' has /cNk without a mass target before it (/pN)");
    }
    if (const size_t pp = scoring.rfind("/p"); pp != std::string::npos) {
        const std::string n = scoring.substr(pp + 2);
        const size_t x = n.find('x');
        const std::string pct = n.substr(0, x), g = x == std::string::npos ? std::string("4") : n.substr(x + 1);
        auto number = [](const std::string& v) {
            return !v.empty() && v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos;
        };
        if (!number(pct) || !number(g) || std::atoi(pct.c_str()) < 1 || std::atoi(pct.c_str()) > 100 || std::atoi(g.c_str()) < 1)
            throw Error("MSA: bad mass target in '" + mode + "' (/pN or /pNxM: N percent, 1 to 100, M from 1)");
        top_p = static_cast<float>(std::atoi(pct.c_str())) / 100.0f;
        grow = std::atoi(g.c_str());
        scoring.resize(pp);
    }
    if (const size_t w = scoring.rfind("/w"); w != std::string::npos) {
        const std::string n = scoring.substr(w + 2);
        if (n.empty() || n.size() > 5 || n.find_first_not_of("0123456789") != std::string::npos)
            throw Error("MSA: bad local window in '" + mode + "' (/wN, N blocks)");
        window = std::atoi(n.c_str());
        scoring.resize(w);
    }
    bool sink = false;
    if (scoring.size() > 5 && scoring.compare(scoring.size() - 5, 5, "/sink") == 0) {
        sink = true;
        scoring.resize(scoring.size() - 5);
    }
    if (const size_t slash = scoring.find('/'); slash != std::string::npos) {
        const std::string q = scoring.substr(slash + 1);
        if (q == "group-mean") query = IndexQuery::GroupMean;
        else if (q != "head-max") throw Error("MSA: unknown index query '" + q + "' in '" + mode + "' (head-max, group-mean)");
        scoring.resize(slash);
    }
    int factor = c.hybrid_factor, decode = 0;
    BlockScoring s = BlockScoring::BlockMax;
    const size_t dpos = scoring.find('d', 6);  // hybridNdM: decode calls shortlist M x top-k
    const std::string fac = scoring.substr(0, dpos);
    const std::string dec = dpos == std::string::npos ? std::string() : scoring.substr(dpos + 1);
    auto digits = [](const std::string& x, size_t from) {
        return x.size() > from && x.find_first_not_of("0123456789", from) == std::string::npos && x.size() - from <= 4;
    };
    const bool plain = dpos == std::string::npos;  // no decode factor
    if (scoring.rfind("hybrid", 0) == 0 && ((fac.size() == 6 && plain) || digits(fac, 6)) && (plain || digits(dec, 0))) {
        s = BlockScoring::Hybrid;
        if (fac.size() > 6) factor = std::atoi(fac.c_str() + 6);
        if (!plain) decode = std::atoi(dec.c_str());
        if (factor < 1 || (!plain && decode < 1))
            throw Error("MSA: bad shortlist factor in '" + mode + "' (hybridN or hybridNdM, N and M from 1)");
    } else if (scoring == "block-max") s = BlockScoring::BlockMax;
    else if (scoring == "mean-key") s = BlockScoring::MeanKey;
    else if (scoring == "native") s = BlockScoring::Native;
    else throw Error("MSA: unknown scoring mode '" + mode + "' (block-max, mean-key, hybrid[N[dM]], native; /head-max or /group-mean)");
    c.scoring = s;
    c.hybrid_factor = factor;
    c.decode_hybrid_factor = decode;
    c.index_query = query;
    c.window_blocks = window;
    c.sink = sink;
    c.top_p = top_p;
    c.top_p_grow = grow;
    c.top_p_full_ctx = full_ctx;
}

MsaAttention::MsaAttention(MsaConfig config) : config_(config) {
    if (config_.block_size <= 0) throw Error("MSA: block size must be positive, got " + std::to_string(config_.block_size));
    if (config_.top_k <= 0) throw Error("MSA: top-k must be positive, got " + std::to_string(config_.top_k));
    if (config_.dense_layers < 0) throw Error("MSA: dense layers must be >= 0");
    if (config_.window_blocks < 0) throw Error("MSA: the local window must be >= 0 blocks");
    if (!(config_.top_p >= 0.0f && config_.top_p <= 1.0f) || config_.top_p_grow < 1 || config_.top_p_full_ctx < 0)
        throw Error("MSA: the mass target must lie in [0, 1] and its growth factor be >= 1");
    if (config_.hybrid_factor < 1 || config_.decode_hybrid_factor < 0)
        throw Error("MSA: the hybrid shortlist factors must be >= 1 (decode: >= 0, 0 for the same)");
    if (config_.positions == PositionMode::Remap && config_.remap_window <= 0)
        throw Error("MSA: the remap window must be positive, got " + std::to_string(config_.remap_window));
}

MsaAttention::~MsaAttention() = default;

std::string MsaAttention::signature() const {
    const MsaConfig& c = config_;
    return "msa b" + std::to_string(c.block_size) + " k" + std::to_string(c.top_k) + (c.sink ? " sink" : "") +
           (c.window_blocks > 0 ? " w" + std::to_string(c.window_blocks) : "") +
           (c.top_p > 0.0f ? " p" + std::to_string(static_cast<int>(std::lround(c.top_p * 100.0f))) + "x" +
                                 std::to_string(c.top_p_grow) +
                                 (c.top_p_full_ctx > 0 ? " full" + std::to_string(c.top_p_full_ctx) : "")
                           : "") +
           " d" +
           std::to_string(c.dense_layers) + scoring_name(c) +
           (c.index_query == IndexQuery::HeadMax ? " head-max" : " group-mean") +
           (c.positions == PositionMode::Remap ? " remap" + std::to_string(c.remap_window) : "") +
           // What changed the K/V computed under the same settings: v2, far blocks are selected at
           // their remapped distance (before: at their true one); v3, a call's last query selects
           // on its own (before: with its query block).
           " v3";
}

void MsaAttention::deliver(const AttentionCall& call, std::vector<Selection> selections) {
    if (call.layer < 0) throw Error("MSA: negative layer");
    if (layers_.size() <= static_cast<size_t>(call.layer)) layers_.resize(static_cast<size_t>(call.layer) + 1);
    Layer& L = layers_[static_cast<size_t>(call.layer)];
    L.selections = std::move(selections);
    if (observer_) observer_(call.layer, call, L.selections);
}

const std::vector<Selection>& MsaAttention::last_selections(int layer) const {
    static const std::vector<Selection> none;
    if (layer < 0 || layer >= static_cast<int>(layers_.size())) return none;
    return layers_[static_cast<size_t>(layer)].selections;
}

const BlockIndex* MsaAttention::index(int layer) const {
    if (layer < 0 || layer >= static_cast<int>(layers_.size())) return nullptr;
    return layers_[static_cast<size_t>(layer)].index.get();
}

int64_t MsaAttention::native_keys(int layer) const {
    if (layer < 0 || layer >= static_cast<int>(layers_.size())) return 0;
    return layers_[static_cast<size_t>(layer)].ik_n;
}

const float* MsaAttention::native_key_data(int layer) const {
    if (layer < 0 || layer >= static_cast<int>(layers_.size())) return nullptr;
    const Layer& L = layers_[static_cast<size_t>(layer)];
    return L.ik_n > 0 ? L.ikeys.data() : nullptr;
}

void MsaAttention::set_native_keys(int layer, const KvCache& kv, const float* keys, int64_t n, int dim) {
    if (layer < 0 || n < 0 || dim <= 0) throw Error("MSA: bad native keys (layer " + std::to_string(layer) + ")");
    if (layers_.size() <= static_cast<size_t>(layer)) layers_.resize(static_cast<size_t>(layer) + 1);
    Layer& L = layers_[static_cast<size_t>(layer)];
    L.index.reset();
    L.kv = &kv;
    L.selections.clear();
    L.ikeys.assign(keys, keys + static_cast<size_t>(n) * static_cast<size_t>(dim));
    L.ik_n = n;
    L.ik_dim = dim;
    L.ik_bounded = 0;
}

void MsaAttention::set_index_keys(int layer, const KvCache& kv, const float* keys, int64_t n, int dim, int64_t from) {
    if (from > 0 && from <= n && layer >= 0 && static_cast<size_t>(layer) < layers_.size()) {
        Layer& L = layers_[static_cast<size_t>(layer)];
        if (L.kv == &kv && L.ik_dim == dim && L.ik_n >= from) {
            const auto d = static_cast<size_t>(dim);
            L.ikeys.resize(static_cast<size_t>(n) * d);
            std::copy(keys + static_cast<size_t>(from) * d, keys + static_cast<size_t>(n) * d,
                      L.ikeys.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(from) * d));
            L.ik_n = n;
            L.ik_bounded = std::min(L.ik_bounded, from / config_.block_size);
            if (L.index) L.index->truncate(from);
            L.kv = &kv;
            L.selections.clear();
            return;
        }
    }
    set_native_keys(layer, kv, keys, n, dim);
}

KvBlockSummaries MsaAttention::block_summaries(int layer) const {
    KvBlockSummaries s;
    if (layer < 0 || layer >= static_cast<int>(layers_.size())) return s;
    const Layer& L = layers_[static_cast<size_t>(layer)];
    s.block_size = config_.block_size;
    if (L.index && L.index->n_tokens() > 0) {
        const BlockIndex* index = L.index.get();
        s.n = index->n_tokens();
        s.floats = static_cast<int>(index->floats_per_block());
        s.get = [index](int64_t b, float* out) { index->export_block(b, out); };
    } else if (!L.index && L.pending_n > 0) {
        const float* data = L.pending.data();
        const auto F = static_cast<size_t>(L.pending_floats);
        s.n = L.pending_n;
        s.floats = L.pending_floats;
        s.get = [data, F](int64_t b, float* out) { std::copy(data + static_cast<size_t>(b) * F, data + static_cast<size_t>(b + 1) * F, out); };
    }
    return s;
}

void MsaAttention::set_block_summaries(int layer, const KvCache& kv, const float* data, int64_t b0, int64_t n, int block_size,
                                       int floats) {
    const int B = config_.block_size;
    if (layer < 0 || !data || b0 < 0 || n <= b0 * B || block_size != B || floats <= 0) return;
    if (layers_.size() <= static_cast<size_t>(layer)) layers_.resize(static_cast<size_t>(layer) + 1);
    Layer& L = layers_[static_cast<size_t>(layer)];
    const auto F = static_cast<size_t>(floats);
    const size_t count = static_cast<size_t>((n + B - 1) / B - b0) * F;
    if (L.kv != &kv) L.forget();  // held for another cache: not this context's (as forward() forgets it)
    L.kv = &kv;
    L.selections.clear();
    if (L.index) {
        if (L.index->floats_per_block() == F && b0 * B <= L.index->n_tokens()) {
            L.index->import_blocks(b0, n, data);
            ++stats_.imported_indexes;
            return;
        }
        if (b0 > 0) return;  // the index keeps what it has; the next call summarizes the rest from the keys
        L.index.reset();
    }
    if (b0 == 0) {
        L.pending.assign(data, data + count);
    } else if (L.pending_floats == floats && b0 * B <= L.pending_n) {
        L.pending.resize(static_cast<size_t>(b0) * F);
        L.pending.insert(L.pending.end(), data, data + count);
    } else {
        return;  // nothing to continue: the next call summarizes from what is held (the keys)
    }
    L.pending_n = n;
    L.pending_floats = floats;
}

void MsaAttention::invalidate() {
    for (auto& l : layers_) {
        l.pending.clear();
        l.pending_n = 0;
        l.index.reset();
        l.kv = nullptr;
        l.selections.clear();
        l.ikeys.clear();
        l.ik_n = 0;
        l.ik_bounded = 0;
    }
}

void MsaAttention::truncate_state(int64_t n) {
    n = std::max<int64_t>(n, 0);
    for (auto& l : layers_) {
        l.selections.clear();  // they were made for queries that are gone
        if (l.index) l.index->truncate(n);
        l.pending_n = std::min(l.pending_n, n);
        l.ik_n = std::min(l.ik_n, n);
        l.ik_bounded = std::min(l.ik_bounded, n / config_.block_size);
    }
}

namespace {
// Query rows up to which a native selection is Quest-pruned (see the call below).
constexpr int kNativePruneRows = 32;
}  // namespace

void MsaAttention::forward(const AttentionCall& c, const KvCache& kv, ThreadPool& pool) {
    if (c.layer < 0) throw Error("MSA: negative layer");
    if (layers_.size() <= static_cast<size_t>(c.layer)) layers_.resize(static_cast<size_t>(c.layer) + 1);
    Layer& L = layers_[static_cast<size_t>(c.layer)];
    if (c.layer < config_.dense_layers || c.window > 0) {  // sliding-window layers: a few blocks, dense
        L.selections.clear();
        dense_.forward(c, kv, pool);
        return;
    }
    if (c.n_tokens <= 0) return;
    if (!c.causal) {
        // A bidirectional run (Gemma 3's image tokens): attended exactly, as a sliding-window layer
        // is — its queries see every key of the past and of the run (dense). The block index
        // catches up with the run's keys at the next call; native mode keeps its index keys.
        if (config_.scoring == BlockScoring::Native && c.index_k && c.index_dim > 0 && c.pos0 <= L.ik_n &&
            (L.ik_n == 0 || L.ik_dim == c.index_dim)) {
            L.ik_dim = c.index_dim;
            const auto dim = static_cast<size_t>(c.index_dim);
            L.ikeys.resize(static_cast<size_t>(c.pos0 + c.n_tokens) * dim);
            std::copy(c.index_k, c.index_k + static_cast<size_t>(c.n_tokens) * dim,
                      L.ikeys.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(c.pos0) * dim));
            L.ik_n = c.pos0 + c.n_tokens;
            L.ik_bounded = std::min(L.ik_bounded, c.pos0 / config_.block_size);
        }
        L.selections.clear();
        ++stats_.bidirectional_calls;
        dense_.forward(c, kv, pool);
        return;
    }
    if (c.n_kv_head != kv.n_kv_head() || c.head_dim != kv.head_dim() || c.n_head % c.n_kv_head != 0)
        throw Error("MSA: call of " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) + " heads of dim " +
                    std::to_string(c.head_dim) + " does not match the KV cache (" + std::to_string(kv.n_kv_head()) +
                    " KV heads of dim " + std::to_string(kv.head_dim()) + ")");
    const int B = config_.block_size;
    const int hd = c.head_dim;
    const int G = c.n_head / c.n_kv_head;
    const int64_t end = c.pos0 + c.n_tokens;

    // Index: summarize what was appended (or rewritten) since the last call.
    if (L.kv != &kv) L.forget();  // another cache: the index keys belong to another context
    const bool remap = config_.positions == PositionMode::Remap;
    if (remap && c.rope_dim <= 0)
        throw Error("MSA: position remapping needs the call's RoPE parameters (layer " + std::to_string(c.layer) + " has none)");
    const RopeShift rope = remap ? RopeShift::of(c) : RopeShift{};
    const int64_t W = config_.remap_window;
    if (L.index && remap && !L.index->relative().same(rope)) L.index.reset();
    if (!L.index) {
        L.index = std::make_unique<BlockIndex>(B, kv.n_kv_head(), hd, rope);
        L.kv = &kv;
        // A restored context's summaries (a save's, same model: same RoPE), when they fit.
        if (L.pending_n > 0 && static_cast<size_t>(L.pending_floats) == L.index->floats_per_block()) {
            L.index->import_blocks(0, L.pending_n, L.pending.data());
            ++stats_.imported_indexes;
        }
        L.pending = {};
        L.pending_n = 0;
    }
    L.index->update(kv, c.layer, std::min(L.index->n_tokens(), c.pos0), end, &pool);
    const BlockIndex& index = *L.index;

    if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(static_cast<size_t>(pool.size()));
    for (auto& s : scratch_)
        if (!s) s = std::make_unique<Scratch>();

    const int64_t qb0 = c.pos0 / B;
    const int64_t n_qb = (end - 1) / B - qb0 + 1;
    // The call's last query (the one whose logits the model returns) selects on its own when its
    // query block holds other queries of the call: a query group of its own after the others.
    const bool split_last = end - std::max(c.pos0, (end - 1) / B * B) > 1;
    const int64_t n_groups = n_qb + (split_last ? 1 : 0);
    const int64_t n_items = n_groups * c.n_kv_head;
    L.selections.resize(static_cast<size_t>(n_items));
    SelectParams sp;
    sp.top_k = config_.top_k;
    sp.sink = config_.sink;
    sp.window = config_.window_blocks;
    sp.mass = config_.top_p;
    sp.grow = config_.top_p_grow;
    sp.grow_full = config_.top_p_full_ctx / config_.block_size;
    sp.scale = c.scale;
    sp.scoring = config_.scoring;
    sp.prune = config_.prune;
    sp.hybrid_factor = c.n_tokens == 1 && config_.decode_hybrid_factor > 0 ? config_.decode_hybrid_factor : config_.hybrid_factor;
    // Native: store this call's index keys; use them when those of [0, pos0) are all here.
    bool native = false;
    if (config_.scoring == BlockScoring::Native) {
        if (!c.index_q || !c.index_k)
            throw Error("MSA: native mode needs the model's index queries and keys, and layer " + std::to_string(c.layer) +
                        " has none (a file without an MSA indexer, or a dense layer of the file run sparse)");
        if (c.index_n_head != c.n_kv_head || c.index_dim <= 0)
            throw Error("MSA: " + std::to_string(c.index_n_head) + " index heads for " + std::to_string(c.n_kv_head) +
                        " KV groups (native mode needs one per group)");
        if (L.ik_n > 0 && L.ik_dim != c.index_dim)
            throw Error("MSA: layer " + std::to_string(c.layer) + " holds index keys of dim " + std::to_string(L.ik_dim) +
                        ", the call's are of dim " + std::to_string(c.index_dim));
        if (c.pos0 <= L.ik_n) {
            L.ik_dim = c.index_dim;
            const auto dim = static_cast<size_t>(c.index_dim);
            L.ikeys.resize(static_cast<size_t>(end) * dim);
            std::copy(c.index_k, c.index_k + static_cast<size_t>(c.n_tokens) * dim,
                      L.ikeys.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(c.pos0) * dim));
            L.ik_n = end;
            native = true;
            // Quest summaries of the full blocks not summarized yet (or rewritten from pos0 on).
            const int64_t full = L.ik_n / B;
            const int64_t from = std::min(L.ik_bounded, c.pos0 / B);
            if (from < full)
                native_bounds(L.ikeys.data(), B, c.index_dim, from, full, L.ik_min, L.ik_max, L.ik_abs);
            L.ik_bounded = full;
        } else {
            sp.scoring = BlockScoring::BlockMax;  // keys of [ik_n, pos0) are missing: training-free
            stats_.native_fallbacks += n_items;
        }
    }
    // Query tokens [t0, t1) of the call in query group qi: query block qb0 + qi, less the last
    // query when split_last, which is group n_qb.
    auto q_range = [&](int64_t qi, int64_t& t0, int64_t& t1) {
        if (qi == n_qb) {
            t0 = c.n_tokens - 1;
            t1 = c.n_tokens;
            return;
        }
        const int64_t qb = qb0 + qi;
        t0 = std::max(c.pos0, qb * B) - c.pos0;
        t1 = std::min(end, (qb + 1) * B) - c.pos0;
        if (split_last && qi == n_qb - 1) --t1;
    };

    // Index branch: one selection per (query block, KV group).
    for (auto& s : scratch_) s->stats = {};
    pool.parallel_for(n_items, [&](int64_t begin, int64_t stop, int ti) {
        Scratch& s = *scratch_[static_cast<size_t>(ti)];
        for (int64_t it = begin; it < stop; ++it) {
            const int g = static_cast<int>(it % c.n_kv_head);
            int64_t t0 = 0, t1 = 0;
            q_range(it / c.n_kv_head, t0, t1);
            const int nq = static_cast<int>(t1 - t0);
            const int64_t qb = (c.pos0 + t0) / B;  // the query block: its KV block is the local one
            Selection& sel = L.selections[static_cast<size_t>(it)];
            sel.kv_head = g;
            sel.q_pos0 = c.pos0 + t0;
            sel.n_queries = nq;
            if (native) {
                const int64_t stride = static_cast<int64_t>(c.index_n_head) * c.index_dim;
                // Quest pruning for a few rows (decode, short chunks) only: one row's bound is tight
                // enough to skip blocks when the keys cluster (1.7x less selection time on
                // clustered keys, +5 % on random ones), while the max of a whole query block's 128
                // row bounds prunes almost nothing and costs +17 % (select_blocks_native on 256
                // blocks of 128 keys, d 128; the random-weight M3 stack at 32K: prefill 0.92x).
                const NativeBounds nb{L.ik_min.data(), L.ik_max.data(), L.ik_abs.data()};
                select_blocks_native(L.ikeys.data(), B, c.index_dim, c.index_q + t0 * stride + static_cast<int64_t>(g) * c.index_dim,
                                     nq, stride, qb, sp, s.select, sel.blocks, s.stats,
                                     nq <= kNativePruneRows ? &nb : nullptr);
                continue;
            }
            int n_rows = 0;
            if (config_.index_query == IndexQuery::HeadMax || G == 1) {
                n_rows = nq * G;
                s.rows.resize(static_cast<size_t>(n_rows) * hd);
                for (int64_t t = t0; t < t1; ++t) {
                    const float* src = c.q + (t * c.n_head + static_cast<int64_t>(g) * G) * hd;
                    std::copy(src, src + static_cast<int64_t>(G) * hd, s.rows.data() + (t - t0) * G * hd);
                }
            } else {
                n_rows = nq;
                s.rows.assign(static_cast<size_t>(n_rows) * hd, 0.0f);
                const float inv = 1.0f / static_cast<float>(G);
                for (int64_t t = t0; t < t1; ++t) {
                    float* dst = s.rows.data() + (t - t0) * hd;
                    for (int hh = 0; hh < G; ++hh)
                        kernels::axpy_f32(dst, inv, c.q + (t * c.n_head + static_cast<int64_t>(g) * G + hh) * hd, hd);
                }
            }
            // Remap: the rows as R(W - p) q when some candidate block lies W or more before them.
            RemapRows rr;
            if (remap && c.pos0 + t1 - 1 - (B - 1) >= W)
                rr = make_remap_rows(rope, s.rows, nq, n_rows / nq, hd, c.pos0 + t0, W, s.far_rows, s.row_pos, s.cs);
            SelectParams spi = sp;
            spi.mass_rows_per_query = n_rows / nq;
            select_blocks(index, kv, c.layer, g, s.rows.data(), n_rows, hd, qb, spi, s.select, sel.blocks,
                          s.stats, rr.window > 0 ? &rr : nullptr);
        }
    });

    // Sparse branch: parts of about equal work (rows x blocks), a selection's query tokens (and,
    // when it has fewer tokens than pieces, the group's heads) split among them, claimed in order of
    // work by whichever thread is free. Each part writes its own rows and mass slot, so the result
    // does not depend on which thread ran it.
    size_t kmax = 1;
    double work = 0;
    for (const auto& sel : L.selections) {
        kmax = std::max(kmax, sel.blocks.size());
        work += static_cast<double>(sel.n_queries) * static_cast<double>(sel.blocks.size());
    }
    const double want = 4.0 * pool.size();
    parts_.clear();
    for (int64_t si = 0; si < n_items; ++si) {
        const Selection& sel = L.selections[static_cast<size_t>(si)];
        const double w = static_cast<double>(sel.n_queries) * static_cast<double>(sel.blocks.size());
        // Heads are split only to feed the pool when there are few selections (decode): every
        // part converts the blocks it reads.
        const int hs = static_cast<int>(std::clamp<int64_t>((2 * pool.size() + n_items - 1) / n_items, 1, G));
        const int ts = static_cast<int>(std::clamp<int64_t>(std::llround(want * w / std::max(work, 1.0) / hs), 1, sel.n_queries));
        for (int a = 0; a < ts; ++a)
            for (int b = 0; b < hs; ++b)
                parts_.push_back({static_cast<int32_t>(si), b * G / hs, (b + 1) * G / hs, a * sel.n_queries / ts,
                                  (a + 1) * sel.n_queries / ts});
    }
    std::stable_sort(parts_.begin(), parts_.end(), [&](const Part& x, const Part& y) {
        auto cost = [&](const Part& p) {
            return static_cast<int64_t>(p.t1 - p.t0) * (p.h1 - p.h0) *
                   static_cast<int64_t>(L.selections[static_cast<size_t>(p.sel)].blocks.size());
        };
        return cost(x) > cost(y);
    });
    const auto n_att = static_cast<int64_t>(parts_.size());
    mass_parts_.assign(static_cast<size_t>(n_att) * kmax, 0.0f);
    const bool rec_tokens = config_.token_mass && c.n_tokens == 1;
    if (rec_tokens) token_parts_.assign(static_cast<size_t>(n_att) * kmax * static_cast<size_t>(B), 0.0f);
    const int64_t row = hd;  // rows of a block's keys and values as read from the cache
    std::atomic<int64_t> next{0};
    pool.parallel_for(pool.size(), [&](int64_t, int64_t, int ti) {
        Scratch& s = *scratch_[static_cast<size_t>(ti)];
        s.kbuf.resize(static_cast<size_t>(B) * static_cast<size_t>(hd));
        s.vbuf.resize(static_cast<size_t>(B) * static_cast<size_t>(hd));
        s.kt.resize(static_cast<size_t>(hd) * static_cast<size_t>(kernels::tile_ldk(B)));
        s.p.resize(static_cast<size_t>(kernels::kTileRows) * static_cast<size_t>(kernels::tile_ldk(B)));
        for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < n_att;
             it = next.fetch_add(1, std::memory_order_relaxed)) {
            const Part& pt = parts_[static_cast<size_t>(it)];
            const Selection& sel = L.selections[static_cast<size_t>(pt.sel)];
            const int g = sel.kv_head;
            const int h0 = g * G + pt.h0, h1 = g * G + pt.h1;
            const int nh = h1 - h0;
            const int64_t t0 = sel.q_pos0 - c.pos0 + pt.t0, t1 = sel.q_pos0 - c.pos0 + pt.t1;
            const size_t n_rows = static_cast<size_t>(t1 - t0) * static_cast<size_t>(nh);
            const size_t nk = sel.blocks.size();
            s.m.assign(n_rows, -std::numeric_limits<float>::infinity());
            s.l.assign(n_rows, 0.0f);
            s.acc.assign(n_rows * hd, 0.0f);
            s.bref.resize(n_rows * nk);
            s.bsum.resize(n_rows * nk);
            if (rec_tokens) s.tok.assign(n_rows * nk * static_cast<size_t>(B), 0.0f);
            // Remap: the item's queries as R(W - p) q, when some selected block is far from the last.
            const bool any_far = remap && c.pos0 + t1 - 1 - (static_cast<int64_t>(sel.blocks.front()) * B + index.block_tokens(sel.blocks.front()) - 1) >= W;
            // With fewer rows than a block's keys (decode), a far block is attended with each
            // query rotated straight to R(W - p + b*B) q against the true keys (= q^ · k^), instead
            // of the block's keys rotated. The selection's rows decide (not the part's), so a row
            // is computed the same way however the selection was split.
            const int64_t sel_rows = static_cast<int64_t>(sel.n_queries) * G;
            const bool rotate_rows = any_far && sel_rows < B;
            if (rotate_rows) s.qhat.resize(static_cast<size_t>(nh) * hd);
            if (any_far && !rotate_rows) {
                s.qhat.resize(n_rows * hd);
                for (int64_t t = t0; t < t1; ++t) {
                    float* dst = s.qhat.data() + static_cast<size_t>(t - t0) * nh * hd;
                    std::copy(c.q + (t * c.n_head + h0) * hd, c.q + (t * c.n_head + h1) * hd, dst);
                    rope.rotate(dst, nh, hd, W - (c.pos0 + t), s.cs);
                }
                s.rk.resize(static_cast<size_t>(B) * hd);
                s.rkt.resize(s.kt.size());
            }
            // KV-block outer: each selected block is streamed once for all rows of the part, in
            // tiles of up to kTileRows rows that share its (transposed) keys and visible length.
            // Selections of few rows (decode) skip the transpose and go row by row. Decided per
            // selection, not per part: a row's arithmetic must not depend on how it was split.
            const int64_t ldk = kernels::tile_ldk(B);
            const bool tiled = sel_rows >= kMinTileRows;
            for (size_t bi = 0; bi < nk; ++bi) {
                const int64_t p0 = static_cast<int64_t>(sel.blocks[bi]) * B;
                const int n_in = index.block_tokens(sel.blocks[bi]);
                const float* K = kv.k_span(c.layer, g, p0, n_in, s.kbuf.data());
                const float* V = kv.v_span(c.layer, g, p0, n_in, s.vbuf.data());
                // Far for the part's last query: the block's keys as k^ too.
                const bool block_far = any_far && c.pos0 + t1 - 1 - (p0 + n_in - 1) >= W;
                bool kt_done = false, rkt_done = false;  // the transposes, made when first needed
                const float* tq[kernels::kTileRows];
                float tsum[kernels::kTileRows];
                int tn = 0, tvis = 0;
                size_t tr0 = 0;
                const float* tkt = nullptr;
                auto flush = [&] {
                    if (tn == 0) return;
                    if (tiled)
                        kernels::attend_tile(tn, tq, tkt, ldk, V, row, tvis, hd, c.scale, s.m.data() + tr0, s.l.data() + tr0,
                                             s.acc.data() + tr0 * hd, s.p.data(), ldk, tsum);
                    else
                        for (int i = 0; i < tn; ++i)
                            tsum[i] = kernels::attend_row(tq[i], tkt, row, V, row, tvis, hd, c.scale, s.m[tr0 + i], s.l[tr0 + i],
                                                          s.acc.data() + (tr0 + i) * hd, s.p.data() + i * ldk);
                    for (int i = 0; i < tn; ++i) {
                        const size_t r = tr0 + static_cast<size_t>(i);
                        s.bref[r * nk + bi] = s.m[r];
                        s.bsum[r * nk + bi] = tsum[i];
                        if (rec_tokens)
                            std::copy(s.p.data() + i * ldk, s.p.data() + i * ldk + tvis,
                                      s.tok.data() + (r * nk + bi) * static_cast<size_t>(B));
                    }
                    tn = 0;
                };
                for (int64_t t = t0; t < t1; ++t) {
                    const int n_vis = static_cast<int>(std::min<int64_t>(n_in, c.pos0 + t - p0 + 1));
                    const bool far = block_far && c.pos0 + t - (p0 + n_in - 1) >= W;
                    const bool far_rows = far && rotate_rows;  // this query's rows rotated to the block
                    if (far_rows) {
                        flush();  // s.qhat is about to change
                        std::copy(c.q + (t * c.n_head + h0) * hd, c.q + (t * c.n_head + h1) * hd, s.qhat.data());
                        rope.rotate(s.qhat.data(), nh, hd, W - (c.pos0 + t) + p0, s.cs);
                    }
                    // The keys this query's rows attend: row-major (K, or k^ in s.rk), or their
                    // transpose when tiled.
                    const float* kt = nullptr;
                    if (far && !rotate_rows) {
                        if (!rkt_done) {
                            index.relative_keys(kv, c.layer, g, sel.blocks[bi], s.rk.data(), s.cs);
                            if (tiled) kernels::transpose_keys(s.rkt.data(), ldk, s.rk.data(), row, n_in, hd);
                            rkt_done = true;
                        }
                        kt = tiled ? s.rkt.data() : s.rk.data();
                    } else {
                        if (!kt_done && tiled) kernels::transpose_keys(s.kt.data(), ldk, K, row, n_in, hd);
                        kt_done = true;
                        kt = tiled ? s.kt.data() : K;
                    }
                    for (int h = h0; h < h1; ++h) {
                        const size_t r = static_cast<size_t>(t - t0) * nh + static_cast<size_t>(h - h0);
                        const float* q = far_rows ? s.qhat.data() + static_cast<size_t>(h - h0) * hd
                                         : far    ? s.qhat.data() + r * hd
                                                  : c.q + (t * c.n_head + h) * hd;
                        if (tn > 0 && (tn == kernels::kTileRows || kt != tkt || n_vis != tvis)) flush();
                        if (tn == 0) {
                            tr0 = r;
                            tkt = kt;
                            tvis = n_vis;
                        }
                        tq[tn++] = q;
                    }
                }
                flush();
            }
            float* mass = mass_parts_.data() + static_cast<size_t>(it) * kmax;
            for (int64_t t = t0; t < t1; ++t) {
                for (int h = h0; h < h1; ++h) {
                    const size_t r = static_cast<size_t>(t - t0) * nh + static_cast<size_t>(h - h0);
                    const float inv = 1.0f / s.l[r];
                    const float* acc = s.acc.data() + r * hd;
                    float* out = c.out + (t * c.n_head + h) * hd;
                    for (int i = 0; i < hd; ++i) out[i] = acc[i] * inv;
                    for (size_t bi = 0; bi < nk; ++bi) {
                        const float w = std::exp(s.bref[r * nk + bi] - s.m[r]) * inv;
                        mass[bi] += s.bsum[r * nk + bi] * w;
                        if (!rec_tokens) continue;
                        float* dst = token_parts_.data() + (static_cast<size_t>(it) * kmax + bi) * static_cast<size_t>(B);
                        const float* e = s.tok.data() + (r * nk + bi) * static_cast<size_t>(B);
                        for (int j = 0; j < B; ++j) dst[j] += e[j] * w;
                    }
                }
            }
        }
    });

    // Selections' masses and the counters.
    const auto f = static_cast<int64_t>(kv_type_size(kv.type()));  // bytes per stored K/V element
    ++stats_.calls;
    stats_.dense_kv_bytes += static_cast<int64_t>(c.n_kv_head) * end * 2 * hd * f;
    for (auto& sel : L.selections) {
        sel.mass.assign(sel.blocks.size(), 0.0f);
        sel.token_mass.clear();
        if (rec_tokens) sel.token_mass.assign(sel.blocks.size() * static_cast<size_t>(B), 0.0f);
    }
    for (size_t pi = 0; pi < parts_.size(); ++pi) {  // in part order: the same sums on every run
        Selection& sel = L.selections[static_cast<size_t>(parts_[pi].sel)];
        const float* src = mass_parts_.data() + pi * kmax;
        for (size_t bi = 0; bi < sel.blocks.size(); ++bi) sel.mass[bi] += src[bi];
        if (!rec_tokens) continue;
        const float* tsrc = token_parts_.data() + pi * kmax * static_cast<size_t>(B);
        for (size_t i = 0; i < sel.token_mass.size(); ++i) sel.token_mass[i] += tsrc[i];
    }
    for (int64_t si = 0; si < n_items; ++si) {
        Selection& sel = L.selections[static_cast<size_t>(si)];
        const float norm = 1.0f / static_cast<float>(sel.n_queries * G);
        for (auto& x : sel.mass) x *= norm;
        for (auto& x : sel.token_mass) x *= norm;
        ++stats_.selections;
        stats_.visible_blocks += (sel.q_pos0 + sel.n_queries - 1) / B + 1;
        stats_.selected_blocks += static_cast<int64_t>(sel.blocks.size());
        for (int32_t b : sel.blocks) stats_.kv_bytes += static_cast<int64_t>(index.block_tokens(b)) * 2 * hd * f;
    }
    SelectStats st;
    for (const auto& s : scratch_) st.add(s->stats);
    stats_.select.add(st);
    stats_.index_bytes += st.summary_bytes;
    stats_.exact_key_bytes += st.exact_blocks * B * hd * f;
    if (observer_) observer_(c.layer, c, L.selections);
}

}  // namespace sl
