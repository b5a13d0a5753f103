// What reopening a saved context costs before its first new token (Session::restore), SmolLM2's KV
// shape (30 layers x 3 KV heads x 64, blocks of 128, f16 pages), on a file of 32,768 tokens
// (~750 MB) written once to the temp dir (in the page cache afterwards, as a library prefill
// usually is) and mapped afresh for each parse (its page faults count, as in a restore). Side by
// side in one run:
//   BM_VerifyFull/threads:1   parse_kv_file, every page hashed on one thread (what restore did)
//   BM_VerifyFull/threads:0   the same on the machine's cores (what restore does)
//   BM_VerifyHeaders          structure and the last commit only (restore_delta's first look)
//   BM_IndexBuild/threads:1   MSA's block index over every key of one layer, position remapping on
//                             (BlockIndex::update: what the first forward call after a restore
//                             spends per layer), from the mapped pages, on one thread (before)
//   BM_IndexBuild/threads:0   the same split over the forward pass's pool (all cores; before)
//   BM_IndexImport            the same index read from the file's block summaries (kv_file.h kind
//                             4: read_block_summaries + BlockIndex::import_blocks; now)
// A restore onto a device (the host's side; the bus's copies come on top and are the device's):
//   BM_DeviceUpload           every layer's pages, each checked on first read, converted to bf16
//                             blocks in 32-block staging rooms (kv_upload: before, and still for
//                             dense attention)
//   BM_DevicePlace            every layer's mean keys from the file's block summaries, as bf16
//                             (DeviceRunner::place_kv's input: Session::place_on_device; now, MSA),
//                             the pages left in the file until the attention picks them
// bytes/s counts the file's page bytes. At a million tokens a file holds ~23 GB: seconds =
// 23e9 / bytes_per_second.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/attention/block_index.h"
#include "core/attention/rope_shift.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/kvcache/kv_transfer.h"
#include "core/runtime/thread_pool.h"
#include "core/util/mapped_file.h"
#include "kernels/cpu/convert.h"

