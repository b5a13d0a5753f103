#include "core/whisper/whisper_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/embed/json.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/whisper/ct2_model.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quantize.h"

namespace sl::whisper {

namespace {

constexpr float kLnEps = 1e-5f;
constexpr int kMaxLayers = 128;

using Shape = std::vector<uint32_t>;

uint32_t u(int64_t v) {
    return static_cast<uint32_t>(v);
}

std::vector<float> vec(const Ct2Model& f, const std::string& name, int64_t n) {
    f.get(name, Shape{u(n)});
    return f.to_f32(name);
}

// A linear layer; the first `scaled_rows` output rows (weights and bias) multiplied by `scale`:
// the attention's 1 / sqrt(head_dim) folded into the query projection.
// With `int8`, the weights are kept as int8 rows (gemm_s8) instead of packed f32 panels.
Linear linear(const Ct2Model& f, const std::string& prefix, int64_t out, int64_t in,
              int64_t scaled_rows = 0, float scale = 1.0f, bool int8 = false) {
    const std::string wname = prefix + "/weight";
    f.get(wname, Shape{u(out), u(in)});
    std::vector<float> w = f.to_f32(wname);
    Linear l;
    l.in = in;
    l.out = out;
    if (f.find(prefix + "/bias"))
        l.b = vec(f, prefix + "/bias", out);
    else
        l.b.assign(static_cast<size_t>(out), 0.0f);
    for (int64_t r = 0; r < scaled_rows; ++r) {
        for (int64_t k = 0; k < in; ++k) w[static_cast<size_t>(r * in + k)] *= scale;
        l.b[static_cast<size_t>(r)] *= scale;
    }
    if (int8) {
        l.s8 = kernels::quantize_weights(w.data(), in, out, in);
        return l;
    }
    l.wp.resize(kernels::packed_size(out, in));
    kernels::pack_panels(w.data(), out, in, l.wp.data());
    return l;
}

// W (rows, n) f32 -> Q8_0 rows; n a multiple of 32.
std::vector<uint8_t> to_q8(const float* w, int64_t rows, int64_t n) {
    const size_t row_bytes = static_cast<size_t>(n / kernels::kQK8_0) * sizeof(kernels::BlockQ8_0);
    std::vector<uint8_t> q(static_cast<size_t>(rows) * row_bytes);
    for (int64_t r = 0; r < rows; ++r)
        kernels::quantize_row_q8_0(
            w + r * n, reinterpret_cast<kernels::BlockQ8_0*>(q.data() + r * row_bytes), n);
    return q;
}

// A decoder linear as Q8_0 (the packed f32 copy dropped).
Linear quantized(Linear l, const Ct2Model& f, const std::string& prefix, int64_t scaled_rows,
                 float scale) {
    if (l.in % kernels::kQK8_0 != 0) {
        throw FormatError(f.name() + ": '" + prefix + "/weight' rows of " + std::to_string(l.in) +
                          " values cannot be Q8_0 blocks of 32");
    }
    std::vector<float> w = f.to_f32(prefix + "/weight");
    for (int64_t i = 0; i < scaled_rows * l.in; ++i) w[static_cast<size_t>(i)] *= scale;
    l.q8 = to_q8(w.data(), l.out, l.in);
    l.wp = {};
    return l;
}

// A Conv1d weight (out, in, 3) as a linear over im2col rows of in * 3 values (c * 3 + k).
Linear conv(const Ct2Model& f, const std::string& prefix, int64_t out, int64_t in) {
    const std::string wname = prefix + "/weight";
    f.get(wname, Shape{u(out), u(in), 3});
    const std::vector<float> w = f.to_f32(wname);
    Linear l;
    l.in = in * 3;
    l.out = out;
    l.wp.resize(kernels::packed_size(out, l.in));
    kernels::pack_panels(w.data(), out, l.in, l.wp.data());
    l.b = vec(f, prefix + "/bias", out);
    return l;
}

Norm norm(const Ct2Model& f, const std::string& prefix, int64_t d) {
    return Norm{vec(f, prefix + "/gamma", d), vec(f, prefix + "/beta", d)};
}

// A flag of the spec that must have the value this implementation computes, when present.
void expect_flag(const Ct2Model& f, const std::string& name, int64_t want, const char* meaning) {
    if (!f.find(name)) return;
    const int64_t got = f.scalar_int(name);
    if (got != want) {
        throw FormatError(f.name() + ": variable '" + name + "' is " + std::to_string(got) +
                          "; Sightline's Whisper runs " + meaning + " (" + std::to_string(want) +
                          ")");
    }
}

std::vector<int> int_list(const JsonValue& root, const char* key, const std::string& origin) {
    std::vector<int> out;
    const JsonValue* v = root.find(key);
    if (!v) return out;
    if (!v->is_array()) throw FormatError(origin + ": '" + key + "' is not an array");
    for (const JsonValue& e : v->items()) {
        const auto n = e.is_number() ? e.as_u64() : std::nullopt;
        if (!n || *n > 1000000)
            throw FormatError(origin + ": '" + key + "' holds a non-token value");
        out.push_back(static_cast<int>(*n));
    }
    return out;
}

// Self-attention over n positions for every head: ctx (n, d) = softmax(Q K^T) V, with Q
// (already scaled by 1 / sqrt(hd) in its weights), K, V the column slices of qkv (n, 3d). One head
// per work item, as two GEMMs (K packed as the weight of the score product, V^T as the weight of
// the context product); each row's softmax is normalized after the second product. Not causal.
// Bidirectional attention of n positions, per head: K and V packed once, then the queries in
// blocks of kGemmTokenBlock rows, so a block's scores (96 x n floats: 576 KB at n = 1500) stay in
// the cache through the max, the exponentials and the P V product instead of a whole n x n
// matrix (9 MB) going to memory and back three times.
void self_attention(const float* qkv, int64_t n, int64_t d, int n_heads, float* ctx,
                    ThreadPool& pool) {
    const int64_t hd = d / n_heads;
    const int64_t stride = 3 * d;
    const int64_t rows = std::min<int64_t>(n, kernels::kGemmTokenBlock);
    pool.parallel_for(n_heads, [&](int64_t h0, int64_t h1, int) {
        std::vector<float> kp(kernels::packed_size(n, hd)), vp(kernels::packed_size(hd, n));
        std::vector<float> sc(static_cast<size_t>(rows * n)), inv(static_cast<size_t>(rows));
        for (int64_t h = h0; h < h1; ++h) {
            const float* Q = qkv + h * hd;
            const float* K = qkv + d + h * hd;
            const float* V = qkv + 2 * d + h * hd;
            kernels::pack_panels(K, stride, n, hd, kp.data());
            kernels::pack_panels_transposed(V, stride, n, hd, vp.data());
            for (int64_t i0 = 0; i0 < n; i0 += rows) {
                const int64_t m = std::min(rows, n - i0);
                kernels::gemm_f32(Q + i0 * stride, stride, m, hd, kp.data(), n, nullptr, sc.data(),
                                  n, 0, n);
                for (int64_t i = 0; i < m; ++i) {
                    float* row = sc.data() + i * n;
                    inv[static_cast<size_t>(i)] =
                        1.0f / kernels::exp_shifted_sum(row, n, kernels::max_f32(row, n));
                }
                float* out = ctx + i0 * d + h * hd;
                kernels::gemm_f32(sc.data(), n, m, n, vp.data(), hd, nullptr, out, d, 0, hd);
                for (int64_t i = 0; i < m; ++i)
                    for (int64_t j = 0; j < hd; ++j) out[i * d + j] *= inv[static_cast<size_t>(i)];
            }
        }
    });
}

void gelu_rows(float* x, int64_t n_rows, int64_t width, ThreadPool& pool) {
    pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1, int) {
        kernels::gelu_erf(x + r0 * width, (r1 - r0) * width);
    });
}

