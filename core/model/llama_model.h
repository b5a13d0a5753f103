// Llama-family decoders (Llama 2/3, SmolLM2, Mistral, Qwen2/2.5, Mixtral): pre-norm blocks of RMSNorm,
// GQA attention with RoPE, and a SwiGLU FFN; tied or separate output head. Gemma 3 is the same
// graph with its own pieces switched on (LlamaConfig's gemma fields): embeddings scaled by
// sqrt(d_model), RMSNorm of each q and k head, norms after the attention and after the FFN, a GELU
// (tanh) gated FFN, its own query scale, and sliding-window layers with their own RoPE base.
// MiniMax-M3 is the graph with per-head q/k norms, partial NeoX RoPE, swiglu_oai FFNs, mixture-of-
// experts layers after its leading dense ones, and the MSA indexer in those sparse layers.
//
// The model holds views into the mapped file (it owns nothing big); the forward pass writes into a
// KvCache and scratch owned by the caller's session. A model is immutable after construction and may
// be shared by sessions on different threads; one forward pass at a time per session.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/tensor_view.h"
#include "kernels/cpu/ops.h"

namespace sl {

class Attention;
class KvCache;
struct MsaConfig;
class ThreadPool;

struct LlamaConfig {
    std::string arch;         // general.architecture ("llama", "qwen2", ...)
    int n_layer = 0;
    int d_model = 0;
    int n_ff = 0;
    int n_head = 0;
    int n_kv_head = 0;
    int head_dim = 0;
    int n_vocab = 0;
    int n_ctx_train = 0;
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
    int rope_dim = 0;              // dims rotated per head (head_dim unless the file says less)
    kernels::RopeStyle rope_style = kernels::RopeStyle::Norm;
    // Per-dimension frequency divisors (rope_dim / 2) from the `rope_freqs.weight` tensor that
    // Llama 3.1+ files carry for their long-context RoPE scaling; empty when the file has none.
    std::vector<float> rope_freq_factors;
    // Gemma 3 (llama.cpp's llm_build_gemma3_iswa); the defaults are the llama graph.
    float embed_scale = 1.0f;     // token embeddings are multiplied by this (gemma3: sqrt(d_model))
    float attn_scale = 0.0f;      // query scale; 0: 1 / sqrt(head_dim)
    bool ffn_gelu = false;        // GELU (tanh approximation) gates the FFN instead of SiLU
    int swa_window = 0;           // sliding layers attend to the latest swa_window positions; 0: none
    int swa_pattern = 0;          // layer l slides when l % swa_pattern < swa_pattern - 1
    float rope_base_swa = 10000.0f;      // RoPE of the sliding layers
    float rope_freq_scale_swa = 1.0f;
    bool layer_slides(int l) const { return swa_window > 0 && swa_pattern > 0 && l % swa_pattern < swa_pattern - 1; }
    // MSA indexer (MiniMax-M3 style; /work/shared/MSA.md), from "<arch>.attention.indexer.*" and
    // "<arch>.leading_dense_block_count". n_head == 0: the file has none (training-free MSA only).
    struct Indexer {
        int n_head = 0;        // index query heads; == n_kv_head (index head h serves KV group h)
        int head_dim = 0;      // key_length: dims of an index query row and of an index key
        int top_k = 0;         // blocks per (query block, KV group), local included
        int block_size = 0;    // tokens per block
        int local_blocks = 1;  // blocks forced at the query's end (1 is supported)
        int dense_layers = 0;  // layers [0, dense_layers) are dense and have no indexer tensors
    } indexer;
    bool has_indexer() const { return indexer.n_head > 0; }
    // MiniMax-M3 (llama.cpp's llm_build_minimax_m3): every FFN's activation is swiglu_oai.
    bool ffn_swiglu_oai = false;
    float swiglu_alpha = 1.702f;
    float swiglu_limit = 7.0f;
    // Mixture of experts ("<arch>.expert_*"); n_expert == 0: every FFN is dense. Layers
    // [0, dense_layers) keep a dense FFN (M3's leading_dense_block_count); the others route each
    // token to n_expert_used of n_expert experts (n_ff_exp wide) and add a shared expert of
    // n_ff_exp * n_expert_shared when the file has one. See core/model/moe_ffn.h.
    struct Moe {
        enum class Gating { Softmax, Sigmoid };
        int n_expert = 0;
        int n_expert_used = 0;
        int n_ff_exp = 0;
        int n_expert_shared = 0;
        int dense_layers = 0;
        Gating gating = Gating::Softmax;  // router probabilities (expert_gating_func 1 / 2)
        bool norm_weights = false;        // divide the chosen experts' weights by their sum
        float weights_scale = 1.0f;       // then multiply them by this (expert_weights_scale)
    } moe;
    bool has_moe() const { return moe.n_expert > 0; }
    bool layer_is_moe(int l) const { return has_moe() && l >= moe.dense_layers; }
};

struct LlamaLayer {
    const float* attn_norm = nullptr;  // (d_model)
    TensorView wq, wk, wv, wo;         // wq: (n_head*head_dim rows of d_model); wo: d_model rows of n_head*head_dim
    const float* bq = nullptr;         // optional biases (qwen2): (n_head*head_dim), (n_kv*hd), (n_kv*hd)
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* ffn_norm = nullptr;   // (d_model)
    TensorView gate, up, down;         // gate/up: n_ff rows of d_model; down: d_model rows of n_ff
    // Gemma 3 (null otherwise): per-head RMSNorm weights of q and k (head_dim), and the norms applied
    // to the attention's and the FFN's outputs before they join the residual (d_model).
    const float* attn_q_norm = nullptr;
    const float* attn_k_norm = nullptr;
    const float* attn_post_norm = nullptr;
    const float* ffn_post_norm = nullptr;
    // MSA indexer (sparse layers of files that have one; empty/null otherwise), all F32:
    TensorView idx_wq;                 // indexer.q_proj: (indexer.n_head * indexer.head_dim) rows of d_model
    TensorView idx_wk;                 // indexer.k_proj: indexer.head_dim rows of d_model
    const float* idx_q_norm = nullptr; // (indexer.head_dim), applied per index head
    const float* idx_k_norm = nullptr; // (indexer.head_dim)
    bool has_indexer() const { return !idx_wq.empty(); }
    // Mixture-of-experts FFN (layers where LlamaConfig::layer_is_moe; gate/up/down are empty then):
    TensorView ffn_gate_inp;                // router: n_expert rows of d_model
    const float* exp_probs_b = nullptr;     // (n_expert) selection bias (M3, DeepSeek V3), or null
    std::vector<TensorView> gate_exps, up_exps, down_exps;  // per expert: as gate/up/down, n_ff_exp wide
    TensorView gate_shexp, up_shexp, down_shexp;            // shared expert (empty when none)
    bool is_moe() const { return !ffn_gate_inp.empty(); }
};

struct LlamaWeights {
    TensorView tok_embd;               // n_vocab rows of d_model
    std::vector<LlamaLayer> layers;
    const float* output_norm = nullptr;
    TensorView output;                 // n_vocab rows of d_model (== tok_embd when tied)
};

// Per-session scratch for forward passes; grows to the largest batch seen.
struct ForwardScratch {
    std::vector<float> x, xn, q, k, v, att, o, g, u, h, logits_in;
    std::vector<float> iq, ik;   // MSA index queries (n, idx heads, idx dim) and keys (n, idx dim)
    std::vector<uint8_t> quant;  // activations quantized for the weight type
    // Mixture of experts: router scores (n, n_expert), each token's chosen experts and weights
    // (n, n_expert_used), the rows routed to one expert and their activations.
    std::vector<float> router, route_w, xe, ge, ue, he, ye;
    std::vector<int32_t> route_e, rows;
};

class LlamaModel {
public:
    LlamaModel(LlamaConfig config, LlamaWeights weights);

