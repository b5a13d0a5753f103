// Image → normalized tiles for the vision encoder: the Idefics3 / SmolVLM tile plan, resampling and
// normalization.
//
// Tile plan (Hugging Face's Idefics3ImageProcessor, with S = config.image_size and
// L = config.longest_edge):
//   1. resize so the longest edge is L (aspect kept; the other edge rounded down, then up to even);
//   2. grow each edge up to a multiple of S (aspect kept as HF does, then rounded up);
//   3. when the result exceeds S on either edge: rows x cols tiles of S x S, row-major, followed by
//      one global tile (the whole image resized to S x S); otherwise the global tile alone.
// L == 0 (no `preproc_image_size` in the file) skips 1-3: every image is one global tile.
// Tiles are taken from the step-2 image stretched to rows*S x cols*S (it already has that size).
//
// Resampling is separable with a triangle (bilinear) filter whose support grows with the
// downscale factor (antialiased, as PIL's BILINEAR); pixel centres at +0.5; computed in double.
// HF resizes with LANCZOS and rounds to uint8 between steps; we do not, so pixels differ slightly
// from HF's (an accepted, documented difference). The numpy reference implements this same filter.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vision/vision_config.h"

namespace sl {

// 8-bit RGB, row-major, interleaved: rgb[(y * width + x) * 3 + c].
struct RgbImage {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb;
};

struct TilePlan {
    int resized_width = 0, resized_height = 0;  // step-2 size (0 when untiled)
    int rows = 0, cols = 0;                     // 0, 0: global tile only
    int n_tiles() const { return rows * cols + 1; }
};

// The plan for an image of width x height pixels. `longest_edge` < 0 uses config.longest_edge;
// 0 disables tiling; otherwise it overrides the file's value (the budget planner's downsampling
// knob) and must be >= image_size. Throws FormatError on non-positive or absurd sizes
// (> 65536 px per edge).
TilePlan plan_tiles(const VisionConfig& config, int width, int height, int longest_edge = -1);

// Resamples a float image (channels interleaved, `channels` per pixel) from sw x sh to dw x dh.
std::vector<float> resample(const float* src, int sw, int sh, int channels, int dw, int dh);

// All tiles of `image` under `plan`, each (3, S, S) channel-major, normalized:
// (v / 255 - mean[c]) / std[c]. Tiles row-major, the global tile last. Returns n_tiles * 3 * S * S
// floats. Throws FormatError when the image's buffer does not match its size.
std::vector<float> preprocess(const VisionConfig& config, const RgbImage& image, const TilePlan& plan);

}  // namespace sl