void add_rows(float* x, const float* y, int64_t n_rows, int64_t width, ThreadPool& pool) {
    pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1, int) {
        kernels::add(x + r0 * width, y + r0 * width, (r1 - r0) * width);
    });
}

}  // namespace

WhisperTokens WhisperTokens::for_vocab(int n_vocab) {
    WhisperTokens t;
    t.eot = n_vocab >= 51865 ? 50257 : 50256;
    t.sot = t.eot + 1;
    t.timestamp_begin = n_vocab - 1501;  // <|0.00|> .. <|30.00|>
    t.no_timestamps = t.timestamp_begin - 1;
    t.no_speech = t.timestamp_begin - 2;
    t.sot_prev = t.timestamp_begin - 3;
    t.sot_lm = t.timestamp_begin - 4;
    t.transcribe = t.timestamp_begin - 5;
    t.translate = t.timestamp_begin - 6;
    return t;
}

std::filesystem::path WhisperModel::default_dir() {
    return paths::cache_dir() / "models" / "whisper-tiny.en";
}

WhisperModel WhisperModel::open(const std::filesystem::path& dir,
                                const WhisperLoadOptions& options) {
    const Ct2Model file = Ct2Model::open(dir / "model.bin");
    const std::filesystem::path cfg = dir / "config.json";
    return from_ct2(file, std::filesystem::exists(cfg) ? cfg : std::filesystem::path(), options);
}

