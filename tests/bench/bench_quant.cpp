// Quantized kernels per type and ISA tier side by side, at SmolLM2-135M shapes:
//   vec_dot: one weight row · one activation row (rows cycled so they stay in cache): kernel speed.
//   matmul:  quantize_activations + matmul_rows on one thread, n_tokens 1 (decode, memory bound)
//            and 64 (prefill, compute bound).
// Counters: GB/s of weight bytes streamed, GFLOP/s (2 d n n_tokens per product). Ratios between
// tiers, not absolute numbers, are the point.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/tensor_types.h"

namespace {

using sl::kernels::Isa;
using sl::kernels::TensorType;

size_t row_bytes(TensorType t, int64_t n) {
    const auto info = sl::kernels::tensor_type_info(t);
    return static_cast<size_t>(n / info.block_size) * info.type_size;
}

// Weights (d, n) of gaussian values quantized to `t`, made once per shape and shared.
const std::vector<uint8_t>& weights(TensorType t, int64_t d, int64_t n) {
    static std::map<std::tuple<int, int64_t, int64_t>, std::vector<uint8_t>> cache;
    auto& w = cache[{static_cast<int>(t), d, n}];
    if (w.empty()) {
        std::mt19937 g(7);
        std::normal_distribution<float> nd(0.0f, 0.02f);
        std::vector<float> row(static_cast<size_t>(n));
        w.resize(row_bytes(t, n) * static_cast<size_t>(d));
        for (int64_t r = 0; r < d; ++r) {
            for (auto& x : row) x = nd(g);
            sl::kernels::quantize_row(t, row.data(), w.data() + static_cast<size_t>(r) * row_bytes(t, n), n);
        }
    }
    return w;
}

std::vector<float> activations(int64_t count) {
    std::mt19937 g(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(count));
    for (auto& v : x) v = nd(g);
    return x;
}

bool set_isa(benchmark::State& state, Isa isa) {
    if (static_cast<int>(isa) > static_cast<int>(sl::kernels::max_supported_isa())) {
        state.SkipWithError("ISA not supported by this CPU");
        return false;
    }
    sl::kernels::set_active_isa(isa);
    return true;
}

void BM_vec_dot(benchmark::State& state, TensorType t, Isa isa, int64_t n) {
    if (!set_isa(state, isa)) return;
    const int64_t rows = 64;
    const auto& w = weights(t, rows, n);
    const std::vector<float> x = activations(n);
    std::vector<float> xq((sl::kernels::activation_row_bytes(t, n) + 3) / 4);
    sl::kernels::quantize_activations(t, x.data(), 1, n, xq.data());
    const size_t wb = row_bytes(t, n);
    int64_t r = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(sl::kernels::vec_dot(t, n, w.data() + static_cast<size_t>(r) * wb, xq.data()));
        r = (r + 1) % rows;
    }
    const auto it = static_cast<double>(state.iterations());
    state.counters["GB/s"] = benchmark::Counter(it * static_cast<double>(wb) / 1e9, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(it * 2.0 * static_cast<double>(n) / 1e9, benchmark::Counter::kIsRate);
    sl::kernels::set_active_isa(sl::kernels::max_supported_isa());
}

void BM_matmul(benchmark::State& state, TensorType t, Isa isa, int64_t d, int64_t n, int64_t nt) {
    if (!set_isa(state, isa)) return;
    const auto& w = weights(t, d, n);
    const std::vector<float> x = activations(n * nt);
    std::vector<float> xq((sl::kernels::activation_row_bytes(t, n) * static_cast<size_t>(nt) + 3) / 4);
    std::vector<float> y(static_cast<size_t>(d * nt));
    for (auto _ : state) {
        sl::kernels::quantize_activations(t, x.data(), nt, n, xq.data());
        sl::kernels::matmul_rows(t, w.data(), n, xq.data(), nt, y.data(), d, 0, d);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    const auto it = static_cast<double>(state.iterations());
    state.counters["GB/s"] = benchmark::Counter(it * static_cast<double>(w.size()) / 1e9, benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(it * 2.0 * static_cast<double>(d * n * nt) / 1e9,
                                                   benchmark::Counter::kIsRate);
    state.counters["us/token"] = benchmark::Counter(it * static_cast<double>(nt),
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    sl::kernels::set_active_isa(sl::kernels::max_supported_isa());
}

void register_all() {
    const TensorType types[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                                TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K,
                                TensorType::Q6_K};
    const Isa isas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};
    // SmolLM2-135M: d_model 576, ffn 1536, vocab 49152. K-quants need n % 256 == 0.
    const std::pair<int64_t, int64_t> shapes[] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
    for (TensorType t : types) {
        const auto info = sl::kernels::tensor_type_info(t);
        for (int64_t n : {int64_t{576}, int64_t{1536}}) {
            if (n % info.block_size != 0) continue;
            for (Isa isa : isas) {
                const std::string name = std::string("vec_dot/") + info.name + "/" + sl::kernels::isa_name(isa) +
                                         "/n:" + std::to_string(n);
                benchmark::RegisterBenchmark(name.c_str(), BM_vec_dot, t, isa, n);
            }
        }
        for (auto [d, n] : shapes) {
            if (n % info.block_size != 0) continue;
            for (int64_t nt : {int64_t{1}, int64_t{64}}) {
                for (Isa isa : isas) {
                    if (isa == Isa::Scalar && nt > 1 && d > 4096) continue;  // minutes per run
                    const std::string name = std::string("matmul/") + info.name + "/" + sl::kernels::isa_name(isa) +
                                             "/d:" + std::to_string(d) + "/n:" + std::to_string(n) +
                                             "/tokens:" + std::to_string(nt);
                    benchmark::RegisterBenchmark(name.c_str(), BM_matmul, t, isa, d, n, nt)->Unit(benchmark::kMicrosecond);
                }
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
