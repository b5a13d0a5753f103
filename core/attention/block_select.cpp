#include "core/attention/block_select.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/attention/block_index.h"
#include "core/kvcache/kv_cache.h"
#include "kernels/cpu/attention_block.h"
#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

// Ranking of candidates: higher score first, then lower block id.
inline bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}


// Index rows from which exact_max transposes the block once and scores the rows in tiles of
// kernels::kTileRows (max_dot_tile), instead of row by row (max_dot). Decided by n_rows alone, so
// the pruned and brute-force selections (and exact_block_score) score a block the same way.
constexpr int kTileMinRows = 32;

// Exact max over rows and the keys k (n_keys rows of d) of q · k, skipping rows whose bound (plus
// `slack`) cannot beat the running max. row_bound holds each row's Quest bound for this block, or is
// null (no skipping). The result does not depend on the skipping: skipped rows score below it.
// Counts the rows scored into `st` (exact_rows, exact_keys; the caller counts the block).
float exact_max(const float* k, int n_keys, int d, const float* rows, int n_rows, int64_t row_stride,
                const float* row_bound, float slack, SelectStats& st) {
    int first = 0;
    if (row_bound)
        first = static_cast<int>(std::max_element(row_bound, row_bound + n_rows) - row_bound);
    int64_t done = 0;
    float best = -std::numeric_limits<float>::infinity();
    if (n_rows >= kTileMinRows) {
        // Per pool thread, reused: the block's keys transposed and a tile's scores.
        thread_local std::vector<float> kt, p;
        const int64_t ldk = kernels::tile_ldk(n_keys);
        kt.resize(static_cast<size_t>(d) * static_cast<size_t>(ldk));
        p.resize(static_cast<size_t>(kernels::kTileRows) * static_cast<size_t>(ldk));
        kernels::transpose_keys(kt.data(), ldk, k, d, n_keys, d);
        const float* tq[kernels::kTileRows];
        tq[0] = rows + first * row_stride;  // the row of the highest bound alone: a max to skip by
        best = kernels::max_dot_tile(1, tq, kt.data(), ldk, n_keys, d, p.data(), ldk);
        done = 1;
        int tn = 0;
        for (int r = 0; r <= n_rows; ++r) {
            if (r < n_rows) {
                if (r == first || (row_bound && row_bound[r] + slack < best)) continue;
                tq[tn++] = rows + r * row_stride;
            }
            if (tn == kernels::kTileRows || (r == n_rows && tn > 0)) {
                best = std::max(best, kernels::max_dot_tile(tn, tq, kt.data(), ldk, n_keys, d, p.data(), ldk));
                done += tn;
                tn = 0;
            }
        }
    } else {
        best = kernels::max_dot(rows + first * row_stride, k, d, n_keys, d);
        done = 1;
        for (int r = 0; r < n_rows; ++r) {
            if (r == first) continue;
            if (row_bound && row_bound[r] + slack < best) continue;
            best = std::max(best, kernels::max_dot(rows + r * row_stride, k, d, n_keys, d));
            ++done;
        }
    }
    st.exact_rows += done;
    st.exact_keys += done * n_keys;
    return best;
}

// The forced blocks of a selection, into `out` (cleared): the local block, the window's blocks
// before it, and the sink when asked and not in the window. Returns the candidates [first, end)
// and how many of them to choose (m <= end - first).
struct Forced {
    int64_t first, end, m;
};
Forced force_blocks(int64_t local, const SelectParams& p, std::vector<int32_t>& out) {
    out.clear();
    out.push_back(static_cast<int32_t>(local));
    const int64_t end = local - std::clamp<int64_t>(p.window, 0, local);
    for (int64_t b = end; b < local; ++b) out.push_back(static_cast<int32_t>(b));
    const bool sink = p.sink && end > 0 && p.top_k >= 2;  // the local block comes first
    if (sink) out.push_back(0);
    const int64_t first = sink ? 1 : 0;
    return {first, end, std::min<int64_t>(std::max(0, p.top_k - 1 - (sink ? 1 : 0)), end - first)};
}

