#include "core/attention/dense_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

// Partial attention of the `group` query heads q (group, hd) of one KV head over keys [j0, j1):
// per head the running max m, the sum of exp(s - m) l, and the unnormalized output acc (hd).
// `scores` is scratch of at least group * (j1 - j0) floats, `kbuf` of block_size * hd floats (the
// pages' rows, dequantized when the cache is not f32). Keys are read page by page, so each page's
// rows stay in L1/L2 while every head of the group passes over them.
void attend_range(const AttentionCall& c, const KvCache& kv, int g, const float* q, int group, int64_t j0,
                  int64_t j1, float* scores, float* m, float* l, float* acc, float* kbuf) {
    const int hd = c.head_dim;
    const int64_t n = j1 - j0;
    const int64_t B = kv.block_size();
    for (int64_t p = j0; p < j1;) {
        const int64_t len = std::min(j1, (p / B + 1) * B) - p;
        const float* K = kv.k_rows(c.layer, g, p, static_cast<int>(len), kbuf);
        for (int i = 0; i < group; ++i)
            kernels::dot_rows_f32(scores + i * n + (p - j0), q + i * hd, K, hd, len, hd, c.scale);
        p += len;
    }
    for (int i = 0; i < group; ++i) {
        float* s = scores + i * n;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
        m[i] = mx;
        l[i] = kernels::exp_shifted_sum(s, n, mx);
        std::fill(acc + i * hd, acc + (i + 1) * hd, 0.0f);
    }
    for (int64_t p = j0; p < j1;) {
        const int64_t len = std::min(j1, (p / B + 1) * B) - p;
        const float* V = kv.v_rows(c.layer, g, p, static_cast<int>(len), kbuf);
        for (int i = 0; i < group; ++i)
            kernels::accumulate_rows_f32(acc + i * hd, scores + i * n + (p - j0), V, hd, len, hd);
        p += len;
    }
}

}  // namespace

void DenseAttention::forward(const AttentionCall& c, const KvCache& kv, ThreadPool& pool) {
    const int group = c.n_head / c.n_kv_head;
    const int hd = c.head_dim;
    const kernels::AxpyF32Fn axpy = kernels::axpy_f32_fn();
    const int64_t n_keys_max = c.pos0 + c.n_tokens;
    const auto threads = static_cast<size_t>(pool.size());
    // Per-thread scratch starts with one page of rows (64-byte multiple: what follows stays aligned).
    const size_t kbuf_floats = (static_cast<size_t>(kv.block_size()) * static_cast<size_t>(hd) + 15) / 16 * 16;

    // Decode over a long context: split the keys across threads and combine (flash-decoding).
    if (c.n_tokens == 1 && n_keys_max >= 512 && threads > 1) {
        const int64_t chunks = static_cast<int64_t>(threads);
        const int64_t per = (n_keys_max + chunks - 1) / chunks;
        const auto parts = static_cast<size_t>(chunks) * static_cast<size_t>(c.n_kv_head);
        m_.resize(parts * group);
        l_.resize(parts * group);
        acc_.resize(parts * group * hd);
        std::vector<float>&m = m_, &l = l_, &acc = acc_;
        std::vector<std::vector<float>>& scratch = scratch_;
        scratch.resize(threads);
        pool.parallel_for(static_cast<int64_t>(parts), [&](int64_t b, int64_t e, int t) {
            std::vector<float>& s = scratch[static_cast<size_t>(t)];
            s.resize(static_cast<size_t>(group * per) + kbuf_floats);
            for (int64_t it = b; it < e; ++it) {
                const int64_t chunk = it / c.n_kv_head;
                const int g = static_cast<int>(it % c.n_kv_head);
                const int64_t j0 = chunk * per, j1 = std::min(n_keys_max, j0 + per);
                const auto o = static_cast<size_t>(it) * group;
                if (j0 >= j1) {
                    std::fill(m.begin() + static_cast<ptrdiff_t>(o), m.begin() + static_cast<ptrdiff_t>(o + group), -INFINITY);
                    std::fill(l.begin() + static_cast<ptrdiff_t>(o), l.begin() + static_cast<ptrdiff_t>(o + group), 0.0f);
                    continue;
                }
                attend_range(c, kv, g, c.q + static_cast<int64_t>(g) * group * hd, group, j0, j1, s.data() + kbuf_floats,
                             m.data() + o, l.data() + o, acc.data() + o * hd, s.data());
            }
        });
        for (int g = 0; g < c.n_kv_head; ++g) {
            for (int i = 0; i < group; ++i) {
                float mx = -INFINITY;
                for (int64_t ch = 0; ch < chunks; ++ch) mx = std::max(mx, m[(static_cast<size_t>(ch * c.n_kv_head + g)) * group + i]);
                float* out = c.out + (static_cast<int64_t>(g) * group + i) * hd;
                std::fill(out, out + hd, 0.0f);
                double total = 0;
                for (int64_t ch = 0; ch < chunks; ++ch) {
                    const size_t o = static_cast<size_t>(ch * c.n_kv_head + g) * group + static_cast<size_t>(i);
                    if (l[o] == 0.0f) continue;
                    const float w = std::exp(m[o] - mx);
                    total += static_cast<double>(l[o]) * w;
                    axpy(out, w, acc.data() + o * hd, hd);
                }
                const float inv = static_cast<float>(1.0 / total);
                for (int d = 0; d < hd; ++d) out[d] *= inv;
            }
        }
        return;
    }

    // One item per (token, KV head): the group's query heads read each key and value once.
    const int64_t items = static_cast<int64_t>(c.n_tokens) * c.n_kv_head;
    std::vector<std::vector<float>>& scratch = scratch_;
    scratch.resize(threads);
    pool.parallel_for(items, [&](int64_t b, int64_t e, int t) {
        std::vector<float>& s = scratch[static_cast<size_t>(t)];
        s.resize(kbuf_floats + static_cast<size_t>(group) * static_cast<size_t>(n_keys_max) + 2 * static_cast<size_t>(group));
        for (int64_t it = b; it < e; ++it) {
            const int64_t ti = it / c.n_kv_head;
            const int g = static_cast<int>(it % c.n_kv_head);
            const int64_t n_keys = c.pos0 + ti + 1;
            const float* q = c.q + (ti * c.n_head + static_cast<int64_t>(g) * group) * hd;
            float* out = c.out + (ti * c.n_head + static_cast<int64_t>(g) * group) * hd;
            float* scores = s.data() + kbuf_floats;
            float* m = scores + static_cast<size_t>(group) * static_cast<size_t>(n_keys_max);
            float* l = m + group;
            attend_range(c, kv, g, q, group, 0, n_keys, scores, m, l, out, s.data());
            for (int i = 0; i < group; ++i) {
                const float inv = 1.0f / l[i];
                for (int d = 0; d < hd; ++d) out[i * hd + d] *= inv;
            }
        }
    });
}

}  // namespace sl
