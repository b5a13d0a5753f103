// One attention layer, dense vs MSA (training-free, block-max with Quest pruning, mean-key, hybrid,
// and the library's default mode (kTrainingFreeMode: hybrid, group-mean query);
// and native: a learned indexer's scoring, one index head of head_dim per KV group scoring every
// index key, as M3 does; here with synthetic index keys = the KV head 0 keys, index queries near one),
// side by side at SmolLM2's shape (9 q / 3 kv heads, dim 64) and M3's (64 q / 4 kv heads, dim 128),
// prefill (a query block of 128 tokens at the end of the context) and decode (1 query), at 8K, 32K,
// 128K and, for SmolLM2, 1M tokens (0.75 GB of f16 K/V for the one layer; SIGHTLINE_BENCH_KV picks
// the storage; M3 at 1M needs 4 GB and dense prefill takes
// minutes: set SIGHTLINE_BENCH_M3_1M=1 to include it).
//
// Keys are synthetic but structured like real ones (each block drifts around its own direction,
// a few tokens stand out); queries sit near a random earlier key. Block-max's pruning depends on that
// structure (on uniform random keys Quest bounds are loose and nearly every block needs an exact
// score); the recall test (tst_msa_recall) reports the pruning rate on real SmolLM2 activations.
//
// SIGHTLINE_BENCH_REAL=<folder> adds real activations: layers of SmolLM2 at the end of a long
// prefill of refman.pdf, dumped by tst_msa_recall (SIGHTLINE_MSA_RECALL_DUMP); run them alone with
// --benchmark_filter='attention/real' (every name ends in /real_time, so 'real' matches all).
//
// Counters: ms per call, MB of K/V (and index) read per call, fraction of candidate blocks that needed
// an exact score. A compact table with the dense/MSA ratios is printed at the end.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "tests/common/activation_dump.h"

