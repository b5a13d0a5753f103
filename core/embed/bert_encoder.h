// A BERT encoder (bert-base layout, post-LayerNorm, GELU-erf FFN, absolute positions) over the
// weights of a safetensors file, on the CPU: what all-MiniLM-L6-v2 runs (6 layers, 384 wide, 12
// heads, FFN 1536). No padding: each sequence attends to all of its own tokens and only them.
//
//   x = LN(word[id] + pos[i] + type[0])                                   (n, hidden)
//   per layer:  a = softmax(Q K^T / sqrt(head_dim)) V per head, Q/K/V = x W^T + b
//               x = LN(x + a Wo^T + bo);  x = LN(x + gelu(x Wi^T + bi) Wo2^T + bo2)
//
// Weight names are Hugging Face BertModel's ("embeddings.word_embeddings.weight",
// "encoder.layer.L.attention.self.query.weight", ...), optionally under "bert.". The linear
// layers' weights (F32, F16 or BF16) are converted to f32 and packed into column panels at load for
// kernels::gemm_f32 (owned: ~43 MB for MiniLM); the embedding tables are read in place from the
// map when aligned for their type (F32 4 bytes, F16/BF16 2), else converted. The SafetensorsFile
// must outlive the encoder.
//
// Threading: forward() runs on the calling thread and spreads its loops over `pool`; it keeps its
// scratch in the caller's BertScratch, so one encoder can serve several callers that each bring a
// pool and scratch. The encoder itself is immutable after construction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/embed/safetensors.h"
#include "core/model/tensor_view.h"

namespace sl {

class ThreadPool;

struct BertConfig {
    int vocab_size = 0;
    int hidden = 0;  // d_model
    int n_layers = 0;
    int n_heads = 0;
    int intermediate = 0;   // FFN width
    int max_positions = 0;  // position embeddings
    int type_vocab = 0;
    float ln_eps = 1e-12f;

    int head_dim() const { return hidden / n_heads; }
    // Reads a Hugging Face config.json (model_type "bert", hidden_act "gelu", absolute positions).
    // Throws IoError / FormatError naming the file and the key.
    static BertConfig from_json_file(const std::filesystem::path& path);
};

// Per-caller work buffers of forward(); grown on demand, reused across calls.
struct BertScratch {
    std::vector<float> x, q, k, v, ctx, tmp, ffn;
};

class BertEncoder {
public:
    // Binds the weights of `file` to `config`; throws FormatError naming the file and the tensor
    // when one is missing or has the wrong shape or dtype.
    BertEncoder(const SafetensorsFile& file, const BertConfig& config);

    const BertConfig& config() const { return cfg_; }

    // Encodes sequences in one pass: seqs[s] are token ids (each 1..max_positions long, every id
    // < vocab_size, else throws sl::Error). out gets the final hidden states of every token, the
    // sequences one after another: (sum of lengths, hidden).
    void forward(std::span<const std::vector<int32_t>> seqs, std::vector<float>& out,
                 ThreadPool& pool, BertScratch& scratch) const;

private:
    struct Linear {
        int64_t in = 0, out = 0;
        std::vector<float> wp;  // W (out, in) packed in column panels for kernels::gemm_f32
        std::vector<float> b;   // (out)
    };
    struct Norm {
        std::vector<float> w, b;
    };
    struct Layer {
        Linear q, k, v, o, up, down;
        Norm ln_attn, ln_ffn;
    };

    TensorView matrix(const std::string& name, int64_t rows, int64_t cols);
    std::vector<float> vector(const std::string& name, int64_t n);
    Linear linear(const std::string& prefix, int64_t out, int64_t in);
    Norm norm(const std::string& prefix, int64_t n);
    void apply_linear(const Linear& l, const float* x, int n_tokens, float* y,
                      ThreadPool& pool) const;
    void layer_norm(float* x, int n_tokens, const Norm& n, ThreadPool& pool) const;

    const SafetensorsFile& file_;
    BertConfig cfg_;
    std::string prefix_;
    std::vector<std::vector<float>> owned_;  // converted weights that could not be used in place
    TensorView word_, pos_, type_;
    Norm ln_embed_;
    std::vector<Layer> layers_;
};

}  // namespace sl
