// Test helpers shared by the MSA attention tests: random and structured keys in a HostKv, and an
// attention call over given queries.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "core/attention/attention.h"
#include "tests/common/test_support.h"
#include "tests/core/attention/host_kv.h"

namespace sl::test {

inline void fill_random(sl::test::HostKv& kv, int layer, int64_t from, int64_t to, float lo = -2.0f, float hi = 2.0f) {
    for (int64_t p = from; p < to; ++p) {
        auto k = sl::test::random_floats(static_cast<size_t>(kv.row()), lo, hi);
        auto v = sl::test::random_floats(static_cast<size_t>(kv.row()));
        std::copy(k.begin(), k.end(), kv.k(layer, p));
        std::copy(v.begin(), v.end(), kv.v(layer, p));
    }
}

// Keys with structure real attention has: each block of each head clustered around its own
// direction (some blocks far more relevant than others), plus one "needle" token per block.
inline void fill_structured(sl::test::HostKv& kv, int layer, int64_t n, int block) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto& g = sl::test::rng();
    const int hd = kv.head_dim();
    std::vector<float> center(static_cast<size_t>(kv.row()));
    for (int64_t p = 0; p < n; ++p) {
        if (p % block == 0)
            for (auto& x : center) x = nd(g) * (0.2f + 2.0f * std::uniform_real_distribution<float>(0, 1)(g));
        float* k = kv.k(layer, p);
        float* v = kv.v(layer, p);
        const bool needle = p % block == 7;
        for (int64_t i = 0; i < kv.row(); ++i) {
            k[i] = center[static_cast<size_t>(i)] + 0.3f * nd(g) + (needle && i % hd < 4 ? 3.0f : 0.0f);
            v[i] = nd(g);
        }
    }
}

inline sl::AttentionCall make_call(int n_head, int n_kv, int hd, int64_t pos0, int n_tokens, const float* q, float* out) {
    sl::AttentionCall c;
    c.pos0 = pos0;
    c.n_tokens = n_tokens;
    c.n_head = n_head;
    c.n_kv_head = n_kv;
    c.head_dim = hd;
    c.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    c.q = q;
    c.out = out;
    return c;
}

}  // namespace sl::test
