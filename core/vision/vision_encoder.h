// The vision encoder's forward pass on the CPU: one normalized tile → embeddings of the language
// model's width.
//
//   patches  (N, 3*P*P)  = the tile cut into P x P patches, row-major, each flattened (c, ky, kx)
//   x        (N, D)      = patches @ patch_embd^T + patch_bias + pos_embd          (conv as matmul)
//   per block:  h = LN1(x);  x += attn_out(MHA(q(h), k(h), v(h)))   non-causal, scale 1/sqrt(hd)
//               h = LN2(x);  x += down(gelu_tanh(up(h)))
//   x = post_LN(x)
//   idefics3: merged (N/s², D*s*s) = pixel shuffle: token (i, j) of the (g/s)² grid concatenates
//                            patches (i*s + a, j*s + b) for a, b in [0, s), a outer (HF Idefics3)
//   gemma3:   merged (N/s², D)     = average of patches (i*s + a, j*s + b) (s x s pool, row-major
//                            tokens), then RMS norm (x / sqrt(mean(x²) + eps) * soft_emb_norm)
//   out      (N/s², E)   = merged @ proj^T
// LayerNorm: (x - mean) / sqrt(var + eps) * w + b. GELU: the tanh form (gelu_pytorch_tanh).
//
// Attention runs per (head, block of 32 queries): S = Q_b K_h^T and O = P V_h through the f32
// matmul kernel, on per-head contiguous copies K_h (N, hd) and V_h^T (hd, N).
// Threading: matmuls, attention (over heads x query blocks) and the per-row ops are split over
// `pool`. One encode at a time per VisionEncoder (it owns its scratch); `model` and `pool` must
// outlive it. Several encoders may share one model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vision/image_preprocess.h"
#include "core/vision/vision_model.h"

namespace sl {

class ThreadPool;

struct VisionEncoderOptions {
    // Attention as blocked GEMMs over per-head copies of K and V^T (the default), or row by row
    // over the interleaved K/V (kept for comparison: the benchmark runs both).
    bool gemm_attention = true;
};

class VisionEncoder {
public:
    VisionEncoder(const VisionModel& model, ThreadPool& pool, VisionEncoderOptions options = {});

    const VisionConfig& config() const { return model_.config; }

    // pixels: (3, S, S) normalized tile → out: (tokens_per_tile, n_embd_out).
    void encode_tile(const float* pixels, float* out);

    // The ViT alone: pixels → features (n_patches, n_embd) after post-LN (for tests).
    void features(const float* pixels, float* out);

private:
    void run_vit(const float* pixels);
    void attention_rows(int n);
    void attention_gemm(int n);

    const VisionModel& model_;
    ThreadPool& pool_;
    VisionEncoderOptions options_;
    std::vector<float> x_, h_, q_, k_, v_, att_, ff_, merged_, patches_, scores_, kh_, vt_;
    std::vector<uint8_t> quant_;
};

// An encoded image: every tile's embeddings in plan order (tiles row-major, global last).
struct EncodedImage {
    TilePlan plan;
    int tokens_per_tile = 0;
    int width = 0;                  // n_embd_out
    std::vector<float> embeddings;  // (n_tiles * tokens_per_tile, width)
};

// Plans, preprocesses and encodes `image`. `longest_edge` as in plan_tiles.
EncodedImage encode_image(VisionEncoder& encoder, const RgbImage& image, int longest_edge = -1);

// Pixel shuffle alone (exposed for tests): x (g*g, D) → out ((g/s)², D*s*s).
void pixel_shuffle(const float* x, int g, int D, int s, float* out);

// Gemma 3's pool alone: x (g*g, D) → out ((g/k)², D), each the mean of a k x k block of patches.
void average_pool(const float* x, int g, int D, int k, float* out);

// y (n) = gelu_tanh(x) in place.
void gelu_tanh(float* x, int64_t n);

// LayerNorm of one row.
void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps);

}  // namespace sl
