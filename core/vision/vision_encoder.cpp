#include "core/vision/vision_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/runtime/linear.h"
#include "core/runtime/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Y (n, W.ne1) = X @ W^T + b.
void linear_bias(const TensorView& W, const std::vector<float>& b, const float* X, int n, float* Y, ThreadPool& pool,
                 std::vector<uint8_t>& quant) {
    linear(W, X, n, Y, pool, quant);
    if (b.empty()) return;
    const int64_t d = W.ne1;
    pool.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) kernels::add(Y + t * d, b.data(), d);
    });
}

void layer_norm_rows(float* out, const float* x, const std::vector<float>& w, const std::vector<float>& b, int n,
                     int64_t d, float eps, ThreadPool& pool) {
    pool.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) layer_norm(out + t * d, x + t * d, w.data(), b.data(), d, eps);
    });
}

}  // namespace

void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[i];
    mean /= static_cast<double>(n);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = x[i] - mean;
        var += d * d;
    }
    var /= static_cast<double>(n);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * w[i] + b[i];
}

void gelu_tanh(float* x, int64_t n) {
    constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        x[i] = 0.5f * v * (1.0f + std::tanh(kC * (v + 0.044715f * v * v * v)));
    }
}

void pixel_shuffle(const float* x, int g, int D, int s, float* out) {
    const int go = g / s;
    const size_t width = sz(D) * sz(s) * sz(s);
    for (int i = 0; i < go; ++i)
        for (int j = 0; j < go; ++j) {
            float* o = out + (sz(i) * sz(go) + sz(j)) * width;
            for (int a = 0; a < s; ++a)
                for (int b = 0; b < s; ++b) {
                    const float* src = x + (sz(i * s + a) * sz(g) + sz(j * s + b)) * sz(D);
                    std::memcpy(o + (sz(a) * sz(s) + sz(b)) * sz(D), src, sz(D) * sizeof(float));
                }
        }
}

void average_pool(const float* x, int g, int D, int k, float* out) {
    const int go = g / k;
    const float inv = 1.0f / static_cast<float>(k * k);
    for (int i = 0; i < go; ++i)
        for (int j = 0; j < go; ++j) {
            float* o = out + (sz(i) * sz(go) + sz(j)) * sz(D);
            std::fill(o, o + D, 0.0f);
            for (int a = 0; a < k; ++a)
                for (int b = 0; b < k; ++b) kernels::add(o, x + (sz(i * k + a) * sz(g) + sz(j * k + b)) * sz(D), D);
            for (int d = 0; d < D; ++d) o[d] *= inv;
        }
}

VisionEncoder::VisionEncoder(const VisionModel& model, ThreadPool& pool, VisionEncoderOptions options)
    : model_(model), pool_(pool), options_(options) {}