    const LlamaConfig& config() const { return config_; }
    const LlamaWeights& weights() const { return weights_; }

    // Runs tokens[0..n) at positions pos0..pos0+n-1 through the model, appending their K/V to
    // `kv` (whose n_past must equal pos0), and writes logits: for every position into
    // `logits` (n, n_vocab) when all_logits, else for the last one only (n_vocab).
    //
    // `embeddings` (optional, (n, d_model)): rows to feed instead of token embeddings, for
    // positions whose token is kEmbeddingToken (image-patch tokens from a vision encoder); rows of
    // other positions are ignored. Null: every position is a token.
    // `causal` false: the n positions attend to each other both ways (AttentionCall::causal; for
    // Gemma 3's image tokens, run as one call of their own).
    void forward(const int32_t* tokens, int n, int64_t pos0, KvCache& kv, Attention& attention,
                 ThreadPool& pool, ForwardScratch& scratch, float* logits, bool all_logits,
                 const float* embeddings = nullptr, bool causal = true) const;

    // Token id marking a position whose input row comes from `embeddings` in forward().
    static constexpr int32_t kEmbeddingToken = -1;

private:
    LlamaConfig config_;
    LlamaWeights weights_;
};

// The MSA settings a file with an indexer asks for (native mode): `base` with scoring Native and
// top_k, block_size and dense_layers from the indexer metadata (callers apply the user's overrides
// afterwards). Throws Error when the file has no indexer.
MsaConfig native_msa_config(const LlamaConfig& config, MsaConfig base);

}  // namespace sl