float exact_score(const KvCache& kv, int layer, int kv_head, const float* rows, int n_rows, int64_t row_stride,
                  int64_t b, int block, int n_keys, const float* row_bound, float slack, float* kbuf, SelectStats& st) {
    const float* k = kv.k_span(layer, kv_head, b * block, n_keys, kbuf);
    ++st.exact_blocks;
    return exact_max(k, n_keys, kv.head_dim(), rows, n_rows, row_stride, row_bound, slack, st);
}

// Slack per unit of a block's largest |key| for the Quest bounds of `rows`. Rounding: the bound and
// the exact dot each round a sum of d products; their errors are below (d + 2) u Σ|q_i||k_i| <=
// (d + 2) u |q|_1 max|k|, u = 2^-24. The slack covers both (twice over), so bound + slack >= every
// exact score the block can produce. `far` (optional) are more rows with the same stride.
float bound_eps(const float* rows, const float* far, int n_rows, int64_t row_stride, int d) {
    float l1 = 0.0f;
    for (int r = 0; r < n_rows; ++r) {
        float a = 0.0f, fa = 0.0f;
        for (int i = 0; i < d; ++i) {
            a += std::fabs(rows[r * row_stride + i]);
            if (far) fa += std::fabs(far[r * row_stride + i]);
        }
        l1 = std::max(l1, std::max(a, fa));
    }
    return 4.0f * static_cast<float>(d + 2) * 0x1p-24f * l1;
}

// The exact top-m of the candidates for_each_candidate(fn) names, Quest-pruned: bounds(b) fills
// s.row_bound (each row's bound for block b) and returns the slack; exact(b, row_bound, slack) is
// the block's exact score (it may skip rows whose bound + slack cannot beat its running max).
// Candidates are visited by descending bound + slack and scored until the next bound cannot beat
// the m-th best exact score, so the result is brute force's (ties to the lower block id).
// Appends the chosen blocks to `out` (unsorted).
template <class ForEach, class Bounds, class Exact>
void pruned_top(int64_t m, ForEach&& for_each_candidate, Bounds&& bounds, Exact&& exact, SelectScratch& s,
                std::vector<int32_t>& out) {
    s.cand.clear();
    s.top.clear();
    for_each_candidate([&](int64_t b) {
        const float slack = bounds(b);
        const float u = kernels::max_f32(s.row_bound.data(), static_cast<int64_t>(s.row_bound.size()));
        s.cand.emplace_back(u + slack, static_cast<int32_t>(b));
    });
    // Visit candidates by descending bound; `top` is a heap whose front is the worst of the best m.
    auto by_bound = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
        return a.first < b.first || (a.first == b.first && a.second > b.second);
    };
    std::make_heap(s.cand.begin(), s.cand.end(), by_bound);
    auto end = s.cand.end();
    while (end != s.cand.begin()) {
        const auto [bound, b] = s.cand.front();
        if (static_cast<int64_t>(s.top.size()) == m && bound < s.top.front().first) break;
        std::pop_heap(s.cand.begin(), end, by_bound);
        --end;
        const float slack = bounds(b);
        const float score = exact(b, s.row_bound.data(), slack);
        const std::pair<float, int32_t> e{score, b};
        if (static_cast<int64_t>(s.top.size()) < m) {
            s.top.push_back(e);
            std::push_heap(s.top.begin(), s.top.end(), better);
        } else if (better(e, s.top.front())) {
            std::pop_heap(s.top.begin(), s.top.end(), better);
            s.top.back() = e;
            std::push_heap(s.top.begin(), s.top.end(), better);
        }
    }
    for (const auto& e : s.top) out.push_back(e.second);
}

}  // namespace

RemapRows make_remap_rows(const RopeShift& rope, const std::vector<float>& rows, int n_queries, int per_query,
                          int head_dim, int64_t pos0, int64_t window, std::vector<float>& far,
                          std::vector<int64_t>& pos, std::vector<float>& cs) {
    far = rows;
    pos.resize(static_cast<size_t>(n_queries) * static_cast<size_t>(per_query));
    for (int i = 0; i < n_queries; ++i) {
        const int64_t p = pos0 + i;
        std::fill_n(pos.begin() + static_cast<std::ptrdiff_t>(i) * per_query, per_query, p);
        rope.rotate(far.data() + static_cast<int64_t>(i) * per_query * head_dim, per_query, head_dim, window - p, cs);
    }
    return {window, far.data(), pos.data()};
}