void VisionEncoder::attention_gemm(int n) {
    const VisionConfig& c = model_.config;
    const int D = c.n_embd, H = c.n_head, hd = c.head_dim();
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    constexpr int kRows = 32;  // queries per work item
    const int row_blocks = (n + kRows - 1) / kRows;
    // Per-head contiguous K_h (n, hd) and V_h^T (hd, n).
    kh_.resize(sz(H) * sz(n) * sz(hd));
    vt_.resize(kh_.size());
    pool_.parallel_for(H, [&](int64_t h0, int64_t h1, int) {
        for (int64_t h = h0; h < h1; ++h) {
            float* kd = kh_.data() + sz(h) * sz(n) * sz(hd);
            float* vd = vt_.data() + sz(h) * sz(n) * sz(hd);
            for (int j = 0; j < n; ++j) {
                const float* ks = k_.data() + sz(j) * sz(D) + sz(h) * sz(hd);
                const float* vs = v_.data() + sz(j) * sz(D) + sz(h) * sz(hd);
                std::memcpy(kd + sz(j) * sz(hd), ks, sz(hd) * sizeof(float));
                for (int e = 0; e < hd; ++e) vd[sz(e) * sz(n) + sz(j)] = vs[e];
            }
        }
    });
    // Per thread: scores (kRows, n), the query block (kRows, hd) and its output (kRows, hd).
    const size_t per_thread = sz(kRows) * sz(n) + 2 * sz(kRows) * sz(hd);
    scores_.resize(sz(pool_.size()) * per_thread);
    pool_.parallel_for(int64_t{H} * row_blocks, [&](int64_t w0, int64_t w1, int thread) {
        float* s = scores_.data() + sz(thread) * per_thread;
        float* qb = s + sz(kRows) * sz(n);
        float* ob = qb + sz(kRows) * sz(hd);
        for (int64_t w = w0; w < w1; ++w) {
            const int h = static_cast<int>(w / row_blocks);
            const int r0 = static_cast<int>(w % row_blocks) * kRows, m = std::min(n, r0 + kRows) - r0;
            for (int i = 0; i < m; ++i)
                std::memcpy(qb + sz(i) * sz(hd), q_.data() + sz(r0 + i) * sz(D) + sz(h) * sz(hd), sz(hd) * sizeof(float));
            const float* kd = kh_.data() + sz(h) * sz(n) * sz(hd);
            const float* vd = vt_.data() + sz(h) * sz(n) * sz(hd);
            kernels::matmul_rows(kernels::TensorType::F32, kd, hd, qb, m, s, n, 0, n);
            for (int i = 0; i < m; ++i) {
                float* p = s + sz(i) * sz(n);
                for (int j = 0; j < n; ++j) p[j] *= scale;
                const float mx = kernels::max_f32(p, n);
                const float inv = 1.0f / kernels::exp_shifted_sum(p, n, mx);
                for (int j = 0; j < n; ++j) p[j] *= inv;
            }
            kernels::matmul_rows(kernels::TensorType::F32, vd, n, s, m, ob, hd, 0, hd);
            for (int i = 0; i < m; ++i)
                std::memcpy(att_.data() + sz(r0 + i) * sz(D) + sz(h) * sz(hd), ob + sz(i) * sz(hd), sz(hd) * sizeof(float));
        }
    });
}

void VisionEncoder::attention_rows(int n) {
    const VisionConfig& c = model_.config;
    const int D = c.n_embd, H = c.n_head, hd = c.head_dim();
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    constexpr int kRows = 16;  // query rows per work item
    const int row_blocks = (n + kRows - 1) / kRows;
    scores_.resize(sz(pool_.size()) * sz(n));
    std::fill(att_.begin(), att_.begin() + static_cast<std::ptrdiff_t>(sz(n) * sz(D)), 0.0f);
    pool_.parallel_for(int64_t{H} * row_blocks, [&](int64_t w0, int64_t w1, int thread) {
        float* p = scores_.data() + sz(thread) * sz(n);
        for (int64_t w = w0; w < w1; ++w) {
            const int h = static_cast<int>(w / row_blocks);
            const int r0 = static_cast<int>(w % row_blocks) * kRows, r1 = std::min(n, r0 + kRows);
            for (int r = r0; r < r1; ++r) {
                const float* q = q_.data() + sz(r) * sz(D) + sz(h) * sz(hd);
                kernels::dot_rows_f32(p, q, k_.data() + sz(h) * sz(hd), D, n, hd, scale);
                const float mx = kernels::max_f32(p, n);
                const float sum = kernels::exp_shifted_sum(p, n, mx);
                const float inv = 1.0f / sum;
                for (int j = 0; j < n; ++j) p[j] *= inv;
                kernels::accumulate_rows_f32(att_.data() + sz(r) * sz(D) + sz(h) * sz(hd), p,
                                             v_.data() + sz(h) * sz(hd), D, n, hd);
            }
        }
    });
}

