// Encoder- and decoder-shaped matrix products, f32 (kernels::gemm_f32, packed panels) beside int8
// (kernels::gemm_s8, the activations' quantization included), one thread, the active ISA tier.
// Shapes are Whisper tiny's: 1500 encoder positions through 384 -> 1152 (fused QKV), 384 -> 1536
// and 1536 -> 384 (FFN); a decoded token (1 or 5 beams) through the 51,864-word output
// projection. Counter: GFLOP/s (2 n d per token).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/gemm_s8.h"

namespace {

std::vector<float> random(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
}

void counters(benchmark::State& state, int64_t tokens, int64_t n, int64_t d) {
    const double flop = 2.0 * static_cast<double>(tokens * n * d);
    state.counters["GFLOP/s"] =
        benchmark::Counter(flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: tokens, n (inputs), d (outputs).
void BM_GemmF32(benchmark::State& state) {
    const int64_t tokens = state.range(0), n = state.range(1), d = state.range(2);
    const auto X = random(static_cast<size_t>(tokens * n), 1), W = random(static_cast<size_t>(d * n), 2);
    std::vector<float> Wp(sl::kernels::packed_size(d, n)), Y(static_cast<size_t>(tokens * d));
    sl::kernels::pack_panels(W.data(), d, n, Wp.data());
    for (auto _ : state) {
        sl::kernels::gemm_f32(X.data(), n, tokens, n, Wp.data(), d, nullptr, Y.data(), d, 0, d);
        benchmark::DoNotOptimize(Y.data());
    }
    counters(state, tokens, n, d);
}

void BM_GemmS8(benchmark::State& state) {
    const int64_t tokens = state.range(0), n = state.range(1), d = state.range(2);
    const auto X = random(static_cast<size_t>(tokens * n), 1), W = random(static_cast<size_t>(d * n), 2);
    const sl::kernels::S8Weights q = sl::kernels::quantize_weights(W.data(), n, d, n);
    std::vector<uint8_t> Xq(static_cast<size_t>(tokens * sl::kernels::s8_row_bytes(n)));
    std::vector<float> xs(static_cast<size_t>(tokens)), Y(static_cast<size_t>(tokens * d));
    for (auto _ : state) {
        sl::kernels::quantize_tokens(X.data(), n, tokens, n, Xq.data(), xs.data());
        sl::kernels::gemm_s8(Xq.data(), xs.data(), tokens, q, nullptr, Y.data(), d, 0, d);
        benchmark::DoNotOptimize(Y.data());
    }
    counters(state, tokens, n, d);
}

void shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"tokens", "n", "d"});
    b->Args({1500, 384, 1152})->Args({1500, 384, 1536})->Args({1500, 1536, 384});
    b->Args({1, 384, 51864})->Args({5, 384, 51864})->Args({1, 384, 1536});
}

BENCHMARK(BM_GemmF32)->Apply(shapes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GemmS8)->Apply(shapes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
