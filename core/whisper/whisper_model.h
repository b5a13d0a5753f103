// A Whisper model (encoder-decoder transformer, openai/whisper's layout) loaded from a CTranslate2
// model directory (model.bin + config.json, as faster-whisper uses it), on the CPU kernels.
//
//   encoder:  x = gelu(conv1(mel)), x = gelu(conv2(x)) (kernel 3, padding 1, stride 1 then 2)
//             (n_mels, 2 * n_audio_ctx) -> (n_audio_ctx, d);  x += sinusoidal positions
//             per layer (pre-LN): x += Attn(LN(x));  x += W2 gelu(W1 LN(x))
//             out = LN(x)                                                   (n_audio_ctx, d)
//   decoder:  x = tok_emb[id] + pos_emb[i]
//             per layer (pre-LN): x += SelfAttn_causal(LN(x)); x += CrossAttn(LN(x), enc_out);
//                                 x += W2 gelu(W1 LN(x))
//             logits = LN(x) tok_emb^T                                      (n_vocab)
// LayerNorm eps 1e-5, GELU exact (erf), attention scale 1 / sqrt(head_dim).
//
// CTranslate2 names (WhisperSpec revision 3): encoder/conv{1,2}/{weight,bias},
// encoder/position_encodings/encodings, encoder/layer_L/self_attention/{layer_norm/{gamma,beta},
// linear_0 (fused Q|K|V, (3d, d)), linear_1 (output)}, .../ffn/{layer_norm, linear_0, linear_1},
// encoder/layer_norm; decoder/embeddings/weight, decoder/position_encodings/encodings,
// decoder/layer_L/self_attention (as the encoder's), decoder/layer_L/attention/{layer_norm,
// linear_0 (Q, (d, d)), linear_1 (fused K|V of the encoder output, (2d, d)), linear_2 (output)},
// decoder/layer_L/ffn, decoder/layer_norm; decoder/projection/weight (an alias of the embeddings).
// Sizes come from the shapes; head counts from encoder/num_heads and decoder/num_heads.
//
// Weights (float32, float16, bfloat16, int8 or int16 in the file) are converted to f32 at load;
// linear and convolution weights are packed in column panels for kernels::gemm_f32 (owned; ~150
// MB for tiny). The model is immutable after open(); encode() and the decoder (whisper_decoder.h)
// run on the calling thread and spread their loops over the caller's ThreadPool, so one model
// serves several callers that each bring a pool and their own state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/whisper/log_mel.h"
#include "kernels/cpu/gemm_s8.h"

namespace sl {
class Ct2Model;
class ThreadPool;
}  // namespace sl

namespace sl::whisper {

struct WhisperConfig {
    int n_mels = 0;       // 80 (128 for large-v3)
    int n_audio_ctx = 0;  // encoder positions: 1500 (the encoder takes 2x as many mel frames)
    int n_text_ctx = 0;   // decoder positions: 448
    int d_model = 0;      // 384 for tiny
    int n_audio_heads = 0, n_text_heads = 0;
    int n_audio_layers = 0, n_text_layers = 0;
    int n_ffn = 0;    // 4 * d_model
    int n_vocab = 0;  // 51864 English-only, 51865 multilingual, 51866 large-v3

    bool multilingual() const { return n_vocab >= 51865; }
};

// Special token ids (from the vocabulary size, as CTranslate2 and whisper derive them).
struct WhisperTokens {
    int eot = 50256;  // <|endoftext|>
    int sot = 50257;  // <|startoftranscript|>
    int translate = 0, transcribe = 0, sot_lm = 0, sot_prev = 0;
    int no_speech = 0;        // <|nocaptions|> (<|nospeech|> in large-v3)
    int no_timestamps = 0;    // <|notimestamps|>
    int timestamp_begin = 0;  // <|0.00|>; timestamps run to n_vocab - 1 in 0.02 s steps
    static WhisperTokens for_vocab(int n_vocab);
};

struct Linear {
    int64_t in = 0, out = 0;
    std::vector<float> wp;    // W (out, in) packed for kernels::gemm_f32; empty when q8 is used
    std::vector<uint8_t> q8;  // or W as Q8_0 rows (out x in/32 blocks of 34 bytes); empty if not
    kernels::S8Weights s8;    // or W as int8 with a scale per row (kernels/cpu/gemm_s8.h)
    std::vector<float> b;     // (out); zeros where the file has none
};

struct WhisperLoadOptions {
    // Decoder weights (its linears and the output projection) as Q8_0 blocks (ggml's 8-bit, one
    // f16 scale per 32 weights; the activations quantized per 32 values too) instead of f32 or
    // int8: a quarter of the bytes each token reads, so decoding runs ~2-3x faster; the tokens
    // may differ from float32 decoding at near-ties, far less often than with int8's one scale
    // per 384-value row (wer_eval.py --seeds 8: 10.59 % word errors with an f32 encoder, float32
    // 10.48 %, int8 12.32 %). The input embeddings and the cross-attention K/V stay f32.
    bool q8_decoder = false;
    // Every linear of the encoder as int8 with one scale per weight row, the activations
    // quantized per token (CTranslate2's compute_type "int8", which faster-whisper users run on
    // CPUs): the GEMMs ~3x faster. Without q8_decoder also every linear of the decoder
    // (cross-attention K/V included) and the output projection: CTranslate2's int8 as a whole.
    // Only where kernels::gemm_s8 has a vector tier (AVX-512 VNNI); elsewhere those stay f32
    // (int8() says which). The convolutions, norms and attention stay f32.
    bool int8 = false;
};

struct Norm {
    std::vector<float> gamma, beta;  // (d)
};

struct EncoderLayer {
    Norm ln_attn, ln_ffn;
    Linear qkv, out, up, down;  // qkv (3d, d): Q rows, then K, then V
};

struct DecoderLayer {
    Norm ln_self, ln_cross, ln_ffn;
    Linear self_qkv, self_out;
    Linear cross_q, cross_kv, cross_out;  // cross_kv (2d, d): K rows, then V
    Linear up, down;
};

class WhisperModel {
public:
    // Opens `dir`/model.bin (and config.json when present, for the suppression lists). Throws
    // IoError / FormatError naming the file and the variable.
    static WhisperModel open(const std::filesystem::path& dir,
                             const WhisperLoadOptions& options = {});
    // Binds the variables of an already parsed file (which may be released afterwards: every
    // weight is copied). `config_json` may be empty (default suppression lists then).
    static WhisperModel from_ct2(const Ct2Model& file, const std::filesystem::path& config_json,
                                 const WhisperLoadOptions& options = {});