void VisionEncoder::run_vit(const float* pixels) {
    const VisionConfig& c = model_.config;
    const VisionWeights& w = model_.weights;
    const int S = c.image_size, P = c.patch_size, g = c.grid(), N = c.n_patches(), D = c.n_embd, F = c.n_ff;
    const size_t pd = 3 * sz(P) * sz(P);
    patches_.resize(sz(N) * pd);
    x_.resize(sz(N) * sz(D));
    h_.resize(x_.size());
    q_.resize(x_.size());
    k_.resize(x_.size());
    v_.resize(x_.size());
    att_.resize(x_.size());
    ff_.resize(sz(N) * sz(F));

    // Patches, flattened (c, ky, kx) as the conv kernel's rows are.
    pool_.parallel_for(N, [&](int64_t p0, int64_t p1, int) {
        for (int64_t pi = p0; pi < p1; ++pi) {
            const int py = static_cast<int>(pi / g), px = static_cast<int>(pi % g);
            float* dst = patches_.data() + sz(pi) * pd;
            for (int ch = 0; ch < 3; ++ch)
                for (int ky = 0; ky < P; ++ky) {
                    const float* src = pixels + (sz(ch) * sz(S) + sz(py * P + ky)) * sz(S) + sz(px * P);
                    std::memcpy(dst + (sz(ch) * sz(P) + sz(ky)) * sz(P), src, sz(P) * sizeof(float));
                }
        }
    });
    linear_bias(w.patch_embd, w.patch_bias, patches_.data(), N, x_.data(), pool_, quant_);
    kernels::add(x_.data(), w.pos_embd.data(), int64_t{N} * D);

    for (const VisionLayer& L : w.layers) {
        layer_norm_rows(h_.data(), x_.data(), L.ln1_w, L.ln1_b, N, D, c.eps, pool_);
        linear_bias(L.wq, L.bq, h_.data(), N, q_.data(), pool_, quant_);
        linear_bias(L.wk, L.bk, h_.data(), N, k_.data(), pool_, quant_);
        linear_bias(L.wv, L.bv, h_.data(), N, v_.data(), pool_, quant_);
        if (options_.gemm_attention)
            attention_gemm(N);
        else
            attention_rows(N);
        linear_bias(L.wo, L.bo, att_.data(), N, h_.data(), pool_, quant_);
        kernels::add(x_.data(), h_.data(), int64_t{N} * D);

        layer_norm_rows(h_.data(), x_.data(), L.ln2_w, L.ln2_b, N, D, c.eps, pool_);
        linear_bias(L.up, L.b_up, h_.data(), N, ff_.data(), pool_, quant_);
        pool_.parallel_for(N, [&](int64_t t0, int64_t t1, int) {
            gelu_tanh(ff_.data() + sz(t0) * sz(F), (t1 - t0) * F);
        });
        linear_bias(L.down, L.b_down, ff_.data(), N, h_.data(), pool_, quant_);
        kernels::add(x_.data(), h_.data(), int64_t{N} * D);
    }
    layer_norm_rows(x_.data(), x_.data(), w.post_ln_w, w.post_ln_b, N, D, c.eps, pool_);
}

void VisionEncoder::features(const float* pixels, float* out) {
    run_vit(pixels);
    std::memcpy(out, x_.data(), x_.size() * sizeof(float));
}

void VisionEncoder::encode_tile(const float* pixels, float* out) {
    const VisionConfig& c = model_.config;
    run_vit(pixels);
    const int s = c.scale_factor;
    const int T = c.tokens_per_tile();
    merged_.resize(sz(T) * sz(c.merged_width()));
    if (c.gemma3()) {
        average_pool(x_.data(), c.grid(), c.n_embd, s, merged_.data());
        const float* norm = model_.weights.soft_norm.data();
        pool_.parallel_for(T, [&](int64_t t0, int64_t t1, int) {
            for (int64_t t = t0; t < t1; ++t) {
                float* row = merged_.data() + sz(t) * sz(c.n_embd);
                kernels::rms_norm(row, row, norm, c.n_embd, c.eps);
            }
        });
    } else {
        pixel_shuffle(x_.data(), c.grid(), c.n_embd, s, merged_.data());
    }
    linear(model_.weights.proj, merged_.data(), T, out, pool_, quant_);
}

EncodedImage encode_image(VisionEncoder& encoder, const RgbImage& image, int longest_edge) {
    const VisionConfig& c = encoder.config();
    EncodedImage e;
    e.plan = plan_tiles(c, image.width, image.height, longest_edge);
    e.tokens_per_tile = c.tokens_per_tile();
    e.width = c.n_embd_out;
    const std::vector<float> tiles = preprocess(c, image, e.plan);
    const size_t tile_floats = 3 * sz(c.image_size) * sz(c.image_size);
    const size_t tile_out = sz(e.tokens_per_tile) * sz(e.width);
    e.embeddings.resize(sz(e.plan.n_tiles()) * tile_out);
    for (int t = 0; t < e.plan.n_tiles(); ++t)
        encoder.encode_tile(tiles.data() + sz(t) * tile_floats, e.embeddings.data() + sz(t) * tile_out);
    return e;
}

}  // namespace sl
