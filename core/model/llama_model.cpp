#include "core/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/attention/attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/model/ffn.h"
#include "core/runtime/linear.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"

namespace sl {

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
    if (config_.rope_dim == 0) config_.rope_dim = config_.head_dim;
    if (static_cast<int>(weights_.layers.size()) != config_.n_layer)
        throw FormatError("model: " + std::to_string(weights_.layers.size()) + " layers of weights for " +
                          std::to_string(config_.n_layer) + " layers");
}

MsaConfig native_msa_config(const LlamaConfig& c, MsaConfig base) {
    if (!c.has_indexer()) throw Error("model: the file has no MSA indexer (attention.indexer.*): native MSA needs one");
    base.scoring = BlockScoring::Native;
    base.top_k = c.indexer.top_k;
    base.block_size = c.indexer.block_size;
    base.dense_layers = c.indexer.dense_layers;
    base.sink = false;  // M3: no init blocks
    base.window_blocks = 0;  // nor a local window: its indexer was trained for top-k alone
    base.top_p = 0.0f;       // nor mass growth
    return base;
}

void LlamaModel::forward(const int32_t* tokens, int n, int64_t pos0, KvCache& kv, Attention& attention,
                         ThreadPool& pool, ForwardScratch& s, float* logits, bool all_logits,
                         const float* embeddings, bool causal) const {
    const LlamaConfig& c = config_;
    if (n <= 0) return;
    if (kv.n_past() != pos0) throw Error("forward: KV cache holds " + std::to_string(kv.n_past()) +
                                         " positions, expected " + std::to_string(pos0));
    if (pos0 + n > kv.n_ctx())
        throw Error("forward: context full (" + std::to_string(pos0 + n) + " > " + std::to_string(kv.n_ctx()) + ")");
    for (int i = 0; i < n; ++i)
        if (!(embeddings && tokens[i] == kEmbeddingToken) && (tokens[i] < 0 || tokens[i] >= c.n_vocab))
            throw Error("forward: token id " + std::to_string(tokens[i]) + " outside the vocabulary");

    const int64_t d = c.d_model;
    const int64_t dq = static_cast<int64_t>(c.n_head) * c.head_dim;
    const int64_t dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    const auto nn = static_cast<size_t>(n);
    s.x.resize(nn * d);
    s.xn.resize(nn * d);
    s.q.resize(nn * dq);
    s.k.resize(nn * dkv);
    s.v.resize(nn * dkv);
    s.att.resize(nn * dq);
    s.o.resize(nn * d);

    for (int i = 0; i < n; ++i) {
        if (embeddings && tokens[i] == kEmbeddingToken)
            std::copy(embeddings + i * d, embeddings + (i + 1) * d, s.x.data() + i * d);
        else {
            embed_row(weights_.tok_embd, tokens[i], s.x.data() + i * d);
            if (c.embed_scale != 1.0f)  // gemma3: tokens only (image embeddings come scaled)
                for (int64_t j = 0; j < d; ++j) s.x[static_cast<size_t>(i * d + j)] *= c.embed_scale;
        }
    }

    // MSA native index projections: only when the attention uses them and the file has them.
    const bool want_index = c.has_indexer() && attention.wants_index();
    const int64_t dih = static_cast<int64_t>(c.indexer.n_head) * c.indexer.head_dim;
    if (want_index) {
        s.iq.resize(nn * static_cast<size_t>(dih));
        s.ik.resize(nn * static_cast<size_t>(c.indexer.head_dim));
    }

    const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const float* ff = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
    for (int l = 0; l < c.n_layer; ++l) {
        const LlamaLayer& L = weights_.layers[static_cast<size_t>(l)];
        const bool slides = c.layer_slides(l);
        const float rope_base = slides ? c.rope_base_swa : c.rope_base;
        const float rope_scale = slides ? c.rope_freq_scale_swa : c.rope_freq_scale;
        for (int i = 0; i < n; ++i) kernels::rms_norm(s.xn.data() + i * d, s.x.data() + i * d, L.attn_norm, d, c.rms_eps);
        const LinearOut qkv[] = {{&L.wq, s.q.data()}, {&L.wk, s.k.data()}, {&L.wv, s.v.data()}};
        linear_shared(qkv, s.xn.data(), n, pool, s.quant);
        for (int i = 0; i < n; ++i) {
            float* q = s.q.data() + i * dq;
            float* k = s.k.data() + i * dkv;
            float* v = s.v.data() + i * dkv;
            if (L.bq) kernels::add(q, L.bq, dq);
            if (L.bk) kernels::add(k, L.bk, dkv);
            if (L.bv) kernels::add(v, L.bv, dkv);
            if (L.attn_q_norm)
                for (int h = 0; h < c.n_head; ++h) kernels::rms_norm(q + h * c.head_dim, q + h * c.head_dim, L.attn_q_norm, c.head_dim, c.rms_eps);
            if (L.attn_k_norm)
                for (int h = 0; h < c.n_kv_head; ++h) kernels::rms_norm(k + h * c.head_dim, k + h * c.head_dim, L.attn_k_norm, c.head_dim, c.rms_eps);
            const int64_t pos = pos0 + i;
            kernels::rope(q, c.n_head, c.head_dim, c.rope_dim, pos, rope_base, rope_scale, c.rope_style, ff);
            kernels::rope(k, c.n_kv_head, c.head_dim, c.rope_dim, pos, rope_base, rope_scale, c.rope_style, ff);
            kv.write(l, pos, k, v);
        }
        AttentionCall call;
        call.layer = l;
        call.pos0 = pos0;
        call.n_tokens = n;
        call.n_head = c.n_head;
        call.n_kv_head = c.n_kv_head;
        call.head_dim = c.head_dim;
        call.scale = scale;
        call.q = s.q.data();
        call.rope_dim = c.rope_dim;
        call.rope_base = rope_base;
        call.rope_freq_scale = rope_scale;
        call.window = slides ? c.swa_window : 0;
        call.causal = causal;
        call.rope_neox = c.rope_style == kernels::RopeStyle::Norm ? 0 : 1;
        call.rope_freq_factors = ff;
        call.out = s.att.data();
        if (want_index && L.has_indexer()) {
            // Index queries (n, idx heads, idx dim) and keys (n, idx dim) from the same normalized
            // input as q/k; RMSNorm per head with their own weights, then the main q/k's RoPE.
            const int ih = c.indexer.n_head, id = c.indexer.head_dim;
            linear(L.idx_wq, s.xn.data(), n, s.iq.data(), pool, s.quant);
            linear(L.idx_wk, s.xn.data(), n, s.ik.data(), pool, s.quant);
            for (int i = 0; i < n; ++i) {
                float* iq = s.iq.data() + i * dih;
                float* ik = s.ik.data() + static_cast<int64_t>(i) * id;
                for (int h = 0; h < ih; ++h) kernels::rms_norm(iq + h * id, iq + h * id, L.idx_q_norm, id, c.rms_eps);
                kernels::rms_norm(ik, ik, L.idx_k_norm, id, c.rms_eps);
                const int64_t pos = pos0 + i;
                kernels::rope(iq, ih, id, c.rope_dim, pos, c.rope_base, c.rope_freq_scale, c.rope_style);
                kernels::rope(ik, 1, id, c.rope_dim, pos, c.rope_base, c.rope_freq_scale, c.rope_style);
            }
            call.index_n_head = ih;
            call.index_dim = id;
            call.index_q = s.iq.data();
            call.index_k = s.ik.data();
        }
        attention.forward(call, kv, pool);
        linear(L.wo, s.att.data(), n, s.o.data(), pool, s.quant);
        if (L.attn_post_norm)
            for (int i = 0; i < n; ++i) kernels::rms_norm(s.o.data() + i * d, s.o.data() + i * d, L.attn_post_norm, d, c.rms_eps);
        kernels::add(s.x.data(), s.o.data(), static_cast<int64_t>(nn) * d);

        for (int i = 0; i < n; ++i) kernels::rms_norm(s.xn.data() + i * d, s.x.data() + i * d, L.ffn_norm, d, c.rms_eps);
        if (L.is_moe())
            moe_ffn(c, L, s.xn.data(), n, s.o.data(), pool, s);
        else
            dense_ffn(c, L.gate, L.up, L.down, c.n_ff, s.xn.data(), n, s.o.data(), pool, s);
        if (L.ffn_post_norm)
            for (int i = 0; i < n; ++i) kernels::rms_norm(s.o.data() + i * d, s.o.data() + i * d, L.ffn_post_norm, d, c.rms_eps);
        kernels::add(s.x.data(), s.o.data(), static_cast<int64_t>(nn) * d);
    }
    kv.set_n_past(pos0 + n);

    const int first = all_logits ? 0 : n - 1;
    const int n_out = n - first;
    for (int i = first; i < n; ++i)
        kernels::rms_norm(s.xn.data() + (i - first) * d, s.x.data() + i * d, weights_.output_norm, d, c.rms_eps);
    linear(weights_.output, s.xn.data(), n_out, logits, pool, s.quant);
}

}  // namespace sl