namespace {

struct Shape {
    const char* name;
    int n_head, n_kv, hd;
};

// Default: sl::kTrainingFreeMode, the training-free mode the library prefill runs (hybrid scoring
// with the group's mean query).
enum class Variant { Dense, BlockMax, MeanKey, Hybrid, Native, Default };
constexpr int kVariants = 6;
const char* variant_name(Variant v) {
    return v == Variant::Dense ? "dense" : v == Variant::BlockMax ? "msa-blockmax" : v == Variant::MeanKey ? "msa-meankey"
           : v == Variant::Hybrid ? "msa-hybrid" : v == Variant::Native ? "msa-native" : "msa-default";
}

sl::ThreadPool& pool() {
    static sl::ThreadPool p(0);
    return p;
}

// KV storage of the benchmark's cache: SIGHTLINE_BENCH_KV=f32|f16|int8 (default f16, the session's).
sl::KvType kv_type() {
    const char* e = std::getenv("SIGHTLINE_BENCH_KV");
    return e ? sl::parse_kv_type(e).value_or(sl::KvType::F16) : sl::KvType::F16;
}

// One cache alive at a time (benchmarks run in registration order, grouped by shape and length).
sl::KvCache& cache(const Shape& s, int ctx) {
    static std::unique_ptr<sl::KvCache> kv;
    static std::string key;
    const std::string want = std::string(s.name) + "/" + std::to_string(ctx);
    if (key != want) {
        kv.reset();
        sl::KvCacheOptions o;
        o.type = kv_type();
        kv = std::make_unique<sl::KvCache>(1, ctx, s.n_kv, s.hd, o);
        std::mt19937 g(42);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::uniform_real_distribution<float> ud(0.0f, 1.0f);
        std::vector<float> center(static_cast<size_t>(kv->row()));
        for (auto& x : center) x = nd(g);
        for (int64_t p = 0; p < ctx; ++p) {
            if (p % 128 == 0) {  // a new "topic": the center drifts, its strength varies
                const float w = 0.3f + 1.5f * ud(g);
                for (auto& x : center) x = 0.7f * x + 0.7f * nd(g) * w;
            }
            std::vector<float> k(static_cast<size_t>(kv->row())), v(k.size());
            const bool spike = ud(g) < 0.01f;
            for (int64_t i = 0; i < kv->row(); ++i) {
                k[static_cast<size_t>(i)] = center[static_cast<size_t>(i)] + 0.5f * nd(g) + (spike ? 2.0f * nd(g) : 0.0f);
                v[static_cast<size_t>(i)] = nd(g);
            }
            kv->write(0, p, k.data(), v.data());
        }
        kv->set_n_past(ctx);
        key = want;
    }
    return *kv;
}

void time_attention(benchmark::State& state, const std::string& shape, int n_kv, int hd, int ctx, int n_tokens, Variant v,
                    sl::KvCache& kv, const sl::AttentionCall& c, int remap_window, const std::vector<float>& ik);

// The mode of the msa-default variant: SIGHTLINE_BENCH_DEFAULT_MODE (a parse_msa_scoring name) or
// sl::kTrainingFreeMode.
std::string default_mode() {
    const char* e = std::getenv("SIGHTLINE_BENCH_DEFAULT_MODE");
    return e && *e ? std::string(e) : std::string(sl::kTrainingFreeMode);
}

// SIGHTLINE_BENCH_REAL: a folder of layer<L>.kvdump files (tst_msa_recall's SIGHTLINE_MSA_RECALL_DUMP:
// one layer of SmolLM2's real activations at the end of a long prefill of refman.pdf: the last
// query block's queries and every position's K/V). Each becomes a shape "real-L<L>" measured like the
// synthetic ones (dense, hybrid, default), the MSA at remapped positions (window
// SIGHTLINE_BENCH_REAL_REMAP, default 4096, the library prefill's for SmolLM2; 0: true positions).
struct RealDump : sl::test::ActivationDump {
    std::string path;
    std::vector<float> q;  // (n_q, n_head, head_dim)
};

// Reads the header and the queries; K/V are read by real_cache(). False on a missing file (no
// message: layers without a dump are skipped) and on a bad one (with a message).
bool read_dump_header(const std::string& path, RealDump& d) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    int64_t h[sl::test::kActivationDumpHeaderWords];
    bool ok = std::fread(h, sizeof h, 1, f) == 1 && sl::test::unpack_activation_dump(h, d);
    if (ok) {
        d.path = path;
        d.q.resize(static_cast<size_t>(d.n_q) * d.n_head * d.head_dim);
        ok = std::fread(d.q.data(), sizeof(float), d.q.size(), f) == d.q.size();
    }
    std::fclose(f);
    if (!ok) std::fprintf(stderr, "bench_attention: %s is not a kvdump of tst_msa_recall (bad header or short)\n", path.c_str());
    return ok;
}

// The dump's K/V in a one-layer cache (one alive at a time); null when the file is short.
sl::KvCache* real_cache(const RealDump& d) {
    static std::unique_ptr<sl::KvCache> kv;
    static std::string key;
    if (key != d.path) {
        key = d.path;
        kv.reset();
        sl::KvCacheOptions o;
        o.type = kv_type();
        kv = std::make_unique<sl::KvCache>(1, static_cast<int>(d.n_ctx), d.n_kv_head, d.head_dim, o);
        FILE* f = std::fopen(d.path.c_str(), "rb");
        const auto row = static_cast<size_t>(kv->row());
        std::vector<float> k(static_cast<size_t>(d.n_ctx) * row), v(k.size());
        const long off = static_cast<long>(sl::test::kActivationDumpHeaderWords * sizeof(int64_t) + d.q.size() * sizeof(float));
        const bool ok = f && std::fseek(f, off, SEEK_SET) == 0 && std::fread(k.data(), sizeof(float), k.size(), f) == k.size() &&
                        std::fread(v.data(), sizeof(float), v.size(), f) == v.size();
        if (f) std::fclose(f);
        if (!ok) {
            kv.reset();
            return nullptr;
        }
        for (int64_t p = 0; p < d.n_ctx; ++p)
            kv->write(0, p, k.data() + static_cast<size_t>(p) * row, v.data() + static_cast<size_t>(p) * row);
        kv->set_n_past(d.n_ctx);
    }
    return kv.get();
}