namespace {

constexpr int kLayers = 30, kKv = 3, kDim = 64, kB = 128, kTokens = 32768;

sl::RopeShift rope() { return {kDim, kDim, 100000.0f, 1.0f, true}; }  // SmolLM2's RoPE (NeoX pairing)

struct SavedFile {
    std::string path;
    std::unique_ptr<sl::MappedFile> map;
    sl::KvFileContents contents;
    SavedFile() {
        path = (std::filesystem::temp_directory_path() / ("bench_restore-" + std::to_string(::getpid()) + ".slkv")).string();
        sl::KvCacheOptions o;
        o.type = sl::KvType::F16;
        o.block_size = kB;
        sl::KvCache kv(kLayers, kTokens, kKv, kDim, o);
        std::mt19937 g(3);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> k(static_cast<size_t>(kB) * kDim), v(k.size());
        for (int l = 0; l < kLayers; ++l)
            for (int64_t p = 0; p < kTokens; p += kB)
                for (int h = 0; h < kKv; ++h) {
                    for (size_t i = 0; i < k.size(); ++i) {
                        k[i] = nd(g) + (i % kDim == 3 ? 6.0f : 0.0f);
                        v[i] = nd(g);
                    }
                    kv.write_rows(l, h, p, kB, k.data(), v.data());
                }
        kv.set_n_past(kTokens);
        sl::KvFileInfo in;
        in.fingerprint = std::string(64, 'b');
        in.attention = "msa";
        in.n_layer = kLayers;
        in.n_kv_head = kKv;
        in.head_dim = kDim;
        in.block_size = kB;
        in.n_vocab = 49152;
        in.type = kv.type();
        in.page_bytes = kv.page_bytes();
        std::vector<int32_t> tokens(kTokens);
        for (int i = 0; i < kTokens; ++i) tokens[static_cast<size_t>(i)] = (i * 7 + 3) % 49152;
        // Every layer's MSA block index, saved with the pages (as Session::save does).
        std::vector<std::unique_ptr<sl::BlockIndex>> index;
        std::vector<sl::KvBlockSummaries> sums;
        sl::ThreadPool pool(0);
        for (int l = 0; l < kLayers; ++l) {
            index.push_back(std::make_unique<sl::BlockIndex>(kB, kKv, kDim, rope()));
            index.back()->update(kv, l, 0, kTokens, &pool);
            const sl::BlockIndex* ix = index.back().get();
            sums.push_back({kTokens, kB, static_cast<int>(ix->floats_per_block()), [ix](int64_t b, float* o) { ix->export_block(b, o); }});
        }
        sl::write_kv_file(path, in, kv, tokens, std::vector<float>(49152, 0.5f), {}, {}, sums);
        map = std::make_unique<sl::MappedFile>(path);
        contents = sl::parse_kv_file(map->bytes(), path, sl::KvVerify::Headers);
    }
    ~SavedFile() { std::filesystem::remove(path); }
    int64_t page_bytes() const { return static_cast<int64_t>(contents.info.page_bytes) * kLayers * contents.n_blocks; }
};

SavedFile& saved() {
    static SavedFile f;
    return f;
}

void BM_VerifyFull(benchmark::State& state) {
    SavedFile& f = saved();
    const int threads = static_cast<int>(state.range(0));
    for (auto _ : state) {
        const sl::MappedFile map(f.path);  // mapped afresh, as a restore does: its page faults count
        const sl::KvFileContents c = sl::parse_kv_file(map.bytes(), f.path, sl::KvVerify::Full, threads);
        benchmark::DoNotOptimize(c.page_offset.data());
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes());
}
BENCHMARK(BM_VerifyFull)->ArgName("threads")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_VerifyHeaders(benchmark::State& state) {
    SavedFile& f = saved();
    for (auto _ : state) {
        const sl::MappedFile map(f.path);
        const sl::KvFileContents c = sl::parse_kv_file(map.bytes(), f.path, sl::KvVerify::Headers);
        benchmark::DoNotOptimize(c.page_offset.data());
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes());
}
BENCHMARK(BM_VerifyHeaders)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_IndexBuild(benchmark::State& state) {
    SavedFile& f = saved();
    // The restored context: every page attached from the map (as Session::restore does).
    sl::KvCacheOptions o;
    o.type = sl::KvType::F16;
    o.block_size = kB;
    sl::KvCache kv(kLayers, kTokens, kKv, kDim, o);
    auto map = std::make_shared<const sl::MappedFile>(f.path);
    for (int l = 0; l < kLayers; ++l)
        for (int64_t b = 0; b < f.contents.n_blocks; ++b)
            kv.attach(l, b, map->data() + f.contents.page_offset[static_cast<size_t>(l * f.contents.n_blocks + b)], map);
    kv.set_n_past(kTokens);
    sl::ThreadPool pool(static_cast<int>(state.range(0)));
    for (auto _ : state) {
        sl::BlockIndex index(kB, kKv, kDim, rope());
        index.update(kv, 0, 0, kTokens, &pool);
        benchmark::DoNotOptimize(index.kmin(0, 0));
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes() / kLayers);
}
BENCHMARK(BM_IndexBuild)->ArgName("threads")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_IndexImport(benchmark::State& state) {
    SavedFile& f = saved();
    for (auto _ : state) {
        const sl::MappedFile map(f.path);  // mapped afresh: its page faults count
        const std::vector<float> sums = sl::read_block_summaries(map.bytes(), f.contents, 0);
        sl::BlockIndex index(kB, kKv, kDim, rope());
        index.import_blocks(0, kTokens, sums.data());
        benchmark::DoNotOptimize(index.kmin(0, 0));
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes() / kLayers);
}
BENCHMARK(BM_IndexImport)->Unit(benchmark::kMillisecond)->UseRealTime();

// A device's staging that keeps nothing: what the host does for an upload, without the bus.
class NullStore final : public sl::KvBlockStore {
public:
    int block_size() const override { return kB; }
    void read_block(int, int64_t, uint16_t*, uint16_t*) override {}
    void append_rows(int, int64_t, int64_t, const float*, const float*) override {}
    bool takes_blocks() const override { return true; }
    int stage_capacity() const override { return 32; }
    uint16_t* stage(int n) override {
        room_.resize(static_cast<size_t>(n) * 2 * kKv * kB * kDim);
        return room_.data();
    }
    void write_staged(int i, int, int64_t, int) override { benchmark::DoNotOptimize(room_[static_cast<size_t>(i)]); }

private:
    std::vector<uint16_t> room_;
};

void BM_DeviceUpload(benchmark::State& state) {
    SavedFile& f = saved();
    for (auto _ : state) {
        auto map = std::make_shared<const sl::MappedFile>(f.path);  // mapped afresh: its page faults count
        sl::KvCacheOptions o;
        o.type = sl::KvType::F16;
        o.block_size = kB;
        sl::KvCache kv(kLayers, kTokens, kKv, kDim, o);
        for (int l = 0; l < kLayers; ++l)
            for (int64_t b = 0; b < f.contents.n_blocks; ++b)
                kv.attach(l, b, map->data() + f.contents.page_offset[static_cast<size_t>(l * f.contents.n_blocks + b)], map,
                          sl::kv_page_checksum(map->bytes(), f.contents, l, b));
        kv.set_n_past(kTokens);
        NullStore store;
        sl::kv_upload(kv, store, 0, kTokens);
        if (kv.damaged()) state.SkipWithError("a page failed its check");
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes());
}
BENCHMARK(BM_DeviceUpload)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DevicePlace(benchmark::State& state) {
    SavedFile& f = saved();
    const size_t dkv = static_cast<size_t>(kKv) * kDim;
    for (auto _ : state) {
        const sl::MappedFile map(f.path);
        for (int l = 0; l < kLayers; ++l) {
            const std::vector<float> sums = sl::read_block_summaries(map.bytes(), f.contents, l);
            const int64_t blocks = f.contents.n_blocks;
            std::vector<float> means(static_cast<size_t>(blocks) * dkv);
            if (!sl::BlockIndex::summary_means(sums.data(), blocks, f.contents.summary_floats[static_cast<size_t>(l)], kKv, kDim,
                                               means.data()))
                state.SkipWithError("no mean keys in the summaries");
            const std::vector<float> g = sl::kv_regroup_means(means, kB, kTokens, kB, static_cast<int>(dkv));
            std::vector<uint16_t> bf(g.size());
            sl::kernels::f32_to_bf16(bf.data(), g.data(), g.size());
            benchmark::DoNotOptimize(bf.data());
        }
    }
    state.SetBytesProcessed(state.iterations() * f.page_bytes());
}
BENCHMARK(BM_DevicePlace)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