WhisperModel WhisperModel::from_ct2(const Ct2Model& f, const std::filesystem::path& config_json,
                                    const WhisperLoadOptions& options) {
    if (f.spec_name() != "WhisperSpec") {
        throw FormatError(f.name() + ": spec '" + std::string(f.spec_name()) +
                          "' is not a Whisper model (expected 'WhisperSpec')");
    }
    WhisperModel m;
    m.opt_ = options;
    WhisperConfig& c = m.cfg_;
    const Ct2Variable& conv1 = f.get("encoder/conv1/weight");
    if (conv1.shape.size() != 3 || conv1.shape[2] != 3)
        throw FormatError(f.name() + ": 'encoder/conv1/weight' is not a (d, n_mels, 3) kernel");
    c.d_model = static_cast<int>(conv1.shape[0]);
    c.n_mels = static_cast<int>(conv1.shape[1]);
    const Ct2Variable& apos = f.get("encoder/position_encodings/encodings");
    const Ct2Variable& emb = f.get("decoder/embeddings/weight");
    const Ct2Variable& tpos = f.get("decoder/position_encodings/encodings");
    if (apos.shape.size() != 2 || emb.shape.size() != 2 || tpos.shape.size() != 2)
        throw FormatError(f.name() + ": position or token embeddings are not matrices");
    c.n_audio_ctx = static_cast<int>(apos.shape[0]);
    c.n_vocab = static_cast<int>(emb.shape[0]);
    c.n_text_ctx = static_cast<int>(tpos.shape[0]);
    const Ct2Variable& up0 = f.get("encoder/layer_0/ffn/linear_0/weight");
    c.n_ffn = up0.shape.empty() ? 0 : static_cast<int>(up0.shape[0]);
    while (c.n_audio_layers < kMaxLayers &&
           f.find("encoder/layer_" + std::to_string(c.n_audio_layers) + "/ffn/linear_0/weight"))
        ++c.n_audio_layers;
    while (c.n_text_layers < kMaxLayers &&
           f.find("decoder/layer_" + std::to_string(c.n_text_layers) + "/ffn/linear_0/weight"))
        ++c.n_text_layers;
    c.n_audio_heads = static_cast<int>(f.scalar_int("encoder/num_heads"));
    c.n_text_heads = static_cast<int>(f.scalar_int("decoder/num_heads"));
    const int64_t d = c.d_model;
    if (d <= 0 || c.n_mels <= 0 || c.n_ffn <= 0 || c.n_audio_ctx <= 0 || c.n_text_ctx <= 0 ||
        c.n_vocab < 51864 || c.n_text_layers == 0 || c.n_audio_heads <= 0 || c.n_text_heads <= 0 ||
        d % c.n_audio_heads != 0 || d % c.n_text_heads != 0) {
        throw FormatError(f.name() + ": not a Whisper layout (d_model " + std::to_string(d) +
                          ", n_mels " + std::to_string(c.n_mels) + ", vocabulary " +
                          std::to_string(c.n_vocab) + ", heads " + std::to_string(c.n_audio_heads) +
                          "/" + std::to_string(c.n_text_heads) + ", decoder layers " +
                          std::to_string(c.n_text_layers) + ")");
    }
    expect_flag(f, "decoder/pre_norm", 1, "pre-norm layers");
    expect_flag(f, "decoder/activation", 3, "exact GELU");
    expect_flag(f, "decoder/alibi", 0, "no ALiBi");
    expect_flag(f, "decoder/scale_embeddings", 0, "unscaled embeddings");
    m.tok_ = WhisperTokens::for_vocab(c.n_vocab);

    // int8 only where the product has a vector tier: the reference tier would be slower than f32.
    const bool int8 = options.int8 && kernels::s8_gemm_fast();
    // The encoder's linears int8 with options.int8; the decoder's (and the projection) Q8_0 with
    // q8_decoder, else int8 with options.int8, else f32.
    const bool dint8 = int8 && !options.q8_decoder;
    m.enc_int8_ = int8;
    m.conv1_ = conv(f, "encoder/conv1", d, c.n_mels);
    m.conv2_ = conv(f, "encoder/conv2", d, d);
    f.get("encoder/position_encodings/encodings", Shape{u(c.n_audio_ctx), u(d)});
    m.audio_pos_ = f.to_f32("encoder/position_encodings/encodings");
    const float enc_scale = 1.0f / std::sqrt(static_cast<float>(d / c.n_audio_heads));
    const float dec_scale = 1.0f / std::sqrt(static_cast<float>(d / c.n_text_heads));
    for (int L = 0; L < c.n_audio_layers; ++L) {
        const std::string p = "encoder/layer_" + std::to_string(L);
        EncoderLayer l;
        l.ln_attn = norm(f, p + "/self_attention/layer_norm", d);
        l.qkv = linear(f, p + "/self_attention/linear_0", 3 * d, d, d, enc_scale, int8);
        l.out = linear(f, p + "/self_attention/linear_1", d, d, 0, 1.0f, int8);
        l.ln_ffn = norm(f, p + "/ffn/layer_norm", d);
        l.up = linear(f, p + "/ffn/linear_0", c.n_ffn, d, 0, 1.0f, int8);
        l.down = linear(f, p + "/ffn/linear_1", d, c.n_ffn, 0, 1.0f, int8);
        m.enc_layers_.push_back(std::move(l));
    }
    m.enc_ln_ = norm(f, "encoder/layer_norm", d);

    f.get("decoder/embeddings/weight", Shape{u(c.n_vocab), u(d)});
    m.tok_emb_ = f.to_f32("decoder/embeddings/weight");
    if (dint8) {
        m.tok_emb_s8_ = kernels::quantize_weights(m.tok_emb_.data(), d, c.n_vocab, d);
        // The input embeddings as the int8 rows say (CTranslate2 looks them up from the same
        // int8 table), so the tied input and output see one set of weights.
        for (int64_t v = 0; v < c.n_vocab; ++v)
            for (int64_t k = 0; k < d; ++k)
                m.tok_emb_[static_cast<size_t>(v * d + k)] = kernels::s8_weight(m.tok_emb_s8_, v, k);
    } else if (options.q8_decoder) {
        if (d % kernels::kQK8_0 != 0)
            throw FormatError(f.name() + ": d_model " + std::to_string(d) +
                              " is not a multiple of 32 (Q8_0)");
        m.tok_emb_q8_ = to_q8(m.tok_emb_.data(), c.n_vocab, d);
    }
    if (const Ct2Variable* proj = f.find("decoder/projection/weight"); proj && proj != &emb) {
        throw FormatError(f.name() +
                          ": 'decoder/projection/weight' is not tied to the embeddings "
                          "(Sightline's Whisper expects the tied output projection)");
    }
    f.get("decoder/position_encodings/encodings", Shape{u(c.n_text_ctx), u(d)});
    m.text_pos_ = f.to_f32("decoder/position_encodings/encodings");
    for (int L = 0; L < c.n_text_layers; ++L) {
        const std::string p = "decoder/layer_" + std::to_string(L);
        DecoderLayer l;
        // Per-token linears (int8 or Q8_0 when asked); cross_kv runs once per window over 1500
        // rows and is int8 with the rest, f32 otherwise.
        auto per_token = [&](const std::string& name, int64_t out_dim, int64_t in_dim,
                             int64_t scaled_rows = 0) {
            Linear l0 = linear(f, p + name, out_dim, in_dim, scaled_rows, dec_scale, dint8);
            return options.q8_decoder
                       ? quantized(std::move(l0), f, p + name, scaled_rows, dec_scale)
                       : l0;
        };
        l.ln_self = norm(f, p + "/self_attention/layer_norm", d);
        l.self_qkv = per_token("/self_attention/linear_0", 3 * d, d, d);
        l.self_out = per_token("/self_attention/linear_1", d, d);
        l.ln_cross = norm(f, p + "/attention/layer_norm", d);
        l.cross_q = per_token("/attention/linear_0", d, d, d);
        l.cross_kv = linear(f, p + "/attention/linear_1", 2 * d, d, 0, 1.0f, dint8);
        l.cross_out = per_token("/attention/linear_2", d, d);
        l.ln_ffn = norm(f, p + "/ffn/layer_norm", d);
        l.up = per_token("/ffn/linear_0", c.n_ffn, d);
        l.down = per_token("/ffn/linear_1", d, c.n_ffn);
        m.dec_layers_.push_back(std::move(l));
    }
    m.dec_ln_ = norm(f, "decoder/layer_norm", d);

    m.suppress_ids_begin_ = {220, m.tok_.eot};
    for (int L = c.n_text_layers / 2; L < c.n_text_layers; ++L)
        for (int h = 0; h < c.n_text_heads; ++h) m.alignment_heads_.emplace_back(L, h);
    if (!config_json.empty()) {
        const JsonValue root = JsonValue::parse_file(config_json);
        const std::string origin = config_json.string();
        m.suppress_ids_ = int_list(root, "suppress_ids", origin);
        if (root.find("suppress_ids_begin"))
            m.suppress_ids_begin_ = int_list(root, "suppress_ids_begin", origin);
        m.lang_ids_ = int_list(root, "lang_ids", origin);
        if (const JsonValue* heads = root.find("alignment_heads")) {
            m.alignment_heads_.clear();
            if (!heads->is_array())
                throw FormatError(origin + ": 'alignment_heads' is not an array");
            for (const JsonValue& h : heads->items()) {
                const auto l = h.is_array() && h.items().size() == 2 && h.items()[0].is_number()
                                   ? h.items()[0].as_u64()
                                   : std::nullopt;
                const auto k = l ? h.items()[1].as_u64() : std::nullopt;
                if (!l || !k || *l >= static_cast<uint64_t>(c.n_text_layers) ||
                    *k >= static_cast<uint64_t>(c.n_text_heads))
                    throw FormatError(origin +
                                      ": 'alignment_heads' holds a pair that is not a (layer, "
                                      "head) of the decoder");
                m.alignment_heads_.emplace_back(static_cast<int>(*l), static_cast<int>(*k));
            }
        }
        if (!c.multilingual()) m.lang_ids_.clear();
        for (const int id : m.lang_ids_)
            if (id <= m.tok_.sot || id >= m.tok_.translate)
                throw FormatError(origin + ": lang_ids holds " + std::to_string(id) +
                                  ", not a language token");
        for (const int id : m.suppress_ids_)
            if (id >= c.n_vocab)
                throw FormatError(origin + ": suppress_ids holds token " + std::to_string(id) +
                                  " beyond the vocabulary");
        for (const int id : m.suppress_ids_begin_)
            if (id >= c.n_vocab)
                throw FormatError(origin + ": suppress_ids_begin holds token " +
                                  std::to_string(id) + " beyond the vocabulary");
    }
    return m;
}