void BM_attention_real(benchmark::State& state, const RealDump* dp, int n_tokens, Variant v) {
    const RealDump& d = *dp;
    sl::KvCache* kv = real_cache(d);
    if (!kv) {
        state.SkipWithError((d.path + ": K/V shorter than its header says").c_str());
        return;
    }
    std::vector<float> out(static_cast<size_t>(n_tokens) * d.n_head * d.head_dim);
    sl::AttentionCall c;
    c.pos0 = d.n_ctx - n_tokens;
    c.n_tokens = n_tokens;
    c.n_head = d.n_head;
    c.n_kv_head = d.n_kv_head;
    c.head_dim = d.head_dim;
    c.scale = d.scale;
    c.q = d.q.data() + static_cast<size_t>(d.n_q - n_tokens) * d.n_head * d.head_dim;  // the last n_tokens queries
    c.rope_dim = d.rope_dim;
    c.rope_base = d.rope_base;
    c.rope_freq_scale = d.rope_freq_scale;
    c.rope_neox = d.rope_neox;
    c.out = out.data();
    const char* e = std::getenv("SIGHTLINE_BENCH_REAL_REMAP");
    const int remap = e && *e ? std::atoi(e) : 4096;
    time_attention(state, "real-L" + std::to_string(d.layer), d.n_kv_head, d.head_dim, static_cast<int>(d.n_ctx), n_tokens, v, *kv, c,
                   remap, {});
}

// Iterations per benchmark: dense prefill at long contexts takes seconds per call, so it runs once.
int iterations(Variant v, double work, int n_tokens) {
    return v == Variant::Dense ? (work > 2e9 ? 1 : work > 2e8 ? 3 : 20) : (n_tokens == 1 ? 50 : 5);
}

struct Row {
    std::string shape, phase;
    int ctx = 0;
    double ms[kVariants] = {};
    double mb[kVariants] = {};
    double exact_frac[kVariants] = {};
    double blocks[kVariants] = {};  // MSA: blocks selected per (query block, group) selection
};
std::map<std::string, Row>& table() {
    static std::map<std::string, Row> t;
    return t;
}

void BM_attention(benchmark::State& state, Shape s, int ctx, int n_tokens, Variant v) {
    sl::KvCache& kv = cache(s, ctx);
    const int64_t pos0 = ctx - n_tokens;
    std::mt19937 g(7);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    std::uniform_int_distribution<int64_t> pick(0, pos0 - 1);
    std::vector<float> q(static_cast<size_t>(n_tokens) * s.n_head * s.hd), out(q.size());
    for (int t = 0; t < n_tokens; ++t)
        for (int h = 0; h < s.n_head; ++h) {
            std::vector<float> kbuf(static_cast<size_t>(s.hd));
            const float* k = kv.k_rows(0, h / (s.n_head / s.n_kv), pick(g), 1, kbuf.data());
            for (int i = 0; i < s.hd; ++i) q[static_cast<size_t>((t * s.n_head + h) * s.hd + i)] = k[i] + nd(g);
        }
    sl::AttentionCall c;
    c.pos0 = pos0;
    c.n_tokens = n_tokens;
    c.n_head = s.n_head;
    c.n_kv_head = s.n_kv;
    c.head_dim = s.hd;
    c.scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    c.q = q.data();
    c.out = out.data();
    // Native: index queries (n_tokens, n_kv, hd) near the query's own keys' head, index keys
    // (ctx, hd) = KV head 0's keys (structured like them).
    std::vector<float> iq, ik;
    if (v == Variant::Native) {
        iq.resize(static_cast<size_t>(n_tokens) * s.n_kv * s.hd);
        for (int t = 0; t < n_tokens; ++t)
            for (int g2 = 0; g2 < s.n_kv; ++g2) {
                std::vector<float> kbuf(static_cast<size_t>(s.hd));
                const float* k = kv.k_rows(0, 0, pick(g), 1, kbuf.data());
                for (int i = 0; i < s.hd; ++i) iq[static_cast<size_t>((t * s.n_kv + g2) * s.hd + i)] = k[i] + nd(g);
            }
        ik.resize(static_cast<size_t>(ctx) * s.hd);
        for (int64_t p0 = 0; p0 < ctx; p0 += 128) {
            const int n = static_cast<int>(std::min<int64_t>(128, ctx - p0));
            std::vector<float> kbuf(static_cast<size_t>(n) * s.hd);
            const float* k = kv.k_rows(0, 0, p0, n, kbuf.data());
            std::copy(k, k + static_cast<size_t>(n) * s.hd, ik.begin() + p0 * s.hd);
        }
        c.index_n_head = s.n_kv;
        c.index_dim = s.hd;
        c.index_q = iq.data();
        c.index_k = ik.data() + pos0 * s.hd;
    }
    time_attention(state, s.name, s.n_kv, s.hd, ctx, n_tokens, v, kv, c, 0, ik);
}

