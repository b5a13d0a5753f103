// The attention inner kernel on one block, one thread: 128 keys x 9 x 128 query rows (SmolLM2's
// heads over a 128-token query block) and M3's head dim, row by row (attend_row: ops.h's dot rows,
// exp, P·V) against the tile kernel (attend_tile: 4 rows per pass over the transposed keys, the
// transpose included), side by side per ISA tier. Counter: GFLOP/s (4 flops per row, key, channel:
// q·k and p·v).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/cpu_features.h"

namespace {

using namespace sl::kernels;

constexpr int kKeys = 128;
constexpr int kRows = 1152;

struct Data {
    std::vector<float> k, v, q, acc, m, l, p, kt;
    explicit Data(int d)
        : k(static_cast<size_t>(kKeys * d)), v(k.size()), q(static_cast<size_t>(kRows * d)), acc(q.size(), 0.0f),
          m(kRows, -INFINITY), l(kRows, 0.0f), p(static_cast<size_t>(kTileRows * tile_ldk(kKeys))),
          kt(static_cast<size_t>(d * tile_ldk(kKeys))) {
        std::mt19937 g(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto* x : {&k, &v, &q})
            for (auto& e : *x) e = nd(g);
    }
};

void BM_block(benchmark::State& state, bool tiled, Isa isa) {
    const int d = static_cast<int>(state.range(0));
    if (static_cast<int>(isa) > static_cast<int>(max_supported_isa())) {
        state.SkipWithError("ISA not supported here");
        return;
    }
    set_active_isa(isa);
    Data x(d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const int64_t ldk = tile_ldk(kKeys);
    for (auto _ : state) {
        if (tiled) {
            transpose_keys(x.kt.data(), ldk, x.k.data(), d, kKeys, d);
            float bsum[kTileRows];
            for (int r = 0; r < kRows; r += kTileRows) {
                const float* q[kTileRows];
                for (int i = 0; i < kTileRows; ++i) q[i] = x.q.data() + static_cast<size_t>(r + i) * static_cast<size_t>(d);
                attend_tile(kTileRows, q, x.kt.data(), ldk, x.v.data(), d, kKeys, d, scale, x.m.data() + r, x.l.data() + r,
                            x.acc.data() + static_cast<size_t>(r) * static_cast<size_t>(d), x.p.data(), ldk, bsum);
            }
        } else {
            for (int r = 0; r < kRows; ++r)
                attend_row(x.q.data() + static_cast<size_t>(r) * static_cast<size_t>(d), x.k.data(), d, x.v.data(), d, kKeys, d,
                           scale, x.m[static_cast<size_t>(r)], x.l[static_cast<size_t>(r)],
                           x.acc.data() + static_cast<size_t>(r) * static_cast<size_t>(d), x.p.data());
        }
        benchmark::DoNotOptimize(x.acc.data());
    }
    state.counters["GFLOPs"] = benchmark::Counter(4.0 * kRows * kKeys * d * static_cast<double>(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
    set_active_isa(max_supported_isa());
}

void register_all() {
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
        for (bool tiled : {false, true})
            benchmark::RegisterBenchmark((std::string("attention_block/") + isa_name(isa) + (tiled ? "/tile" : "/rows")).c_str(),
                                         BM_block, tiled, isa)
                ->Arg(64)
                ->Arg(128)
                ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