void WhisperModel::apply(const Linear& l, const float* x, int64_t n_tokens, float* y,
                         ThreadPool& pool) {
    if (!l.s8.empty()) {
        // int8: each token's activations quantized once (rows spread over the pool), then the
        // columns split across the pool in whole panels.
        const int64_t row_bytes = kernels::s8_row_bytes(l.in);
        std::vector<uint8_t> xq(static_cast<size_t>(row_bytes * n_tokens));
        std::vector<float> xs(static_cast<size_t>(n_tokens));
        pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
            kernels::quantize_tokens(x + t0 * l.in, l.in, t1 - t0, l.in, xq.data() + t0 * row_bytes,
                                     xs.data() + t0);
        });
        pool.parallel_for(
            l.out,
            [&](int64_t c0, int64_t c1, int) {
                kernels::gemm_s8(xq.data(), xs.data(), n_tokens, l.s8, l.b.data(), y, l.out, c0,
                                 c1);
            },
            kernels::kS8Panel);
        return;
    }
    if (!l.q8.empty()) {
        // Q8_0: activations quantized once, weight rows spread over the pool (multiples of 16).
        const size_t row_bytes = kernels::activation_row_bytes(kernels::TensorType::Q8_0, l.in);
        std::vector<uint8_t> xq(row_bytes * static_cast<size_t>(n_tokens));
        kernels::quantize_activations(kernels::TensorType::Q8_0, x, n_tokens, l.in, xq.data());
        pool.parallel_for(
            l.out,
            [&](int64_t r0, int64_t r1, int) {
                kernels::matmul_rows(kernels::TensorType::Q8_0, l.q8.data(), l.in, xq.data(),
                                     n_tokens, y, l.out, r0, r1);
                for (int64_t t = 0; t < n_tokens; ++t)
                    for (int64_t r = r0; r < r1; ++r)
                        y[t * l.out + r] += l.b[static_cast<size_t>(r)];
            },
            16);
        return;
    }
    // Columns split across the pool in whole panels (kernels::kGemmPanel = 32 columns).
    pool.parallel_for(
        l.out,
        [&](int64_t c0, int64_t c1, int) {
            kernels::gemm_f32(x, l.in, n_tokens, l.in, l.wp.data(), l.out, l.b.data(), y, l.out, c0,
                              c1);
        },
        kernels::kGemmPanel);
}