float exact_block_score(const BlockIndex& index, const KvCache& kv, int layer, int kv_head, const float* rows,
                        int n_rows, int64_t row_stride, int64_t b) {
    SelectStats st;
    std::vector<float> kbuf(static_cast<size_t>(index.block_size()) * static_cast<size_t>(kv.head_dim()));
    return exact_score(kv, layer, kv_head, rows, n_rows, row_stride, b, index.block_size(), index.block_tokens(b),
                       nullptr, 0.0f, kbuf.data(), st);
}

void select_blocks_native(const float* keys, int block, int dim, const float* rows, int n_rows, int64_t row_stride,
                          int64_t local, const SelectParams& p, SelectScratch& s, std::vector<int32_t>& out,
                          SelectStats& st, const NativeBounds* nb) {
    const Forced forced = force_blocks(local, p, out);
    const int64_t first = forced.first, local_end = forced.end, m = forced.m;
    const int64_t n_cand = local_end - first;
    st.candidates += n_cand;
    st.brute_rows += n_cand * n_rows;  // (exact_blocks counts main-cache key blocks: none read here)
    if (m == n_cand) {
        for (int64_t b = first; b < local_end; ++b) out.push_back(static_cast<int32_t>(b));
    } else if (m > 0 && nb && p.prune) {
        // Quest-pruned: the bounds from each block's channel-wise key min / max, exact block-max
        // only while a block can still enter the top m (A query block's rows score a key block in
        // register tiles (exact_max) once there are enough of them; decode's single row goes row
        // by row.)
        st.summary_bytes += n_cand * 2 * dim * static_cast<int64_t>(sizeof(float));
        s.row_bound.resize(static_cast<size_t>(n_rows));
        const float eps = bound_eps(rows, nullptr, n_rows, row_stride, dim);
        auto bounds = [&](int64_t b) {
            kernels::quest_bounds(s.row_bound.data(), rows, n_rows, row_stride, nb->kmin + b * dim, nb->kmax + b * dim,
                                  dim);
            return eps * nb->kabs_max[b];
        };
        auto exact = [&](int64_t b, const float* row_bound, float slack) {
            st.summary_bytes += static_cast<int64_t>(block) * dim * static_cast<int64_t>(sizeof(float));
            return exact_max(keys + b * block * dim, block, dim, rows, n_rows, row_stride, row_bound, slack, st);
        };
        pruned_top(
            m, [&](auto&& fn) { for (int64_t b = first; b < local_end; ++b) fn(b); }, bounds, exact, s, out);
    } else if (m > 0) {
        s.cand.clear();
        for (int64_t b = first; b < local_end; ++b)
            s.cand.emplace_back(exact_max(keys + b * block * dim, block, dim, rows, n_rows, row_stride, nullptr, 0.0f, st),
                                static_cast<int32_t>(b));
        st.summary_bytes += n_cand * block * dim * static_cast<int64_t>(sizeof(float));
        std::nth_element(s.cand.begin(), s.cand.begin() + (m - 1), s.cand.end(), better);
        for (int64_t i = 0; i < m; ++i) out.push_back(s.cand[static_cast<size_t>(i)].second);
    }
    std::sort(out.begin(), out.end());
}

void native_bounds(const float* keys, int block, int dim, int64_t b0, int64_t b1, std::vector<float>& kmin,
                   std::vector<float>& kmax, std::vector<float>& kabs_max) {
    const auto d = static_cast<size_t>(dim);
    kmin.resize(static_cast<size_t>(b1) * d);
    kmax.resize(static_cast<size_t>(b1) * d);
    kabs_max.resize(static_cast<size_t>(b1));
    for (int64_t b = b0; b < b1; ++b) {
        float* lo = kmin.data() + static_cast<size_t>(b) * d;
        float* hi = kmax.data() + static_cast<size_t>(b) * d;
        const float* k = keys + b * block * dim;
        std::copy_n(k, d, lo);
        std::copy_n(k, d, hi);
        for (int j = 1; j < block; ++j)
            for (size_t i = 0; i < d; ++i) {
                const float v = k[static_cast<size_t>(j) * d + i];
                lo[i] = std::min(lo[i], v);
                hi[i] = std::max(hi[i], v);
            }
        float a = 0.0f;
        for (size_t i = 0; i < d; ++i) a = std::max(a, std::max(std::fabs(lo[i]), std::fabs(hi[i])));
        kabs_max[static_cast<size_t>(b)] = a;
    }
}

