#include "core/embed/bert_encoder.h"

#include <algorithm>
#include <cmath>

#include "core/embed/json.h"
#include "core/runtime/linear.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

using kernels::TensorType;

int get_int(const JsonValue& root, const char* key, const std::string& file, int lo, int hi) {
    const JsonValue* v = root.find(key);
    const auto u = v ? v->as_u64() : std::nullopt;
    if (!u) throw FormatError(file + ": '" + key + "' is missing or not a non-negative integer");
    if (*u < static_cast<uint64_t>(lo) || *u > static_cast<uint64_t>(hi))
        throw FormatError(file + ": '" + key + "' = " + std::to_string(*u) + " is outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(*u);
}

}  // namespace

BertConfig BertConfig::from_json_file(const std::filesystem::path& path) {
    const std::string file = path.string();
    const JsonValue root = JsonValue::parse_file(path);
    if (!root.is_object()) throw FormatError(file + ": not a JSON object");
    auto str = [&](const char* key, const char* fallback) -> std::string {
        const JsonValue* v = root.find(key);
        if (!v) return fallback;
        if (!v->is_string()) throw FormatError(file + ": '" + key + "' is not a string");
        return v->text();
    };
    if (const std::string t = str("model_type", "bert"); t != "bert")
        throw FormatError(file + ": model_type '" + t + "' is not bert");
    if (const std::string a = str("hidden_act", "gelu"); a != "gelu")
        throw FormatError(file + ": hidden_act '" + a +
                          "' is not supported (only gelu, the erf form)");
    if (const std::string p = str("position_embedding_type", "absolute"); p != "absolute")
        throw FormatError(file + ": position_embedding_type '" + p +
                          "' is not supported (only absolute)");
    BertConfig c;
    c.vocab_size = get_int(root, "vocab_size", file, 1, 1 << 20);
    c.hidden = get_int(root, "hidden_size", file, 1, 8192);
    c.n_layers = get_int(root, "num_hidden_layers", file, 1, 128);
    c.n_heads = get_int(root, "num_attention_heads", file, 1, 256);
    c.intermediate = get_int(root, "intermediate_size", file, 1, 65536);
    c.max_positions = get_int(root, "max_position_embeddings", file, 1, 65536);
    c.type_vocab = get_int(root, "type_vocab_size", file, 1, 1024);
    if (c.hidden % c.n_heads != 0)
        throw FormatError(file + ": hidden_size " + std::to_string(c.hidden) +
                          " is not a multiple of " + "num_attention_heads " +
                          std::to_string(c.n_heads));
    if (const JsonValue* e = root.find("layer_norm_eps")) {
        if (!e->is_number() || !(e->as_double() > 0.0) || e->as_double() > 1.0)
            throw FormatError(file + ": layer_norm_eps is not a number in (0, 1]");
        c.ln_eps = static_cast<float>(e->as_double());
    }
    return c;
}

BertEncoder::BertEncoder(const SafetensorsFile& file, const BertConfig& config)
    : file_(file), cfg_(config) {
    if (!file.find("embeddings.word_embeddings.weight") &&
        file.find("bert.embeddings.word_embeddings.weight"))
        prefix_ = "bert.";
    const int64_t h = cfg_.hidden;
    word_ = matrix("embeddings.word_embeddings.weight", cfg_.vocab_size, h);
    pos_ = matrix("embeddings.position_embeddings.weight", cfg_.max_positions, h);
    type_ = matrix("embeddings.token_type_embeddings.weight", cfg_.type_vocab, h);
    ln_embed_ = norm("embeddings.LayerNorm", h);
    for (int l = 0; l < cfg_.n_layers; ++l) {
        const std::string p = "encoder.layer." + std::to_string(l) + ".";
        Layer L;
        L.q = linear(p + "attention.self.query", h, h);
        L.k = linear(p + "attention.self.key", h, h);
        L.v = linear(p + "attention.self.value", h, h);
        L.o = linear(p + "attention.output.dense", h, h);
        L.ln_attn = norm(p + "attention.output.LayerNorm", h);
        L.up = linear(p + "intermediate.dense", cfg_.intermediate, h);
        L.down = linear(p + "output.dense", h, cfg_.intermediate);
        L.ln_ffn = norm(p + "output.LayerNorm", h);
        layers_.push_back(std::move(L));
    }
}