// The timed part, shared by the synthetic and the real cases. remap_window > 0: MSA variants attend
// far blocks at remapped positions (PositionMode::Remap), as the library prefill does past the
// model's training context; dense attends at true positions. ik: native index keys (Native only).
void time_attention(benchmark::State& state, const std::string& shape, int n_kv, int hd, int ctx, int n_tokens, Variant v,
                    sl::KvCache& kv, const sl::AttentionCall& c, int remap_window, const std::vector<float>& ik) {
    const int64_t pos0 = c.pos0;
    float* out = c.out;
    std::unique_ptr<sl::Attention> att;
    sl::MsaAttention* msa = nullptr;
    if (v == Variant::Dense) {
        att = std::make_unique<sl::DenseAttention>();
    } else {
        sl::MsaConfig cfg;  // defaults: B 128, top-k 16
        cfg.scoring = v == Variant::BlockMax ? sl::BlockScoring::BlockMax
                      : v == Variant::MeanKey ? sl::BlockScoring::MeanKey
                      : v == Variant::Hybrid  ? sl::BlockScoring::Hybrid
                                              : sl::BlockScoring::Native;
        if (v == Variant::Default) sl::parse_msa_scoring(default_mode(), cfg);
        if (remap_window > 0) {
            cfg.positions = sl::PositionMode::Remap;
            cfg.remap_window = remap_window;
        }
        auto m = std::make_unique<sl::MsaAttention>(cfg);
        msa = m.get();
        att = std::move(m);
        if (v == Variant::Native) msa->set_native_keys(0, kv, ik.data(), pos0, hd);
        att->forward(c, kv, pool());  // builds the index of the whole context once (not timed)
        msa->reset_stats();
    }
    double secs = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        att->forward(c, kv, pool());
        secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        benchmark::DoNotOptimize(out);
    }
    const double it = static_cast<double>(state.iterations());
    double mb = 0, exact = 0, blocks = 0;
    if (msa) {
        const sl::MsaStats& st = msa->stats();
        blocks = static_cast<double>(st.selected_blocks) / std::max<double>(1.0, static_cast<double>(st.selections));
        mb = static_cast<double>(st.index_bytes + st.exact_key_bytes + st.kv_bytes) / it / 1e6;
        exact = static_cast<double>(v == Variant::Native ? st.select.exact_rows / std::max(1, n_tokens)
                                                          : st.select.exact_blocks) /
                std::max(1.0, static_cast<double>(st.select.candidates));
    } else {
        mb = 2.0 * n_kv * static_cast<double>(ctx) * hd * static_cast<double>(sl::kv_type_size(kv.type())) / 1e6;
    }
    state.counters["ms"] = secs / it * 1e3;
    state.counters["MB_read"] = mb;
    state.counters["exact_frac"] = exact;
    state.counters["blocks"] = blocks;
    const std::string phase = n_tokens == 1 ? "decode" : "prefill128";
    Row& r = table()[shape + "/" + phase + "/" + std::to_string(100000000 + ctx)];
    r.shape = shape;
    r.phase = phase;
    r.ctx = ctx;
    r.ms[static_cast<int>(v)] = secs / it * 1e3;
    r.mb[static_cast<int>(v)] = mb;
    r.exact_frac[static_cast<int>(v)] = exact;
    r.blocks[static_cast<int>(v)] = blocks;
}