namespace {

// select_blocks without the mass growth.
void select_top(const BlockIndex& index, const KvCache& kv, int layer, int kv_head, const float* rows,
                int n_rows, int64_t row_stride, int64_t local, const SelectParams& p, SelectScratch& s,
                std::vector<int32_t>& out, SelectStats& st, const RemapRows* remap) {
    const int d = index.head_dim();
    const int B = index.block_size();
    const Forced forced = force_blocks(local, p, out);
    const int64_t first = forced.first, local_end = forced.end, m = forced.m;
    const int64_t n_cand = local_end - first;
    st.candidates += n_cand;
    if (m == n_cand) {  // everything visible fits: no scoring
        for (int64_t b = first; b < local_end; ++b) out.push_back(static_cast<int32_t>(b));
        std::sort(out.begin(), out.end());
        return;
    }
    if (m == 0) {
        std::sort(out.begin(), out.end());
        return;
    }
    s.cand.clear();
    s.top.clear();
    s.kbuf.resize(static_cast<size_t>(B) * static_cast<size_t>(d));

    // Remap: rows [0, near(b)) score block b with their own q and true keys, rows [near(b), n_rows)
    // with far_rows and the block-relative keys (candidates are full blocks: last token b*B + B - 1).
    const bool rm = remap && remap->window > 0 && remap->far_rows && remap->pos && index.has_relative();
    const float* far_rows = rm ? remap->far_rows : nullptr;
    auto near = [&](int64_t b) -> int {
        if (!rm) return n_rows;
        const int64_t from = b * B + B - 1 + remap->window;
        return static_cast<int>(std::lower_bound(remap->pos, remap->pos + n_rows, from) - remap->pos);
    };
    // max over rows of q · (block summary vector): the near rows against v, the far rows against rv.
    auto summary_max = [&](const float* v, const float* rv, int split) {
        float best = -std::numeric_limits<float>::infinity();
        if (split > 0) best = kernels::max_dot(v, rows, row_stride, split, d);
        if (split < n_rows) best = std::max(best, kernels::max_dot(rv, far_rows + split * row_stride, row_stride, n_rows - split, d));
        return best;
    };
    auto mean_score = [&](int64_t b) {
        return summary_max(index.kmean(b, kv_head), rm ? index.rkmean(b, kv_head) : nullptr, near(b));
    };

    // Hybrid: shortlist by mean key, then exact block-max over the shortlist only.
    const bool hybrid = p.scoring == BlockScoring::Hybrid && m * std::max(1, p.hybrid_factor) < n_cand;
    s.shortlist.clear();
    if (hybrid) {
        st.summary_bytes += n_cand * d * static_cast<int64_t>(sizeof(float));
        for (int64_t b = first; b < local_end; ++b) s.cand.emplace_back(mean_score(b), static_cast<int32_t>(b));
        const int64_t keep = m * std::max(1, p.hybrid_factor);
        std::nth_element(s.cand.begin(), s.cand.begin() + (keep - 1), s.cand.end(), better);
        for (int64_t i = 0; i < keep; ++i) s.shortlist.push_back(s.cand[static_cast<size_t>(i)].second);
        s.cand.clear();
    }
    auto for_each_candidate = [&](auto&& fn) {
        if (hybrid)
            for (const int32_t b : s.shortlist) fn(static_cast<int64_t>(b));
        else
            for (int64_t b = first; b < local_end; ++b) fn(b);
    };

    if (p.scoring == BlockScoring::MeanKey) {
        st.summary_bytes += n_cand * d * static_cast<int64_t>(sizeof(float));
        for (int64_t b = first; b < local_end; ++b) s.cand.emplace_back(mean_score(b), static_cast<int32_t>(b));
        std::nth_element(s.cand.begin(), s.cand.begin() + (m - 1), s.cand.end(), better);
        for (int64_t i = 0; i < m; ++i) out.push_back(s.cand[static_cast<size_t>(i)].second);
        std::sort(out.begin(), out.end());
        return;
    }

    // Exact block-max of block b: near rows against its keys, far rows (q^) against its keys as
    // k^ = R(-b*B) k. With fewer far rows than keys (decode) the far rows are rotated instead:
    // R(b*B) q^ · k = q^ · k^ (RoPE is orthogonal; the rounding differs by a few ulps of |q||k|,
    // far inside the bounds' slack), B / rows times less rotation and no second read of the keys.
    if (rm) s.rbuf.resize(static_cast<size_t>(B) * static_cast<size_t>(d));
    auto exact = [&](int64_t b, const float* row_bound, float slack) {
        const int split = near(b);
        const int n_far = n_rows - split;
        const bool rotate_rows = n_far > 0 && n_far < B;
        float best = -std::numeric_limits<float>::infinity();
        ++st.exact_blocks;
        const float* k = split > 0 || rotate_rows ? kv.k_span(layer, kv_head, b * B, B, s.kbuf.data()) : nullptr;
        if (split > 0) best = exact_max(k, B, d, rows, split, row_stride, row_bound, slack, st);
        if (n_far == 0) return best;
        const float* far_bound = row_bound ? row_bound + split : nullptr;
        if (rotate_rows) {
            s.frot.resize(static_cast<size_t>(n_far) * static_cast<size_t>(d));
            for (int r = 0; r < n_far; ++r)
                std::copy_n(far_rows + (split + r) * row_stride, d, s.frot.data() + static_cast<size_t>(r) * d);
            index.relative().rotate(s.frot.data(), n_far, d, b * B, s.cs);
            return std::max(best, exact_max(k, B, d, s.frot.data(), n_far, d, far_bound, slack, st));
        }
        index.relative_keys(kv, layer, kv_head, b, s.rbuf.data(), s.cs);
        return std::max(best, exact_max(s.rbuf.data(), B, d, far_rows + split * row_stride, n_far, row_stride, far_bound, slack, st));
    };

    st.brute_rows += n_cand * n_rows;
    if (!p.prune) {  // brute force: exact block-max of every candidate
        for_each_candidate([&](int64_t b) { s.cand.emplace_back(exact(b, nullptr, 0.0f), static_cast<int32_t>(b)); });
        std::nth_element(s.cand.begin(), s.cand.begin() + (m - 1), s.cand.end(), better);
        for (int64_t i = 0; i < m; ++i) out.push_back(s.cand[static_cast<size_t>(i)].second);
        std::sort(out.begin(), out.end());
        return;
    }

    // Quest bounds (bound_eps: the slack covers the rounding of bound and exact score).
    st.summary_bytes += (hybrid ? static_cast<int64_t>(s.shortlist.size()) : n_cand) * 2 * d * static_cast<int64_t>(sizeof(float));
    s.row_bound.resize(static_cast<size_t>(n_rows));
    const float eps = bound_eps(rows, rm ? far_rows : nullptr, n_rows, row_stride, d);
    auto bounds = [&](int64_t b) {
        const int split = near(b);
        if (split > 0)
            kernels::quest_bounds(s.row_bound.data(), rows, split, row_stride, index.kmin(b, kv_head), index.kmax(b, kv_head), d);
        if (split < n_rows)
            kernels::quest_bounds(s.row_bound.data() + split, far_rows + split * row_stride, n_rows - split, row_stride,
                                  index.rkmin(b, kv_head), index.rkmax(b, kv_head), d);
        const float amax = rm ? std::max(index.kabs_max(b, kv_head), index.rkabs_max(b, kv_head)) : index.kabs_max(b, kv_head);
        return eps * amax;  // the slack
    };
    pruned_top(m, for_each_candidate, bounds, exact, s, out);
    std::sort(out.begin(), out.end());
}

}  // namespace