TensorView BertEncoder::matrix(const std::string& name, int64_t rows, int64_t cols) {
    const SafetensorsTensor& t = file_.get(prefix_ + name);
    const std::string what = file_.origin() + ": tensor '" + t.name + "'";
    if (t.shape.size() != 2 || t.shape[0] != static_cast<uint64_t>(rows) ||
        t.shape[1] != static_cast<uint64_t>(cols))
        throw FormatError(what + " has shape of " + std::to_string(t.shape.size()) +
                          " dims, expected [" + std::to_string(rows) + ", " + std::to_string(cols) +
                          "] from config.json");
    TensorView v;
    v.ne0 = cols;
    v.ne1 = rows;
    const auto addr = reinterpret_cast<uintptr_t>(t.data);
    if (t.dtype == SafetensorsDtype::F32 && addr % 4 == 0) {
        v.type = TensorType::F32;
        v.data = t.data;
    } else if ((t.dtype == SafetensorsDtype::F16 || t.dtype == SafetensorsDtype::BF16) &&
               addr % 2 == 0) {
        v.type = t.dtype == SafetensorsDtype::F16 ? TensorType::F16 : TensorType::BF16;
        v.data = t.data;
    } else {
        owned_.push_back(file_.to_f32(t));  // throws for other dtypes, naming the tensor
        v.type = TensorType::F32;
        v.data = owned_.back().data();
    }
    return v;
}

std::vector<float> BertEncoder::vector(const std::string& name, int64_t n) {
    const SafetensorsTensor& t = file_.get(prefix_ + name);
    if (t.shape.size() != 1 || t.shape[0] != static_cast<uint64_t>(n))
        throw FormatError(file_.origin() + ": tensor '" + t.name + "' is not a vector of " +
                          std::to_string(n));
    return file_.to_f32(t);
}

BertEncoder::Linear BertEncoder::linear(const std::string& prefix, int64_t out, int64_t in) {
    const SafetensorsTensor& t = file_.get(prefix_ + prefix + ".weight");
    if (t.shape.size() != 2 || t.shape[0] != static_cast<uint64_t>(out) ||
        t.shape[1] != static_cast<uint64_t>(in))
        throw FormatError(file_.origin() + ": tensor '" + t.name + "' has shape of " +
                          std::to_string(t.shape.size()) + " dims, expected [" +
                          std::to_string(out) + ", " + std::to_string(in) + "] from config.json");
    Linear l;
    l.in = in;
    l.out = out;
    const std::vector<float> w = file_.to_f32(t);  // throws for non-float dtypes, naming the tensor
    l.wp.resize(kernels::packed_size(out, in));
    kernels::pack_panels(w.data(), out, in, l.wp.data());
    l.b = vector(prefix + ".bias", out);
    return l;
}

BertEncoder::Norm BertEncoder::norm(const std::string& prefix, int64_t n) {
    return Norm{vector(prefix + ".weight", n), vector(prefix + ".bias", n)};
}

void BertEncoder::apply_linear(const Linear& l, const float* x, int n_tokens, float* y,
                               ThreadPool& pool) const {
    // Columns split across the pool in whole panels (kernels::kGemmPanel = 32 columns).
    pool.parallel_for(
        l.out,
        [&](int64_t c0, int64_t c1, int) {
            kernels::gemm_f32(x, l.in, n_tokens, l.in, l.wp.data(), l.out, l.b.data(), y, l.out, c0,
                              c1);
        },
        kernels::kGemmPanel);
}

void BertEncoder::layer_norm(float* x, int n_tokens, const Norm& n, ThreadPool& pool) const {
    const int64_t d = cfg_.hidden;
    const float eps = cfg_.ln_eps;
    pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* r = x + t * d;
            double mean = 0.0;
            for (int64_t i = 0; i < d; ++i) mean += r[i];
            mean /= static_cast<double>(d);
            double var = 0.0;
            for (int64_t i = 0; i < d; ++i) var += (r[i] - mean) * (r[i] - mean);
            var /= static_cast<double>(d);
            const auto m = static_cast<float>(mean);
            const auto inv = static_cast<float>(1.0 / std::sqrt(var + eps));
            for (int64_t i = 0; i < d; ++i)
                r[i] = (r[i] - m) * inv * n.w[static_cast<size_t>(i)] + n.b[static_cast<size_t>(i)];
        }
    });
}

