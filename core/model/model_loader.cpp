#include "core/model/model_loader.h"

#include <chrono>
#include <cmath>

#include "core/util/error.h"
#include "kernels/cpu/tensor_types.h"

namespace sl {

namespace {

// Architectures that share the llama graph (RMSNorm, RoPE, GQA, SwiGLU), with their RoPE style
// as llama.cpp's llama_model_rope_type() gives it.
struct ArchInfo {
    const char* name;
    kernels::RopeStyle rope;
};
constexpr ArchInfo kArchs[] = {
    {"llama", kernels::RopeStyle::Norm},
    {"mistral", kernels::RopeStyle::Norm},
    {"qwen2", kernels::RopeStyle::Neox},
    {"gemma3", kernels::RopeStyle::Neox},
    {"minimax-m3", kernels::RopeStyle::Neox},
};

std::string fname(const GgufFile& f) { return f.name(); }

TensorView tensor(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1, bool required = true) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
        if (!required) return {};
        throw FormatError(fname(f) + ": tensor '" + name + "' is missing");
    }
    const int64_t got0 = static_cast<int64_t>(t->dims[0]);
    const int64_t got1 = t->dims.size() > 1 ? static_cast<int64_t>(t->dims[1]) : 1;
    if (got0 != ne0 || got1 != ne1 || t->dims.size() > 2)
        throw FormatError(fname(f) + ": tensor '" + name + "' has shape {" + std::to_string(got0) + ", " +
                          std::to_string(got1) + "}, expected {" + std::to_string(ne0) + ", " + std::to_string(ne1) + "}");
    const auto info = kernels::tensor_type_info(t->type);
    if (!info.computable)
        throw FormatError(fname(f) + ": tensor '" + name + "' has type " + (info.name ? info.name : "unknown") +
                          ", which Sightline cannot compute with yet (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs)");
    TensorView v;
    v.type = static_cast<kernels::TensorType>(t->type);
    v.data = t->data;
    v.ne0 = ne0;
    v.ne1 = ne1;
    return v;
}

const float* vector_f32(const GgufFile& f, const std::string& name, int64_t n, bool required = true) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
        if (!required) return nullptr;
        throw FormatError(fname(f) + ": tensor '" + name + "' is missing");
    }
    if (t->type != static_cast<uint32_t>(kernels::TensorType::F32) || t->n_elements != static_cast<uint64_t>(n))
        throw FormatError(fname(f) + ": tensor '" + name + "' must be f32 with " + std::to_string(n) + " elements");
    return reinterpret_cast<const float*>(t->data);
}

// The n_expert matrices of a stacked expert tensor ({ne0, ne1, n_expert} in ggml order), each a
// view of its own slice of the mapped data.
std::vector<TensorView> experts(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1, int n_expert) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) throw FormatError(fname(f) + ": tensor '" + name + "' is missing");
    auto dim = [&](size_t i) { return i < t->dims.size() ? static_cast<int64_t>(t->dims[i]) : 1; };
    if (t->dims.size() != 3 || dim(0) != ne0 || dim(1) != ne1 || dim(2) != n_expert)
        throw FormatError(fname(f) + ": tensor '" + name + "' has shape {" + std::to_string(dim(0)) + ", " +
                          std::to_string(dim(1)) + ", " + std::to_string(dim(2)) + "}, expected {" + std::to_string(ne0) +
                          ", " + std::to_string(ne1) + ", " + std::to_string(n_expert) + "}");
    const auto info = kernels::tensor_type_info(t->type);
    if (!info.computable || ne0 % info.block_size != 0)
        throw FormatError(fname(f) + ": tensor '" + name + "' has type " + (info.name ? info.name : "unknown") +
                          ", which Sightline cannot compute with for rows of " + std::to_string(ne0));
    const size_t bytes = static_cast<size_t>(ne0 / info.block_size) * info.type_size * static_cast<size_t>(ne1);
    std::vector<TensorView> v(static_cast<size_t>(n_expert));
    for (int e = 0; e < n_expert; ++e) {
        v[static_cast<size_t>(e)].type = static_cast<kernels::TensorType>(t->type);
        v[static_cast<size_t>(e)].data = static_cast<const uint8_t*>(t->data) + bytes * static_cast<size_t>(e);
        v[static_cast<size_t>(e)].ne0 = ne0;
        v[static_cast<size_t>(e)].ne1 = ne1;
    }
    return v;
}

