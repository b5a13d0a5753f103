#include "core/vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/util/error.h"

namespace sl {

namespace {

constexpr int kMaxEdge = 65536;

// Step 1: longest edge to `max_len`, aspect kept, short edge truncated then made even.
void rescale_to_max_len(int& w, int& h, int max_len) {
    const double aspect = static_cast<double>(w) / h;
    if (w >= h) {
        w = max_len;
        h = static_cast<int>(w / aspect);
        if (h % 2) ++h;
    } else {
        h = max_len;
        w = static_cast<int>(h * aspect);
        if (w % 2) ++w;
    }
    w = std::max(w, 1);
    h = std::max(h, 1);
}

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Step 2: edges up to multiples of `s`.
void grow_to_multiple(int& w, int& h, int s) {
    const double aspect = static_cast<double>(w) / h;
    if (w >= h) {
        w = round_up(w, s);
        h = static_cast<int>(w / aspect);
        h = round_up(std::max(h, 1), s);
    } else {
        h = round_up(h, s);
        w = static_cast<int>(h * aspect);
        w = round_up(std::max(w, 1), s);
    }
}

// Triangle-filter weights of one axis: for each output index, [first input, count) and weights.
struct AxisWeights {
    std::vector<int> first, count;
    std::vector<double> w;  // out_size * taps
    int taps = 0;
};

AxisWeights axis_weights(int in_size, int out_size) {
    AxisWeights a;
    const double scale = static_cast<double>(in_size) / out_size;
    const double filter_scale = std::max(scale, 1.0);
    const double support = filter_scale;  // triangle support 1, widened when downscaling
    a.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
    a.first.resize(static_cast<size_t>(out_size));
    a.count.resize(static_cast<size_t>(out_size));
    a.w.assign(static_cast<size_t>(out_size) * static_cast<size_t>(a.taps), 0.0);
    for (int i = 0; i < out_size; ++i) {
        const double center = (i + 0.5) * scale;
        int x0 = static_cast<int>(center - support + 0.5);
        if (x0 < 0) x0 = 0;
        int x1 = static_cast<int>(center + support + 0.5);
        if (x1 > in_size) x1 = in_size;
        const int n = std::min(x1 - x0, a.taps);
        double sum = 0;
        double* w = a.w.data() + static_cast<size_t>(i) * static_cast<size_t>(a.taps);
        for (int k = 0; k < n; ++k) {
            const double t = std::abs((x0 + k - center + 0.5) / filter_scale);
            w[k] = t < 1.0 ? 1.0 - t : 0.0;
            sum += w[k];
        }
        if (sum > 0)
            for (int k = 0; k < n; ++k) w[k] /= sum;
        a.first[static_cast<size_t>(i)] = x0;
        a.count[static_cast<size_t>(i)] = n;
    }
    return a;
}

}  // namespace

TilePlan plan_tiles(const VisionConfig& c, int width, int height, int longest_edge) {
    if (width <= 0 || height <= 0 || width > kMaxEdge || height > kMaxEdge)
        throw FormatError("image of " + std::to_string(width) + " x " + std::to_string(height) +
                          " pixels: sizes must be in [1, " + std::to_string(kMaxEdge) + "]");
    // Gemma 3 takes every image as one tile (pan & scan off, as llama.cpp runs it).
    const int L = c.gemma3() ? 0 : longest_edge < 0 ? c.longest_edge : longest_edge;
    TilePlan p;
    if (L == 0) return p;
    if (L < c.image_size || L > VisionLimits::kMaxLongestEdge)
        throw FormatError("tiling longest edge " + std::to_string(L) + " is outside [" + std::to_string(c.image_size) +
                          ", " + std::to_string(VisionLimits::kMaxLongestEdge) + "]");
    int w = width, h = height;
    rescale_to_max_len(w, h, L);
    grow_to_multiple(w, h, c.image_size);
    if (w > c.image_size || h > c.image_size) {
        p.resized_width = w;
        p.resized_height = h;
        p.rows = h / c.image_size;
        p.cols = w / c.image_size;
    }
    return p;
}

std::vector<float> resample(const float* src, int sw, int sh, int ch, int dw, int dh) {
    const AxisWeights ax = axis_weights(sw, dw);
    const AxisWeights ay = axis_weights(sh, dh);
    // Horizontal pass: (sh, dw, ch), then vertical: (dh, dw, ch).
    std::vector<double> tmp(static_cast<size_t>(sh) * static_cast<size_t>(dw) * static_cast<size_t>(ch));
    for (int y = 0; y < sh; ++y) {
        const float* row = src + static_cast<size_t>(y) * static_cast<size_t>(sw) * static_cast<size_t>(ch);
        for (int x = 0; x < dw; ++x) {
            const double* w = ax.w.data() + static_cast<size_t>(x) * static_cast<size_t>(ax.taps);
            const int x0 = ax.first[static_cast<size_t>(x)], n = ax.count[static_cast<size_t>(x)];
            for (int c = 0; c < ch; ++c) {
                double s = 0;
                for (int k = 0; k < n; ++k) s += w[k] * row[static_cast<size_t>(x0 + k) * static_cast<size_t>(ch) + static_cast<size_t>(c)];
                tmp[(static_cast<size_t>(y) * static_cast<size_t>(dw) + static_cast<size_t>(x)) * static_cast<size_t>(ch) + static_cast<size_t>(c)] = s;
            }
        }
    }
    std::vector<float> out(static_cast<size_t>(dh) * static_cast<size_t>(dw) * static_cast<size_t>(ch));
    const size_t stride = static_cast<size_t>(dw) * static_cast<size_t>(ch);
    for (int y = 0; y < dh; ++y) {
        const double* w = ay.w.data() + static_cast<size_t>(y) * static_cast<size_t>(ay.taps);
        const int y0 = ay.first[static_cast<size_t>(y)], n = ay.count[static_cast<size_t>(y)];
        float* o = out.data() + static_cast<size_t>(y) * stride;
        for (size_t i = 0; i < stride; ++i) {
            double s = 0;
            for (int k = 0; k < n; ++k) s += w[k] * tmp[static_cast<size_t>(y0 + k) * stride + i];
            o[i] = static_cast<float>(s);
        }
    }
    return out;
}

std::vector<float> preprocess(const VisionConfig& c, const RgbImage& image, const TilePlan& plan) {
    if (image.width <= 0 || image.height <= 0 || image.width > kMaxEdge || image.height > kMaxEdge ||
        image.rgb.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height) * 3)
        throw FormatError("image of " + std::to_string(image.width) + " x " + std::to_string(image.height) +
                          " pixels has " + std::to_string(image.rgb.size()) + " bytes of RGB, expected " +
                          std::to_string(static_cast<size_t>(std::max(image.width, 0)) *
                                         static_cast<size_t>(std::max(image.height, 0)) * 3));
    const int S = c.image_size;
    const size_t tile_floats = 3 * static_cast<size_t>(S) * static_cast<size_t>(S);
    std::vector<float> src(image.rgb.begin(), image.rgb.end());
    std::vector<float> out(static_cast<size_t>(plan.n_tiles()) * tile_floats);

