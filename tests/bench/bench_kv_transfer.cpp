// The host side of moving a context off the device (core/kvcache/kv_transfer.h): what a save on the
// GPU spends converting the device's bf16 blocks into the host cache (.slkv pages), SmolLM2's shape
// (30 layers x 3 KV heads x 64, blocks of 128, f16 pages), from a host double of the device store
// (read_block is a memcpy: the PCIe copy is not in it). Side by side in one run:
//   BM_DownloadRuns       kv_download: per block and head, a run of rows converted and stored at once,
//                         on one thread (threads:1) and on every core into pages reserved first (0)
//   BM_DownloadPositions  the position-by-position path it replaced (bf16 -> f32 rows, KvCache::write)
//   BM_Upload/threads:1   a restore's way up: host f16 pages -> bf16 blocks -> staging, one thread
//   BM_Upload/threads:0   the same with the blocks converted on every core (kv_upload's default)
//   BM_Upload/staged:1    converted straight into the store's staging (two rooms of 32 blocks, as
//                         the CUDA runner's pinned staging): no copy into it on the calling thread
//   BM_SavePages/mode:0   a save's pages through the host copy: kv_download into a new host cache,
//                         then every page handed out hashed (KvCachePages), as Session::save did
//   BM_SavePages/mode:1   straight from the store (KvStorePages: batches converted and hashed on
//                         every core into a 64 MiB buffer; no host copy of the context)
//   BM_SaveFile/mode:0|1  the same into a .slkv file in $TMPDIR (write_kv_file, synced): what a save
//                         on the GPU costs on the host, the disk included; host_MB: the host cache
//                         after it (RAM the saved context keeps on the host)
// bytes/s counts the host cache's bytes written (K and V, f16). At a million tokens a save moves
// 23 GB: seconds = 23e9 / bytes_per_second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/kvcache/kv_transfer.h"
#include "kernels/cpu/convert.h"

namespace {

constexpr int kLayers = 30, kKv = 3, kDim = 64, kB = 128;

// The device store's blocks in host memory: per (layer, block), (n_kv, B, head_dim) bf16 K and V.
class HostStore final : public sl::KvBlockStore {
public:
    explicit HostStore(int64_t blocks) : blocks_(blocks), k_(static_cast<size_t>(kLayers * blocks) * elems()), v_(k_.size()) {
        std::mt19937 g(7);
        std::normal_distribution<float> nd(0.0f, 1.5f);
        for (size_t i = 0; i < k_.size(); ++i) {
            k_[i] = sl::kernels::f32_to_bf16(nd(g));
            v_[i] = sl::kernels::f32_to_bf16(nd(g));
        }
    }
    static size_t elems() { return static_cast<size_t>(kKv * kB * kDim); }
    int block_size() const override { return kB; }
    void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) override {
        const size_t at = static_cast<size_t>(layer * blocks_ + block) * elems();
        std::memcpy(k, k_.data() + at, elems() * 2);
        std::memcpy(v, v_.data() + at, elems() * 2);
    }
    void append_rows(int, int64_t, int64_t, const float*, const float*) override {}

private:
    int64_t blocks_;
    std::vector<uint16_t> k_, v_;
};

sl::KvCacheOptions f16_pages() {
    sl::KvCacheOptions o;
    o.type = sl::KvType::F16;
    o.block_size = kB;
    return o;
}

void BM_DownloadRuns(benchmark::State& state) {
    const int64_t n = state.range(0);
    HostStore store((n + kB - 1) / kB);
    for (auto _ : state) {
        sl::KvCache kv(kLayers, static_cast<int>(n), kKv, kDim, f16_pages());
        sl::kv_download(store, kv, 0, n, static_cast<int>(state.range(1)));
        benchmark::DoNotOptimize(kv.page(kLayers - 1, 0));
    }
    state.SetBytesProcessed(state.iterations() * n * kLayers * kKv * kDim * 2 * 2);
}

void BM_DownloadPositions(benchmark::State& state) {
    const int64_t n = state.range(0);
    HostStore store((n + kB - 1) / kB);
    std::vector<uint16_t> kb(HostStore::elems()), vb(kb.size());
    std::vector<float> kr(static_cast<size_t>(kKv * kDim)), vr(kr.size());
    for (auto _ : state) {
        sl::KvCache kv(kLayers, static_cast<int>(n), kKv, kDim, f16_pages());
        for (int l = 0; l < kLayers; ++l)
            for (int64_t b = 0; b * kB < n; ++b) {
                store.read_block(l, b, kb.data(), vb.data());
                for (int64_t p = b * kB; p < std::min(n, (b + 1) * kB); ++p) {
                    for (int h = 0; h < kKv; ++h) {
                        const size_t at = static_cast<size_t>((h * kB + (p - b * kB)) * kDim);
                        sl::kernels::bf16_to_f32(kr.data() + h * kDim, kb.data() + at, kDim);
                        sl::kernels::bf16_to_f32(vr.data() + h * kDim, vb.data() + at, kDim);
                    }
                    kv.write(l, p, kr.data(), vr.data());
                }
            }
        kv.set_n_past(n);
        benchmark::DoNotOptimize(kv.page(kLayers - 1, 0));
    }
    state.SetBytesProcessed(state.iterations() * n * kLayers * kKv * kDim * 2 * 2);
}