// Mixture-of-experts hyperparameters ("<arch>.expert_*") as llama.cpp reads them: Mixtral-style
// llama files route by softmax and renormalise the chosen weights; MiniMax-M3 by sigmoid with a
// selection bias, its leading dense layers and a shared expert, per the file's keys.
void read_moe_config(const GgufFile& f, LlamaConfig& c) {
    const uint32_t n_expert = arch_u32(f, "expert_count", 0);
    if (n_expert == 0) {
        if (c.arch == "minimax-m3")
            throw FormatError(fname(f) + ": " + arch_key(f, "expert_count") + " is missing (MiniMax-M3 is a mixture of experts)");
        return;
    }
    LlamaConfig::Moe& m = c.moe;
    m.n_expert = static_cast<int>(std::min<uint32_t>(n_expert, 1u << 20));
    m.n_expert_used = static_cast<int>(std::min<uint32_t>(arch_u32(f, "expert_used_count", 0), 1u << 20));
    m.n_ff_exp = static_cast<int>(std::min<uint32_t>(arch_u32(f, "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff)), 1u << 24));
    m.n_expert_shared = static_cast<int>(std::min<uint32_t>(arch_u32(f, "expert_shared_count", 0), 64));
    m.dense_layers = static_cast<int>(std::min<uint32_t>(arch_u32(f, "leading_dense_block_count", 0), 1u << 20));
    const bool m3 = c.arch == "minimax-m3";
    const uint32_t gating = arch_u32(f, "expert_gating_func", m3 ? 2u : 1u);
    m.norm_weights = m3 ? f.get_bool(arch_key(f, "expert_weights_norm")).value_or(false) : true;
    m.weights_scale = arch_f32(f, "expert_weights_scale", 0.0f);
    const std::string at = fname(f) + ": " + arch_key(f, "");
    if (m.n_expert > 4096 || m.n_expert_used < 1 || m.n_expert_used > m.n_expert)
        throw FormatError(at + "expert_used_count " + std::to_string(m.n_expert_used) + " of expert_count " +
                          std::to_string(m.n_expert) + " is not usable (1..expert_count, at most 4096 experts)");
    if (m.n_ff_exp <= 0 || m.n_ff_exp > (1 << 20))
        throw FormatError(at + "expert_feed_forward_length " + std::to_string(m.n_ff_exp) + " is not usable");
    if (m.dense_layers > c.n_layer)
        throw FormatError(at + "leading_dense_block_count " + std::to_string(m.dense_layers) + " exceeds the " +
                          std::to_string(c.n_layer) + " layers");
    if (gating != 1 && gating != 2)
        throw FormatError(at + "expert_gating_func " + std::to_string(gating) +
                          " is not supported (1: softmax, 2: sigmoid)");
    m.gating = gating == 2 ? LlamaConfig::Moe::Gating::Sigmoid : LlamaConfig::Moe::Gating::Softmax;
    if (!std::isfinite(m.weights_scale) || m.weights_scale < 0.0f || m.weights_scale > 1000.0f)
        throw FormatError(at + "expert_weights_scale " + std::to_string(m.weights_scale) + " is not usable");
}

// Gemma 3's hyperparameters as llama.cpp reads them (llama-model.cpp, LLM_ARCH_GEMMA3): sliding
// window from the file, every 6th layer global, the sliding layers' RoPE base 10000 unscaled, the
// query scale 1/sqrt(head_dim) (27B, 62 layers: 1/sqrt(d_model / n_head)). The file's norm weights
// already hold Gemma's (1 + w), as its converter writes them.
void read_gemma3_config(const GgufFile& f, LlamaConfig& c) {
    c.embed_scale = std::sqrt(static_cast<float>(c.d_model));
    c.ffn_gelu = true;
    c.swa_window = static_cast<int>(arch_u32(f, "attention.sliding_window", 0));
    if (c.swa_window < 0 || c.swa_window > (1 << 24))
        throw FormatError(fname(f) + ": attention.sliding_window " + std::to_string(c.swa_window) + " is not usable");
    c.swa_pattern = 6;
    c.rope_base_swa = 10000.0f;
    c.rope_freq_scale_swa = 1.0f;
    const float q_dim = c.n_layer == 62 ? static_cast<float>(c.d_model) / static_cast<float>(c.n_head)
                                        : static_cast<float>(c.head_dim);
    c.attn_scale = 1.0f / std::sqrt(q_dim);
}

// MSA indexer metadata ("<arch>.attention.indexer.*", "<arch>.leading_dense_block_count"); absent
// head_count: no indexer. Needs the rest of `c` (heads, head_dim, rope_dim, n_layer) read first.
void read_indexer_config(const GgufFile& f, LlamaConfig& c) {
    if (!f.find(arch_key(f, "attention.indexer.head_count"))) return;
    LlamaConfig::Indexer& x = c.indexer;
    x.n_head = static_cast<int>(arch_u32(f, "attention.indexer.head_count"));
    x.head_dim = static_cast<int>(arch_u32(f, "attention.indexer.key_length", static_cast<uint32_t>(c.head_dim)));
    x.top_k = static_cast<int>(arch_u32(f, "attention.indexer.top_k", 16));
    x.block_size = static_cast<int>(arch_u32(f, "attention.indexer.block_size", 128));
    x.local_blocks = static_cast<int>(arch_u32(f, "attention.indexer.local_blocks", 1));
    x.dense_layers = static_cast<int>(arch_u32(f, "leading_dense_block_count", 0));
    const std::string at = fname(f) + ": " + arch_key(f, "attention.indexer.");
    if (x.n_head != c.n_kv_head) {
        std::string e = at + "head_count is " + std::to_string(x.n_head);
        e += ", expected one index head per KV group (" + std::to_string(c.n_kv_head) + ")";
        throw FormatError(e);
    }
    if (x.head_dim <= 0 || x.head_dim > 4096 || x.head_dim < c.rope_dim) {
        std::string e = at + "key_length " + std::to_string(x.head_dim);
        e += " is implausible or shorter than rope.dimension_count " + std::to_string(c.rope_dim);
        throw FormatError(e);
    }
    if (x.top_k <= 0 || x.block_size <= 0 || x.block_size > (1 << 20)) {
        std::string e = at + "top_k " + std::to_string(x.top_k);
        e += " / block_size " + std::to_string(x.block_size) + " must be positive";
        throw FormatError(e);
    }
    if (x.local_blocks != 1)
        throw FormatError(at + "local_blocks " + std::to_string(x.local_blocks) + " is not supported (1 is)");
    if (x.dense_layers < 0 || x.dense_layers > c.n_layer) {
        std::string e = fname(f) + ": " + arch_key(f, "leading_dense_block_count") + " " + std::to_string(x.dense_layers);
        e += " exceeds the " + std::to_string(c.n_layer) + " layers";
        throw FormatError(e);
    }
}

}  // namespace

LlamaConfig read_llama_config(const GgufFile& f) {
    LlamaConfig c;
    c.arch = std::string(f.architecture());
    const ArchInfo* arch = nullptr;
    for (const auto& a : kArchs)
        if (c.arch == a.name) arch = &a;
    if (!arch)
        throw FormatError(fname(f) + ": architecture '" + c.arch + "' is not supported (supported: llama, mistral, qwen2, gemma3, minimax-m3)");
    c.rope_style = arch->rope;
    c.n_layer = static_cast<int>(arch_u32(f, "block_count"));
    c.d_model = static_cast<int>(arch_u32(f, "embedding_length"));
    c.n_ff = static_cast<int>(arch_u32(f, "feed_forward_length"));
    c.n_head = static_cast<int>(arch_u32(f, "attention.head_count"));
    c.n_kv_head = static_cast<int>(arch_u32(f, "attention.head_count_kv", static_cast<uint32_t>(c.n_head)));
    c.n_ctx_train = static_cast<int>(arch_u32(f, "context_length", 2048));
    c.rms_eps = arch_f32(f, "attention.layer_norm_rms_epsilon", 1e-5f);
    c.rope_base = arch_f32(f, "rope.freq_base", 10000.0f);
    if (c.n_layer <= 0 || c.d_model <= 0 || c.n_head <= 0 || c.n_kv_head <= 0 || c.n_ff <= 0 ||
        c.n_head % c.n_kv_head != 0 || c.d_model % c.n_head != 0 || c.n_layer > 1024 || c.d_model > 65536)
        throw FormatError(fname(f) + ": implausible hyperparameters (layers " + std::to_string(c.n_layer) + ", d_model " +
                          std::to_string(c.d_model) + ", heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) + ")");
    // Values, not only structure: a damaged or hand-edited file would load and generate garbage.
    if (!(c.rms_eps > 0.0f && c.rms_eps < 0.1f))
        throw FormatError(fname(f) + ": attention.layer_norm_rms_epsilon " + std::to_string(c.rms_eps) + " is not a small positive number");
    if (!(c.rope_base > 0.0f && std::isfinite(c.rope_base)))
        throw FormatError(fname(f) + ": rope.freq_base " + std::to_string(c.rope_base) + " is not a positive number");
    if (c.n_ctx_train <= 0 || c.n_ctx_train > (1 << 24))
        throw FormatError(fname(f) + ": context_length " + std::to_string(c.n_ctx_train) + " is not a usable context length");
    c.head_dim = static_cast<int>(arch_u32(f, "attention.key_length", static_cast<uint32_t>(c.d_model / c.n_head)));
    c.rope_dim = static_cast<int>(arch_u32(f, "rope.dimension_count", static_cast<uint32_t>(c.head_dim)));
    if (c.rope_dim > c.head_dim || c.rope_dim % 2) throw FormatError(fname(f) + ": rope.dimension_count " + std::to_string(c.rope_dim) + " does not fit head_dim " + std::to_string(c.head_dim));
    if (auto type = f.get_string(arch_key(f, "rope.scaling.type")); type && *type != "none") {
        if (*type != "linear") throw FormatError(fname(f) + ": rope scaling '" + std::string(*type) + "' is not supported yet (linear is)");
        const float factor = arch_f32(f, "rope.scaling.factor", 1.0f);
        if (!(factor > 0.0f && std::isfinite(factor)))
            throw FormatError(fname(f) + ": rope.scaling.factor " + std::to_string(factor) + " is not a positive number");
        c.rope_freq_scale = 1.0f / factor;
    }
    if (const GgufTensorInfo* ff = f.find_tensor("rope_freqs.weight")) {
        const float* v = vector_f32(f, "rope_freqs.weight", c.rope_dim / 2);
        c.rope_freq_factors.assign(v, v + c.rope_dim / 2);
        for (float x : c.rope_freq_factors)
            if (!(x > 0.0f && std::isfinite(x)))
                throw FormatError(fname(f) + ": tensor 'rope_freqs.weight' holds " + std::to_string(x) + ", not a positive factor");
        (void)ff;
    }
    if (c.arch == "gemma3") read_gemma3_config(f, c);
    if (c.arch == "minimax-m3") c.ffn_swiglu_oai = true;
    read_moe_config(f, c);
    read_indexer_config(f, c);
    const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
    if (!emb || emb->dims.size() < 2) throw FormatError(fname(f) + ": tensor 'token_embd.weight' is missing");
    c.n_vocab = static_cast<int>(emb->dims[1]);
    return c;
}

TokenizerData read_tokenizer_data(const GgufFile& f) {
    TokenizerData t;
    t.name = f.name();
    t.model = std::string(f.get_string("tokenizer.ggml.model").value_or(""));
    t.pre = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));
    if (auto tokens = f.get_string_array("tokenizer.ggml.tokens")) {
        t.tokens.reserve(tokens->size());
        for (auto s : *tokens) t.tokens.emplace_back(s);
    } else {
        throw FormatError(f.name() + ": metadata 'tokenizer.ggml.tokens' is missing");
    }
    if (auto merges = f.get_string_array("tokenizer.ggml.merges")) {
        t.merges.reserve(merges->size());
        for (auto s : *merges) t.merges.emplace_back(s);
    }
    if (auto types = f.get_i32_array("tokenizer.ggml.token_type")) t.token_types = std::move(*types);
    if (auto scores = f.get_f32_array("tokenizer.ggml.scores")) t.scores = std::move(*scores);
    auto id = [&](const char* key) { return f.get_i32(key).value_or(-1); };
    t.bos_id = id("tokenizer.ggml.bos_token_id");
    t.eos_id = id("tokenizer.ggml.eos_token_id");
    t.eot_id = id("tokenizer.ggml.eot_token_id");
    t.unk_id = id("tokenizer.ggml.unknown_token_id");
    t.pad_id = id("tokenizer.ggml.padding_token_id");
    t.add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(t.model == "llama");
    t.add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
    t.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(t.model == "llama");
    t.chat_template = std::string(f.get_string("tokenizer.chat_template").value_or(""));
    return t;
}