void print_table() {
    std::printf("\n%-8s %-10s %8s | %9s %9s %9s %9s %9s %9s | %6s %6s %6s %6s %6s | %9s %8s %8s %8s %8s %8s | %6s | %7s %7s\n",
                "shape", "phase", "ctx", "dense ms", "bmax ms", "mean ms", "hyb ms", "nat ms", "def ms", "d/bmax", "d/mean",
                "d/hyb", "d/nat", "d/def", "dense MB", "bmax MB", "mean MB", "hyb MB", "nat MB", "def MB", "exact",
                "hyb blk", "def blk");
    for (const auto& [k, r] : table()) {
        auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
        std::printf("%-8s %-10s %8d | %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f | %6.1f %6.1f %6.1f %6.1f %6.1f | %9.1f %8.2f %8.2f "
                    "%8.2f %8.2f %8.2f | %5.1f%% | %7.1f %7.1f\n",
                    r.shape.c_str(), r.phase.c_str(), r.ctx, r.ms[0], r.ms[1], r.ms[2], r.ms[3], r.ms[4], r.ms[5],
                    ratio(r.ms[0], r.ms[1]), ratio(r.ms[0], r.ms[2]), ratio(r.ms[0], r.ms[3]), ratio(r.ms[0], r.ms[4]),
                    ratio(r.ms[0], r.ms[5]), r.mb[0], r.mb[1], r.mb[2], r.mb[3], r.mb[4], r.mb[5], 100.0 * r.exact_frac[1],
                    r.blocks[3], r.blocks[5]);
    }
    std::printf("(KV storage %s; ", sl::kv_type_name(kv_type()));
    std::printf("%d threads; MB read per call: dense = all K/V of the context once; MSA = index summaries + keys "
                "of exactly-scored blocks + K/V of the selected blocks (native: + every index key, f32); exact = candidate "
                "blocks block-max scored exactly)\n",
                pool().size());
}

void register_real(const std::string& dir) {
    static std::vector<RealDump> dumps;  // registered benchmarks point into it: filled once
    for (int layer = 0; layer < 256; ++layer) {
        RealDump d;  // layers without a file are skipped (read_dump_header: false, no message)
        if (read_dump_header(dir + "/layer" + std::to_string(layer) + ".kvdump", d)) dumps.push_back(std::move(d));
    }
    if (dumps.empty()) std::fprintf(stderr, "bench_attention: no layer<L>.kvdump in %s\n", dir.c_str());
    for (const RealDump& d : dumps)
        for (int n_tokens : {1, 128}) {
            if (n_tokens > d.n_q) continue;
            for (Variant v : {Variant::Dense, Variant::Hybrid, Variant::Default}) {
                const std::string name = "attention/real-L" + std::to_string(d.layer) + "/" +
                                         (n_tokens == 1 ? "decode" : "prefill128") + "/ctx:" + std::to_string(d.n_ctx) + "/" +
                                         variant_name(v);
                const double work = static_cast<double>(d.n_ctx) * n_tokens * d.n_head * d.head_dim;
                benchmark::RegisterBenchmark(name.c_str(), BM_attention_real, &d, n_tokens, v)
                    ->Iterations(iterations(v, work, n_tokens))
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
            }
        }
}

void register_all() {
    if (const char* real = std::getenv("SIGHTLINE_BENCH_REAL"); real && *real) register_real(real);
    const Shape shapes[] = {{"smollm2", 9, 3, 64}, {"m3", 64, 4, 128}};
    const bool m3_1m = std::getenv("SIGHTLINE_BENCH_M3_1M") != nullptr;
    for (const Shape& s : shapes) {
        for (int ctx : {8192, 32768, 131072, 1048576}) {
            if (ctx == 1048576 && std::string(s.name) == "m3" && !m3_1m) continue;
            for (int n_tokens : {1, 128}) {
                for (Variant v : {Variant::Dense, Variant::BlockMax, Variant::MeanKey, Variant::Hybrid, Variant::Native,
                                  Variant::Default}) {
                    const std::string name = std::string("attention/") + s.name + "/" + (n_tokens == 1 ? "decode" : "prefill128") +
                                             "/ctx:" + std::to_string(ctx) + "/" + variant_name(v);
                    const double work = static_cast<double>(ctx) * n_tokens * s.n_head * s.hd;
                    benchmark::RegisterBenchmark(name.c_str(), BM_attention, s, ctx, n_tokens, v)
                        ->Iterations(iterations(v, work, n_tokens))
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
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
    print_table();
    benchmark::Shutdown();
    return 0;
}