BENCHMARK(BM_DownloadRuns)->ArgNames({"n", "threads"})->Args({16384, 1})->Args({16384, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DownloadPositions)->Arg(16384)->Unit(benchmark::kMillisecond)->UseRealTime();

// The other way (a restore onto the device): whole blocks of a host cache with f16 pages converted
// to bf16 and handed to a store that copies each into a staging area, as the CUDA runner's pinned
// staging does (the PCIe copy is not in it); the conversion on one thread and on all cores.
class StagingStore final : public sl::KvBlockStore {
public:
    explicit StagingStore(bool rooms) : rooms_(rooms), stage_(2 * 32 * 2 * HostStore::elems()) {}
    int block_size() const override { return kB; }
    void read_block(int, int64_t, uint16_t*, uint16_t*) override {}
    void append_rows(int, int64_t, int64_t, const float*, const float*) override {}
    bool takes_blocks() const override { return true; }
    void write_block(int, int64_t, const uint16_t* k, const uint16_t* v, int) override {
        if (staged_ == 32) staged_ = 0;
        uint16_t* d = stage_.data() + static_cast<size_t>(staged_++) * 2 * HostStore::elems();
        std::memcpy(d, k, HostStore::elems() * 2);
        std::memcpy(d + HostStore::elems(), v, HostStore::elems() * 2);
    }
    // Converted straight into two alternating rooms of 32 blocks (the CUDA runner's pinned staging).
    int stage_capacity() const override { return rooms_ ? 32 : 0; }
    uint16_t* stage(int) override {
        room_ ^= 1;
        return stage_.data() + static_cast<size_t>(room_) * 32 * 2 * HostStore::elems();
    }
    void write_staged(int i, int, int64_t, int) override {
        benchmark::DoNotOptimize(stage_.data() + static_cast<size_t>(room_ * 32 + i) * 2 * HostStore::elems());
    }

private:
    bool rooms_;
    std::vector<uint16_t> stage_;
    int staged_ = 0, room_ = 0;
};

void BM_Upload(benchmark::State& state) {
    const int64_t n = 16384;
    const int threads = static_cast<int>(state.range(0));
    HostStore host((n + kB - 1) / kB);
    sl::KvCache kv(kLayers, static_cast<int>(n), kKv, kDim, f16_pages());
    sl::kv_download(host, kv, 0, n);
    StagingStore store(state.range(1) == 1);
    for (auto _ : state) sl::kv_upload(kv, store, 0, n, 512, threads);
    state.SetBytesProcessed(state.iterations() * n * kLayers * kKv * kDim * 2 * 2);
}
BENCHMARK(BM_Upload)
    ->ArgNames({"threads", "staged"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// mode 0: through a host copy of the context; 1: straight from the store.
void BM_SavePages(benchmark::State& state) {
    const int64_t n = 16384;
    const bool streamed = state.range(0) == 1;
    HostStore store((n + kB - 1) / kB);
    const std::vector<int32_t> tokens(static_cast<size_t>(n), 1);
    sl::KvFileInfo info;
    info.n_layer = kLayers;
    info.block_size = kB;
    for (auto _ : state) {
        sl::KvCache kv(kLayers, static_cast<int>(n), kKv, kDim, f16_pages());
        info.page_bytes = kv.page_bytes();
        uint64_t h = 0;
        auto hand_out = [&](sl::KvPageSource& pages) {
            for (int64_t b = 0; b * kB < n; ++b)
                for (int l = 0; l < kLayers; ++l) h ^= pages.page(l, b).hash;
        };
        if (streamed) {
            sl::KvStorePages pages(store, kv, 0, n);
            hand_out(pages);
        } else {
            sl::kv_download(store, kv, 0, n);
            sl::KvCachePages pages(info, kv, tokens, "bench");
            hand_out(pages);
        }
        benchmark::DoNotOptimize(h);
    }
    state.SetBytesProcessed(state.iterations() * n * kLayers * kKv * kDim * 2 * 2);
}
BENCHMARK(BM_SavePages)->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SaveFile(benchmark::State& state) {
    const int64_t n = 16384;
    const bool streamed = state.range(0) == 1;
    HostStore store((n + kB - 1) / kB);
    const std::vector<int32_t> tokens(static_cast<size_t>(n), 1);
    const std::vector<float> logits(16, 0.0f);
    const char* tmp = std::getenv("TMPDIR");
    const std::string path = (std::filesystem::path(tmp ? tmp : "/tmp") / "bench_kv_transfer.slkv").string();
    double host_bytes = 0;
    for (auto _ : state) {
        sl::KvCache kv(kLayers, static_cast<int>(n), kKv, kDim, f16_pages());
        sl::KvFileInfo info;
        info.fingerprint = std::string(64, '0');
        info.attention = "dense";
        info.n_layer = kLayers;
        info.n_kv_head = kKv;
        info.head_dim = kDim;
        info.block_size = kB;
        info.n_vocab = 16;
        info.type = sl::KvType::F16;
        info.page_bytes = kv.page_bytes();
        if (streamed) {
            sl::KvStorePages pages(store, kv, 0, n);
            sl::write_kv_file(path, info, pages, tokens, logits);
        } else {
            sl::kv_download(store, kv, 0, n);
            sl::write_kv_file(path, info, kv, tokens, logits);
        }
        host_bytes = static_cast<double>(kv.ram_bytes());
    }
    std::filesystem::remove(path);
    state.counters["host_MB"] = host_bytes / 1e6;
    state.SetBytesProcessed(state.iterations() * n * kLayers * kKv * kDim * 2 * 2);
}
BENCHMARK(BM_SaveFile)->ArgName("mode")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
