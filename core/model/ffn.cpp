#include "core/model/ffn.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/runtime/linear.h"
#include "kernels/cpu/ops.h"

namespace sl {

void ffn_activate(const LlamaConfig& c, float* out, const float* gate, const float* up, int64_t n) {
    if (c.ffn_swiglu_oai)
        kernels::swiglu_oai_mul(out, gate, up, n, c.swiglu_alpha, c.swiglu_limit);
    else if (c.ffn_gelu)
        kernels::gelu_tanh_mul(out, gate, up, n);
    else
        kernels::silu_mul(out, gate, up, n);
}

void dense_ffn(const LlamaConfig& c, const TensorView& gate, const TensorView& up, const TensorView& down,
               int64_t width, const float* xn, int n, float* out, ThreadPool& pool, ForwardScratch& s) {
    const auto m = static_cast<size_t>(n) * static_cast<size_t>(width);
    if (s.g.size() < m) s.g.resize(m);
    if (s.u.size() < m) s.u.resize(m);
    if (s.h.size() < m) s.h.resize(m);
    // Gate and up in one pass, in step, each worker applying the activation to the columns it
    // computed (elementwise: the same values as over the whole array at once).
    const LinearOut gu[] = {{&gate, s.g.data()}, {&up, s.u.data()}};
    linear_shared(gu, xn, n, pool, s.quant, [&](int64_t r0, int64_t r1) {
        for (int t = 0; t < n; ++t) {
            const size_t o = static_cast<size_t>(t) * static_cast<size_t>(width) + static_cast<size_t>(r0);
            ffn_activate(c, s.h.data() + o, s.g.data() + o, s.u.data() + o, r1 - r0);
        }
    });
    linear(down, s.h.data(), n, out, pool, s.quant);
}

void route_token(const LlamaConfig::Moe& m, float* p, const float* bias, int32_t* experts, float* weights) {
    const int E = m.n_expert, K = m.n_expert_used;
    if (m.gating == LlamaConfig::Moe::Gating::Softmax)
        kernels::softmax(p, E);
    else
        for (int e = 0; e < E; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
    auto choice = [&](int e) { return bias ? p[e] + bias[e] : p[e]; };
    // Top K by choice score, ties to the lower id; E is small (<= a few hundred).
    int32_t order[1024];
    int32_t* idx = order;
    std::vector<int32_t> big;
    if (E > 1024) {
        big.resize(static_cast<size_t>(E));
        idx = big.data();
    }
    std::iota(idx, idx + E, 0);
    std::partial_sort(idx, idx + K, idx + E, [&](int32_t a, int32_t b) {
        const float ca = choice(a), cb = choice(b);
        return ca > cb || (ca == cb && a < b);
    });
    double sum = 0;
    for (int j = 0; j < K; ++j) {
        experts[j] = idx[j];
        weights[j] = p[idx[j]];
        sum += weights[j];
    }
    if (m.norm_weights) {
        const float inv = static_cast<float>(1.0 / std::max(sum, 6.103515625e-5));
        for (int j = 0; j < K; ++j) weights[j] *= inv;
    }
    if (m.weights_scale != 0.0f && m.weights_scale != 1.0f)
        for (int j = 0; j < K; ++j) weights[j] *= m.weights_scale;
}

void moe_ffn(const LlamaConfig& c, const LlamaLayer& L, const float* xn, int n, float* out, ThreadPool& pool,
             ForwardScratch& s) {
    const LlamaConfig::Moe& m = c.moe;
    const int E = m.n_expert, K = m.n_expert_used;
    const int64_t d = c.d_model, F = m.n_ff_exp;
    const auto nn = static_cast<size_t>(n);
    s.router.resize(nn * static_cast<size_t>(E));
    s.route_e.resize(nn * static_cast<size_t>(K));
    s.route_w.resize(nn * static_cast<size_t>(K));
    linear(L.ffn_gate_inp, xn, n, s.router.data(), pool, s.quant);
    for (size_t i = 0; i < nn; ++i)
        route_token(m, s.router.data() + i * static_cast<size_t>(E), L.exp_probs_b, s.route_e.data() + i * K,
                    s.route_w.data() + i * K);

    std::fill(out, out + nn * static_cast<size_t>(d), 0.0f);
    s.rows.reserve(nn * static_cast<size_t>(K));
    for (int e = 0; e < E; ++e) {
        s.rows.clear();  // slots (token * K + j) routed to expert e, in token order
        for (size_t t = 0; t < nn * static_cast<size_t>(K); ++t)
            if (s.route_e[t] == e) s.rows.push_back(static_cast<int32_t>(t));
        if (s.rows.empty()) continue;
        const int r = static_cast<int>(s.rows.size());
        const auto rd = static_cast<size_t>(r) * static_cast<size_t>(d);
        const auto rf = static_cast<size_t>(r) * static_cast<size_t>(F);
        if (s.xe.size() < rd) s.xe.resize(rd);
        if (s.ye.size() < rd) s.ye.resize(rd);
        if (s.ge.size() < rf) s.ge.resize(rf);
        if (s.ue.size() < rf) s.ue.resize(rf);
        if (s.he.size() < rf) s.he.resize(rf);
        for (int i = 0; i < r; ++i) {
            const size_t tok = static_cast<size_t>(s.rows[static_cast<size_t>(i)]) / static_cast<size_t>(K);
            std::copy(xn + tok * d, xn + (tok + 1) * d, s.xe.data() + static_cast<size_t>(i) * d);
        }
        const auto ue = static_cast<size_t>(e);
        linear(L.gate_exps[ue], s.xe.data(), r, s.ge.data(), pool, s.quant);
        linear(L.up_exps[ue], s.xe.data(), r, s.ue.data(), pool, s.quant);
        ffn_activate(c, s.he.data(), s.ge.data(), s.ue.data(), static_cast<int64_t>(rf));
        linear(L.down_exps[ue], s.he.data(), r, s.ye.data(), pool, s.quant);
        for (int i = 0; i < r; ++i) {
            const auto slot = static_cast<size_t>(s.rows[static_cast<size_t>(i)]);
            const size_t tok = slot / static_cast<size_t>(K);
            const float w = s.route_w[slot];
            const float* y = s.ye.data() + static_cast<size_t>(i) * d;
            float* o = out + tok * d;
            for (int64_t j = 0; j < d; ++j) o[j] += w * y[j];
        }
    }
    if (!L.gate_shexp.empty()) {
        if (s.ye.size() < nn * static_cast<size_t>(d)) s.ye.resize(nn * static_cast<size_t>(d));
        dense_ffn(c, L.gate_shexp, L.up_shexp, L.down_shexp, L.gate_shexp.ne1, xn, n, s.ye.data(), pool, s);
        kernels::add(out, s.ye.data(), static_cast<int64_t>(nn) * d);
    }
}

}  // namespace sl