std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& path) {
    const auto start = std::chrono::steady_clock::now();
    auto m = std::make_unique<LoadedModel>(LoadedModel{GgufFile::open(path), nullptr, nullptr, nullptr, 0});
    const GgufFile& f = m->file;
    const LlamaConfig c = read_llama_config(f);
    const int64_t d = c.d_model, dq = static_cast<int64_t>(c.n_head) * c.head_dim,
                  dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    LlamaWeights w;
    w.tok_embd = tensor(f, "token_embd.weight", d, c.n_vocab);
    w.output_norm = vector_f32(f, "output_norm.weight", d);
    w.output = tensor(f, "output.weight", d, c.n_vocab, false);
    if (w.output.empty()) w.output = w.tok_embd;  // tied embeddings
    for (int l = 0; l < c.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LlamaLayer L;
        L.attn_norm = vector_f32(f, p + "attn_norm.weight", d);
        L.wq = tensor(f, p + "attn_q.weight", d, dq);
        L.wk = tensor(f, p + "attn_k.weight", d, dkv);
        L.wv = tensor(f, p + "attn_v.weight", d, dkv);
        L.wo = tensor(f, p + "attn_output.weight", dq, d);
        L.bq = vector_f32(f, p + "attn_q.bias", dq, false);
        L.bk = vector_f32(f, p + "attn_k.bias", dkv, false);
        L.bv = vector_f32(f, p + "attn_v.bias", dkv, false);
        L.ffn_norm = vector_f32(f, p + "ffn_norm.weight", d);
        if (c.layer_is_moe(l)) {
            const LlamaConfig::Moe& mo = c.moe;
            L.ffn_gate_inp = tensor(f, p + "ffn_gate_inp.weight", d, mo.n_expert);
            L.exp_probs_b = vector_f32(f, p + "exp_probs_b.bias", mo.n_expert, false);
            L.gate_exps = experts(f, p + "ffn_gate_exps.weight", d, mo.n_ff_exp, mo.n_expert);
            L.up_exps = experts(f, p + "ffn_up_exps.weight", d, mo.n_ff_exp, mo.n_expert);
            L.down_exps = experts(f, p + "ffn_down_exps.weight", mo.n_ff_exp, d, mo.n_expert);
            const int64_t fs = static_cast<int64_t>(mo.n_ff_exp) * mo.n_expert_shared;
            const bool shared = mo.n_expert_shared > 0 || f.find_tensor(p + "ffn_gate_shexp.weight");
            if (shared) {
                const GgufTensorInfo* g = f.find_tensor(p + "ffn_gate_shexp.weight");
                const int64_t sw = mo.n_expert_shared > 0 ? fs : (g && g->dims.size() > 1 ? static_cast<int64_t>(g->dims[1]) : 0);
                L.gate_shexp = tensor(f, p + "ffn_gate_shexp.weight", d, sw);
                L.up_shexp = tensor(f, p + "ffn_up_shexp.weight", d, sw);
                L.down_shexp = tensor(f, p + "ffn_down_shexp.weight", sw, d);
            }
            if (f.find_tensor(p + "ffn_gate_inp_shexp.weight"))
                throw FormatError(fname(f) + ": tensor '" + p + "ffn_gate_inp_shexp.weight' (a gated shared expert, "
                                  "Qwen2-MoE) is not supported yet");
        } else {
            L.gate = tensor(f, p + "ffn_gate.weight", d, c.n_ff);
            L.up = tensor(f, p + "ffn_up.weight", d, c.n_ff);
            L.down = tensor(f, p + "ffn_down.weight", c.n_ff, d);
        }
        if (c.arch == "minimax-m3") {  // per-head q/k RMSNorm, one head_dim vector for every head
            L.attn_q_norm = vector_f32(f, p + "attn_q_norm.weight", c.head_dim);
            L.attn_k_norm = vector_f32(f, p + "attn_k_norm.weight", c.head_dim);
        }
        if (c.arch == "gemma3") {
            L.attn_q_norm = vector_f32(f, p + "attn_q_norm.weight", c.head_dim);
            L.attn_k_norm = vector_f32(f, p + "attn_k_norm.weight", c.head_dim);
            L.attn_post_norm = vector_f32(f, p + "post_attention_norm.weight", d);
            L.ffn_post_norm = vector_f32(f, p + "post_ffw_norm.weight", d);
        }
        if (c.has_indexer() && l >= c.indexer.dense_layers) {  // sparse layer: the indexer is required
            const int64_t ih = static_cast<int64_t>(c.indexer.n_head) * c.indexer.head_dim;
            L.idx_wq = tensor(f, p + "indexer.q_proj.weight", d, ih);
            L.idx_wk = tensor(f, p + "indexer.k_proj.weight", d, c.indexer.head_dim);
            L.idx_q_norm = vector_f32(f, p + "indexer.q_norm.weight", c.indexer.head_dim);
            L.idx_k_norm = vector_f32(f, p + "indexer.k_norm.weight", c.indexer.head_dim);
        }
        w.layers.push_back(L);
    }
    m->model = std::make_unique<LlamaModel>(c, std::move(w));
    m->tokenizer = Tokenizer::create(read_tokenizer_data(f));
    if (m->tokenizer->vocab_size() > c.n_vocab)
        throw FormatError(f.name() + ": the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) +
                          " tokens but token_embd.weight has " + std::to_string(c.n_vocab) + " rows");
    m->chat = std::make_unique<ChatTemplate>(ChatTemplate::for_tokenizer(*m->tokenizer));
    m->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return m;
}

}  // namespace sl