void WhisperModel::layer_norm(float* x, int64_t n_tokens, int64_t d, const Norm& n,
                              ThreadPool& pool) {
    pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* r = x + t * d;
            double mean = 0.0;
            for (int64_t i = 0; i < d; ++i) mean += r[i];
            mean /= static_cast<double>(d);
            double var = 0.0;
            for (int64_t i = 0; i < d; ++i) var += (r[i] - mean) * (r[i] - mean);
            var /= static_cast<double>(d);
            const auto mu = static_cast<float>(mean);
            const auto inv = static_cast<float>(1.0 / std::sqrt(var + kLnEps));
            for (int64_t i = 0; i < d; ++i)
                r[i] = (r[i] - mu) * inv * n.gamma[static_cast<size_t>(i)] +
                       n.beta[static_cast<size_t>(i)];
        }
    });
}

void WhisperModel::encode(const LogMel& mel, std::vector<float>& out, ThreadPool& pool) const {
    const int64_t n_in = 2 * static_cast<int64_t>(cfg_.n_audio_ctx);
    if (mel.n_mels != cfg_.n_mels || mel.n_frames != n_in ||
        mel.data.size() != static_cast<size_t>(mel.n_mels) * static_cast<size_t>(mel.n_frames)) {
        throw Error("Whisper encoder: features of " + std::to_string(mel.n_mels) + " mels x " +
                    std::to_string(mel.n_frames) + " frames; the model takes " +
                    std::to_string(cfg_.n_mels) + " x " + std::to_string(n_in) +
                    " (pad or cut to 30 s)");
    }
    const int64_t d = cfg_.d_model, n = cfg_.n_audio_ctx, C = cfg_.n_mels;

    // conv1 (kernel 3, padding 1, stride 1) as a GEMM over im2col rows: col[t][c*3+k] =
    // mel[c][t+k-1], zero outside.
    std::vector<float> col(static_cast<size_t>(n_in * C * 3));
    pool.parallel_for(n_in, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t c = 0; c < C; ++c)
                for (int64_t k = 0; k < 3; ++k) {
                    const int64_t s = t + k - 1;
                    col[static_cast<size_t>((t * C + c) * 3 + k)] =
                        s >= 0 && s < n_in ? mel.data[static_cast<size_t>(c * n_in + s)] : 0.0f;
                }
    });
    std::vector<float> h1(static_cast<size_t>(n_in * d));  // (n_in, d)
    apply(conv1_, col.data(), n_in, h1.data(), pool);
    gelu_rows(h1.data(), n_in, d, pool);

    // conv2 (kernel 3, padding 1, stride 2): col[t][c*3+k] = h1[2t+k-1][c].
    col.assign(static_cast<size_t>(n * d * 3), 0.0f);
    pool.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t k = 0; k < 3; ++k) {
                const int64_t s = 2 * t + k - 1;
                if (s < 0 || s >= n_in) continue;
                const float* src = h1.data() + s * d;
                float* dst = col.data() + t * d * 3 + k;
                for (int64_t c = 0; c < d; ++c) dst[c * 3] = src[c];
            }
    });
    out.assign(static_cast<size_t>(n * d), 0.0f);
    float* x = out.data();
    apply(conv2_, col.data(), n, x, pool);
    gelu_rows(x, n, d, pool);
    add_rows(x, audio_pos_.data(), n, d, pool);

    std::vector<float> h(static_cast<size_t>(n * d)), tmp(static_cast<size_t>(n * d));
    std::vector<float> big(static_cast<size_t>(n) *
                           static_cast<size_t>(std::max<int64_t>(3 * d, cfg_.n_ffn)));
    for (const EncoderLayer& L : enc_layers_) {
        std::copy(out.begin(), out.end(), h.begin());
        layer_norm(h.data(), n, d, L.ln_attn, pool);
        apply(L.qkv, h.data(), n, big.data(), pool);  // (n, 3d)
        self_attention(big.data(), n, d, cfg_.n_audio_heads, h.data(), pool);
        apply(L.out, h.data(), n, tmp.data(), pool);
        add_rows(x, tmp.data(), n, d, pool);

        std::copy(out.begin(), out.end(), h.begin());
        layer_norm(h.data(), n, d, L.ln_ffn, pool);
        apply(L.up, h.data(), n, big.data(), pool);  // (n, n_ffn)
        gelu_rows(big.data(), n, cfg_.n_ffn, pool);
        apply(L.down, big.data(), n, tmp.data(), pool);
        add_rows(x, tmp.data(), n, d, pool);
    }
    layer_norm(x, n, d, enc_ln_, pool);
}

}  // namespace sl::whisper
