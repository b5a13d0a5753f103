// The vision encoder on the CPU: patches/s for a 384-px and a 768-px tile through a SigLIP-base-
// sized tower (12 layers, 768 wide, 12 heads, FFN 3072, 16 px patches) and an Idefics3 projector
// (pixel shuffle 2, to SmolLM2-135M's width 576), random weights generated in-process, in F16 (what
// mmproj files ship) and F32. One encode = one tile: 576 patches at 384 px, 2304 at 768 px
// (attention grows with the square of that). Threads: SIGHTLINE_BENCH_THREADS (default: all).
//
// Attention runs as blocked GEMMs (the default) or row by row (gemm:0, the first version), side by
// side. Counters: patches/s, tokens/s (embeddings out, after the shuffle), GFLOP/s (multiply-adds x 2
// of the matmuls and attention), ms per tile.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/runtime/thread_pool.h"
#include "core/vision/vision_encoder.h"
#include "kernels/cpu/convert.h"

namespace {

// Owns the random weights a VisionModel points into.
struct RandomTower {
    std::vector<std::vector<uint8_t>> blobs;
    sl::VisionModel model;
    std::mt19937 gen{42};

    sl::TensorView matrix(int64_t n_in, int64_t n_out, sl::kernels::TensorType type) {
        std::normal_distribution<float> nd(0.0f, 1.0f / std::sqrt(static_cast<float>(n_in)));
        std::vector<float> w(static_cast<size_t>(n_in * n_out));
        for (auto& x : w) x = nd(gen);
        std::vector<uint8_t> blob;
        if (type == sl::kernels::TensorType::F16) {
            blob.resize(w.size() * 2);
            sl::kernels::f32_to_f16(reinterpret_cast<uint16_t*>(blob.data()), w.data(), w.size());
        } else {
            blob.resize(w.size() * 4);
            std::memcpy(blob.data(), w.data(), blob.size());
        }
        blobs.push_back(std::move(blob));
        sl::TensorView v;
        v.type = type;
        v.data = blobs.back().data();
        v.ne0 = n_in;
        v.ne1 = n_out;
        return v;
    }
    std::vector<float> vec(int64_t n, float base, float scale) {
        std::normal_distribution<float> nd(base, scale);
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) x = nd(gen);
        return v;
    }

    RandomTower(int image_size, sl::kernels::TensorType type) {
        sl::VisionConfig& c = model.config;
        c.image_size = image_size;
        c.patch_size = 16;
        c.n_embd = 768;
        c.n_ff = 3072;
        c.n_layer = 12;
        c.n_head = 12;
        c.eps = 1e-6f;
        c.scale_factor = 2;
        c.n_embd_out = 576;
        sl::validate_vision_config(c, "bench");
        const int64_t D = c.n_embd, F = c.n_ff;
        sl::VisionWeights& w = model.weights;
        w.patch_embd = matrix(3 * 16 * 16, D, type);
        w.patch_bias = vec(D, 0, 0.1f);
        w.pos_embd = vec(int64_t{c.n_patches()} * D, 0, 0.5f);
        w.layers.resize(static_cast<size_t>(c.n_layer));
        for (auto& L : w.layers) {
            L.ln1_w = vec(D, 1, 0.1f);
            L.ln1_b = vec(D, 0, 0.1f);
            L.ln2_w = vec(D, 1, 0.1f);
            L.ln2_b = vec(D, 0, 0.1f);
            L.wq = matrix(D, D, type);
            L.wk = matrix(D, D, type);
            L.wv = matrix(D, D, type);
            L.wo = matrix(D, D, type);
            L.bq = vec(D, 0, 0.1f);
            L.bk = vec(D, 0, 0.1f);
            L.bv = vec(D, 0, 0.1f);
            L.bo = vec(D, 0, 0.1f);
            L.up = matrix(D, F, type);
            L.down = matrix(F, D, type);
            L.b_up = vec(F, 0, 0.1f);
            L.b_down = vec(D, 0, 0.1f);
        }
        w.post_ln_w = vec(D, 1, 0.1f);
        w.post_ln_b = vec(D, 0, 0.1f);
        w.proj = matrix(c.merged_width(), c.n_embd_out, type);
    }
};

int bench_threads() {
    const char* v = std::getenv("SIGHTLINE_BENCH_THREADS");
    return v ? std::atoi(v) : 0;
}

void BM_EncodeTile(benchmark::State& state) {
    const int px = static_cast<int>(state.range(0));
    const auto type = state.range(1) ? sl::kernels::TensorType::F16 : sl::kernels::TensorType::F32;
    sl::VisionEncoderOptions options;
    options.gemm_attention = state.range(2) != 0;
    static std::unique_ptr<RandomTower> tower;
    tower = std::make_unique<RandomTower>(px, type);
    sl::ThreadPool pool(bench_threads());
    sl::VisionEncoder enc(tower->model, pool, options);
    const sl::VisionConfig& c = tower->model.config;
    std::vector<float> pixels(3 * static_cast<size_t>(px) * static_cast<size_t>(px));
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : pixels) x = u(gen);
    std::vector<float> out(static_cast<size_t>(c.tokens_per_tile()) * static_cast<size_t>(c.n_embd_out));
    for (auto _ : state) {
        enc.encode_tile(pixels.data(), out.data());
        benchmark::DoNotOptimize(out.data());
    }
    const double tiles = static_cast<double>(state.iterations());
    state.counters["patches/s"] = benchmark::Counter(tiles * c.n_patches(), benchmark::Counter::kIsRate);
    state.counters["tokens/s"] = benchmark::Counter(tiles * c.tokens_per_tile(), benchmark::Counter::kIsRate);
    const double n = c.n_patches(), D = c.n_embd, F = c.n_ff;
    const double flops = 2.0 * (n * 3 * 16 * 16 * D + c.n_layer * (n * (4 * D * D + 2 * D * F) + 2 * n * n * D) +
                                c.tokens_per_tile() * static_cast<double>(c.merged_width()) * c.n_embd_out);
    state.counters["GFLOP/s"] = benchmark::Counter(tiles * flops * 1e-9, benchmark::Counter::kIsRate);
    state.counters["patches"] = c.n_patches();
    state.counters["threads"] = pool.size();
    state.SetLabel(std::string(type == sl::kernels::TensorType::F16 ? "f16 " : "f32 ") + std::to_string(px) + "px" +
                   (options.gemm_attention ? "" : " rows-attention"));
    tower.reset();
}

BENCHMARK(BM_EncodeTile)
    ->ArgsProduct({{384}, {1, 0}, {1, 0}})
    ->ArgNames({"px", "f16", "gemm"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);
BENCHMARK(BM_EncodeTile)
    ->ArgsProduct({{768}, {1, 0}, {1, 0}})
    ->ArgNames({"px", "f16", "gemm"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