    // The default English model that scripts/setup.sh installs: <cache>/models/whisper-tiny.en.
    static std::filesystem::path default_dir();

    const WhisperConfig& config() const { return cfg_; }
    const WhisperTokens& tokens() const { return tok_; }
    // From config.json: suppressed at every step / at the first sampled step (CTranslate2's
    // suppress_tokens=[-1] and suppress_blank). Defaults when config.json is absent: empty /
    // {220 (" "), eot}.
    const std::vector<int>& suppress_ids() const { return suppress_ids_; }
    const std::vector<int>& suppress_ids_begin() const { return suppress_ids_begin_; }
    // The language tokens (<|en|>, <|zh|>, ...) of a multilingual model, from config.json's
    // lang_ids; empty for English-only models or without config.json.
    const std::vector<int>& lang_ids() const { return lang_ids_; }
    // The cross-attention heads (decoder layer, head) whose attention follows the speech, from
    // config.json's alignment_heads; without it, every head of the second half of the layers
    // (CTranslate2's default).
    const std::vector<std::pair<int, int>>& alignment_heads() const { return alignment_heads_; }

    // The encoder. `mel` must have n_mels rows and exactly 2 * n_audio_ctx frames (3000: pad or
    // cut the features to 30 s, as whisper does); throws sl::Error otherwise. out: (n_audio_ctx,
    // d_model) row-major.
    void encode(const LogMel& mel, std::vector<float>& out, ThreadPool& pool) const;

    // --- Weights, for the decoder (whisper_decoder.cpp) and tests.
    // (n_vocab, d): the input embedding and, tied, the output projection.
    const std::vector<float>& token_embedding() const { return tok_emb_; }
    // The same as Q8_0 rows when options.q8_decoder (the projection then uses it); else empty.
    const std::vector<uint8_t>& token_embedding_q8() const { return tok_emb_q8_; }
    // The same as int8 rows when the decoder runs int8 (the projection then uses it); else empty.
    const kernels::S8Weights& token_embedding_s8() const { return tok_emb_s8_; }
    // Whether the encoder's linears run int8 (WhisperLoadOptions::int8 on a CPU with the vector
    // tier); the decoder's do too when token_embedding_s8() is not empty.
    bool int8() const { return enc_int8_; }
    const WhisperLoadOptions& load_options() const { return opt_; }
    const std::vector<float>& text_positions() const { return text_pos_; }  // (n_text_ctx, d)
    const std::vector<DecoderLayer>& decoder_layers() const { return dec_layers_; }
    const Norm& decoder_norm() const { return dec_ln_; }

    // y (n_tokens, out) = x (n_tokens, in) W^T + b, columns (f32, int8) or rows (Q8_0) spread
    // over the pool.
    static void apply(const Linear& l, const float* x, int64_t n_tokens, float* y,
                      ThreadPool& pool);
    // In place over n_tokens rows of d values; eps 1e-5.
    static void layer_norm(float* x, int64_t n_tokens, int64_t d, const Norm& n, ThreadPool& pool);

private:
    WhisperConfig cfg_;
    WhisperTokens tok_;
    std::vector<int> suppress_ids_, suppress_ids_begin_, lang_ids_;
    std::vector<std::pair<int, int>> alignment_heads_;

    Linear conv1_, conv2_;          // as linears over im2col rows: W (d, in_channels * 3)
    std::vector<float> audio_pos_;  // (n_audio_ctx, d)
    std::vector<EncoderLayer> enc_layers_;
    Norm enc_ln_;

    WhisperLoadOptions opt_;
    bool enc_int8_ = false;
    std::vector<float> tok_emb_;  // (n_vocab, d)
    std::vector<uint8_t> tok_emb_q8_;
    kernels::S8Weights tok_emb_s8_;
    std::vector<float> text_pos_;  // (n_text_ctx, d)
    std::vector<DecoderLayer> dec_layers_;
    Norm dec_ln_;
};

}  // namespace sl::whisper