    // Interleaved (h, w, 3) region [x0, x0 + S) x [y0, y0 + S) of `img` (width iw) → one CHW tile.
    const auto put_tile = [&](const std::vector<float>& img, int iw, int x0, int y0, float* tile) {
        for (int ch = 0; ch < 3; ++ch) {
            const float mean = c.mean[static_cast<size_t>(ch)], inv_std = 1.0f / c.std[static_cast<size_t>(ch)];
            for (int y = 0; y < S; ++y)
                for (int x = 0; x < S; ++x) {
                    const float v = img[(static_cast<size_t>(y0 + y) * static_cast<size_t>(iw) + static_cast<size_t>(x0 + x)) * 3 + static_cast<size_t>(ch)];
                    tile[(static_cast<size_t>(ch) * static_cast<size_t>(S) + static_cast<size_t>(y)) * static_cast<size_t>(S) + static_cast<size_t>(x)] =
                        (v / 255.0f - mean) * inv_std;
                }
        }
    };
    if (plan.rows > 0) {
        const std::vector<float> big =
            resample(src.data(), image.width, image.height, 3, plan.resized_width, plan.resized_height);
        for (int r = 0; r < plan.rows; ++r)
            for (int col = 0; col < plan.cols; ++col)
                put_tile(big, plan.resized_width, col * S, r * S,
                         out.data() + static_cast<size_t>(r * plan.cols + col) * tile_floats);
    }
    const std::vector<float> global = resample(src.data(), image.width, image.height, 3, S, S);
    put_tile(global, S, 0, 0, out.data() + static_cast<size_t>(plan.rows * plan.cols) * tile_floats);
    return out;
}

}  // namespace sl
