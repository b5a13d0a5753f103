// f16/bf16 -> f32 per ISA tier side by side (ratios, not absolute speeds, are the point), and
// SHA-256 throughput (content hashing of large files at ingest).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/util/sha256.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"

namespace {

using sl::kernels::Isa;

void BM_f16_to_f32(benchmark::State& state, Isa isa) {
    if (static_cast<int>(isa) > static_cast<int>(sl::kernels::max_supported_isa())) {
        state.SkipWithError("ISA not supported by this CPU");
        return;
    }
    sl::kernels::set_active_isa(isa);
    const size_t n = static_cast<size_t>(state.range(0));
    std::vector<uint16_t> in(n);
    std::mt19937 g(42);
    for (auto& x : in) x = static_cast<uint16_t>(g() & 0xbfff);
    std::vector<float> out(n);
    for (auto _ : state) {
        sl::kernels::f16_to_f32(out.data(), in.data(), n);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n * 6));
    sl::kernels::set_active_isa(sl::kernels::max_supported_isa());
}

void BM_sha256(benchmark::State& state) {
    std::vector<uint8_t> data(static_cast<size_t>(state.range(0)), 0x5a);
    for (auto _ : state) {
        sl::Sha256 h;
        h.update(data.data(), data.size());
        benchmark::DoNotOptimize(h.digest());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

}  // namespace

BENCHMARK_CAPTURE(BM_f16_to_f32, scalar, Isa::Scalar)->Arg(1 << 16);
BENCHMARK_CAPTURE(BM_f16_to_f32, avx2, Isa::Avx2)->Arg(1 << 16);
BENCHMARK_CAPTURE(BM_f16_to_f32, avx512, Isa::Avx512)->Arg(1 << 16);
BENCHMARK(BM_sha256)->Arg(1 << 20);

BENCHMARK_MAIN();