void BertEncoder::forward(std::span<const std::vector<int32_t>> seqs, std::vector<float>& out,
                          ThreadPool& pool, BertScratch& s) const {
    const int64_t d = cfg_.hidden;
    std::vector<int64_t> start{0};  // token offset of each sequence
    for (const auto& seq : seqs) {
        if (seq.empty() || seq.size() > static_cast<size_t>(cfg_.max_positions))
            throw Error("BertEncoder: a sequence of " + std::to_string(seq.size()) +
                        " tokens (allowed 1.." + std::to_string(cfg_.max_positions) + ")");
        for (const int32_t id : seq)
            if (id < 0 || id >= cfg_.vocab_size)
                throw Error("BertEncoder: token id " + std::to_string(id) +
                            " is outside the vocabulary of " + std::to_string(cfg_.vocab_size));
        start.push_back(start.back() + static_cast<int64_t>(seq.size()));
    }
    const int64_t T = start.back();
    const auto n_tok = static_cast<int>(T);
    const auto sz = static_cast<size_t>(T * d);
    out.resize(sz);
    s.q.resize(sz);
    s.k.resize(sz);
    s.v.resize(sz);
    s.ctx.resize(sz);
    s.tmp.resize(sz);
    s.ffn.resize(static_cast<size_t>(T * cfg_.intermediate));
    float* x = out.data();

    // Embeddings: word + position + token type 0, then LayerNorm.
    std::vector<std::pair<int32_t, int32_t>> tok(static_cast<size_t>(T));  // (id, position)
    for (size_t q = 0; q < seqs.size(); ++q)
        for (size_t i = 0; i < seqs[q].size(); ++i)
            tok[static_cast<size_t>(start[q]) + i] = {seqs[q][i], static_cast<int32_t>(i)};
    pool.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
        std::vector<float> row(static_cast<size_t>(d));
        for (int64_t t = t0; t < t1; ++t) {
            float* r = x + t * d;
            embed_row(word_, tok[static_cast<size_t>(t)].first, r);
            embed_row(pos_, tok[static_cast<size_t>(t)].second, row.data());
            kernels::add(r, row.data(), d);
            embed_row(type_, 0, row.data());
            kernels::add(r, row.data(), d);
        }
    });
    layer_norm(x, n_tok, ln_embed_, pool);

    const int H = cfg_.n_heads;
    const int hd = cfg_.head_dim();
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t n_seq = static_cast<int64_t>(seqs.size());
    for (const Layer& L : layers_) {
        apply_linear(L.q, x, n_tok, s.q.data(), pool);
        apply_linear(L.k, x, n_tok, s.k.data(), pool);
        apply_linear(L.v, x, n_tok, s.v.data(), pool);
        // Attention, one (sequence, head) pair per work item, as two small GEMMs:
        // S (n, n) = Q_h K_h^T (K_h packed as the weight), softmax(scale S) row by row, then
        // ctx_h (n, hd) = P V_h (V_h packed as the weight of a (hd, n) product).
        pool.parallel_for(n_seq * H, [&](int64_t w0, int64_t w1, int) {
            std::vector<float> kp, vp, sc;  // per worker, reused across items
            for (int64_t w = w0; w < w1; ++w) {
                const int64_t q = w / H, h = w % H;
                const int64_t t0 = start[static_cast<size_t>(q)];
                const int64_t n = start[static_cast<size_t>(q) + 1] - t0;
                const float* Q = s.q.data() + t0 * d + h * hd;
                const float* K = s.k.data() + t0 * d + h * hd;
                const float* V = s.v.data() + t0 * d + h * hd;
                kp.resize(kernels::packed_size(n, hd));
                kernels::pack_panels(K, d, n, hd, kp.data());  // weight (n keys, hd)
                vp.resize(kernels::packed_size(hd, n));
                kernels::pack_panels_transposed(V, d, n, hd, vp.data());  // weight V^T (hd, n keys)
                sc.resize(static_cast<size_t>(n * n));
                kernels::gemm_f32(Q, d, n, hd, kp.data(), n, nullptr, sc.data(), n, 0, n);
                for (int64_t i = 0; i < n; ++i) {
                    float* row = sc.data() + i * n;
                    for (int64_t j = 0; j < n; ++j) row[j] *= scale;
                    kernels::softmax(row, n);
                }
                kernels::gemm_f32(sc.data(), n, n, n, vp.data(), hd, nullptr,
                                  s.ctx.data() + t0 * d + h * hd, d, 0, hd);
            }
        });
        apply_linear(L.o, s.ctx.data(), n_tok, s.tmp.data(), pool);
        pool.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
            kernels::add(x + t0 * d, s.tmp.data() + t0 * d, (t1 - t0) * d);
        });
        layer_norm(x, n_tok, L.ln_attn, pool);

        apply_linear(L.up, x, n_tok, s.ffn.data(), pool);
        const int64_t F = cfg_.intermediate;
        pool.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
            kernels::gelu_erf(s.ffn.data() + t0 * F, (t1 - t0) * F);
        });
        apply_linear(L.down, s.ffn.data(), n_tok, s.tmp.data(), pool);
        pool.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
            kernels::add(x + t0 * d, s.tmp.data() + t0 * d, (t1 - t0) * d);
        });
        layer_norm(x, n_tok, L.ln_ffn, pool);
    }
}

}  // namespace sl