int64_t growth_room(const SelectParams& p, int64_t visible) {
    return msa_rules::growth_room(static_cast<int64_t>(p.top_k) * (std::max(1, p.grow) - 1), p.grow_full, visible);
}

namespace {

// SelectParams::mass: grows `out` (ascending, the top-k selection) by the blocks of most estimated
// mass. Rows as select_blocks's; with Remap a row scores a block W or more before it with its far
// row against the block-relative mean key, as select_top does.
void grow_by_mass(const BlockIndex& index, int kv_head, const float* rows, int n_rows, int64_t row_stride,
                  int64_t local, const SelectParams& p, SelectScratch& s, std::vector<int32_t>& out, SelectStats& st,
                  const RemapRows* remap) {
    const int64_t n_vis = local + 1;
    const int64_t room = growth_room(p, n_vis);
    if (static_cast<int64_t>(out.size()) >= n_vis || room <= 0) return;
    const int d = index.head_dim();
    const int B = index.block_size();
    const bool rm = remap && remap->window > 0 && remap->far_rows && remap->pos && index.has_relative();
    const int per = std::clamp(p.mass_rows_per_query, 1, n_rows);
    const int nq = n_rows / per;
    const int Rq = msa_rules::mass_samples(nq);  // queries sampled, the last included (as the device)
    s.imp.assign(static_cast<size_t>(n_vis), 0.0f);
    s.est.resize(static_cast<size_t>(n_vis));
    // log n_b: blocks before the local one are full.
    const float log_full = std::log(static_cast<float>(B));
    const float log_local = std::log(static_cast<float>(std::max(1, index.block_tokens(local))));
    for (int i = 0; i < Rq * per; ++i) {
        const int r = msa_rules::mass_sample_query(i / per, nq, Rq) * per + i % per;
        const float* q = rows + r * row_stride;
        const float* fq = rm ? remap->far_rows + r * row_stride : nullptr;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t b = 0; b < n_vis; ++b) {
            const bool far = rm && remap->pos[r] >= b * B + B - 1 + remap->window;
            const float dot = far ? kernels::dot_f32(fq, index.rkmean(b, kv_head), d)
                                  : kernels::dot_f32(q, index.kmean(b, kv_head), d);
            const float e = p.scale * dot + (b == local ? log_local : log_full);
            s.est[static_cast<size_t>(b)] = e;
            mx = std::max(mx, e);
        }
        const float sum = kernels::exp_shifted_sum(s.est.data(), n_vis, mx);  // est <- exp(est - mx)
        const float w = 1.0f / (sum * static_cast<float>(Rq * per));
        for (int64_t b = 0; b < n_vis; ++b) s.imp[static_cast<size_t>(b)] += s.est[static_cast<size_t>(b)] * w;
    }
    st.summary_bytes += n_vis * d * static_cast<int64_t>(sizeof(float));
    double have = 0;
    for (const int32_t b : out) {
        have += s.imp[static_cast<size_t>(b)];
        s.imp[static_cast<size_t>(b)] = -1.0f;  // taken
    }
    if (have >= p.mass) return;
    s.grow.clear();
    for (int64_t b = 0; b < n_vis; ++b)
        if (s.imp[static_cast<size_t>(b)] >= 0.0f) s.grow.emplace_back(s.imp[static_cast<size_t>(b)], static_cast<int32_t>(b));
    const auto take = static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(s.grow.size())));
    std::partial_sort(s.grow.begin(), s.grow.begin() + static_cast<std::ptrdiff_t>(take), s.grow.end(), better);
    for (size_t i = 0; i < take && have < p.mass; ++i) {
        out.push_back(s.grow[i].second);
        have += s.grow[i].first;
    }
    std::sort(out.begin(), out.end());
}

}  // namespace

void select_blocks(const BlockIndex& index, const KvCache& kv, int layer, int kv_head, const float* rows,
                   int n_rows, int64_t row_stride, int64_t local, const SelectParams& p, SelectScratch& s,
                   std::vector<int32_t>& out, SelectStats& st, const RemapRows* remap) {
    select_top(index, kv, layer, kv_head, rows, n_rows, row_stride, local, p, s, out, st, remap);
    if (p.mass > 0.0f && p.scoring != BlockScoring::Native)
        grow_by_mass(index, kv_head, rows, n_rows, row_stride, local, p, s, out, st, remap);
}

}  // namespace sl
