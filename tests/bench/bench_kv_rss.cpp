// Peak RSS holding a long SmolLM2-shaped context (30 layers, 3 KV heads of dim 64) in the paged KV
// cache under a RAM budget. The cache is filled with SYNTHETIC K/V (structured random rows written
// position by position, as prefill would, without running the model: an hour of prefill otherwise),
// then one MSA decode step runs over every layer (reading spilled pages through the map).
//
//   bench_kv_rss [--tokens 1048576] [--budget 2G] [--kv-type f16] [--spill-dir DIR]
//
// Prints the cache size, RAM pages, pages spilled, the decode step's time and bytes, and peak RSS
// (getrusage ru_maxrss) — with and without the budget the figures differ by the spilled bytes.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"

namespace {

double peak_rss_gib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB
}

}  // namespace

int main(int argc, char** argv) {
    int64_t n = 1 << 20;
    int64_t budget = sl::parse_byte_size("2G");
    sl::KvType type = sl::KvType::F16;
    std::string spill_dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--tokens") n = std::atoll(v.c_str());
        else if (a == "--budget") budget = sl::parse_byte_size(v);
        else if (a == "--kv-type") type = sl::parse_kv_type(v).value_or(sl::KvType::F16);
        else if (a == "--spill-dir") spill_dir = v;
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    const int n_layer = 30, n_kv = 3, hd = 64, n_head = 9;
    sl::KvCacheOptions o;
    o.type = type;
    o.budget_bytes = budget;
    o.spill_dir = spill_dir;
    sl::KvCache kv(n_layer, static_cast<int>(n), n_kv, hd, o);
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> center(static_cast<size_t>(n_kv * hd)), k(center.size()), v(center.size());
    const auto t0 = std::chrono::steady_clock::now();
    // Positions in chunks of 2048 across all layers (as prefill writes them).
    for (int64_t p0 = 0; p0 < n; p0 += 2048) {
        for (int l = 0; l < n_layer; ++l)
            for (int64_t p = p0; p < std::min(n, p0 + 2048); ++p) {
                if (p % 128 == 0)
                    for (auto& x : center) x = nd(g);
                for (size_t i = 0; i < k.size(); ++i) {
                    k[i] = center[i] + 0.5f * nd(g);
                    v[i] = nd(g);
                }
                kv.write(l, p, k.data(), v.data());
            }
        kv.set_n_past(std::min(n, p0 + 2048));
    }
    const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double after_fill = peak_rss_gib();
    // One decode step over every layer with MSA (B 128, k 16): the index is built first (that reads
    // every key once), then the timed step.
    sl::ThreadPool pool(0);
    sl::MsaAttention msa;
    std::vector<float> q(static_cast<size_t>(n_head * hd)), out(q.size());
    for (auto& x : q) x = nd(g);
    sl::AttentionCall c;
    c.pos0 = n - 1;
    c.n_tokens = 1;
    c.n_head = n_head;
    c.n_kv_head = n_kv;
    c.head_dim = hd;
    c.scale = 1.0f / 8.0f;
    c.q = q.data();
    c.out = out.data();
    for (int l = 0; l < n_layer; ++l) {
        c.layer = l;
        msa.forward(c, kv, pool);
    }
    kv.maintain();
    msa.reset_stats();
    const auto t1 = std::chrono::steady_clock::now();
    for (int l = 0; l < n_layer; ++l) {
        c.layer = l;
        msa.forward(c, kv, pool);
    }
    kv.maintain();
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    const sl::MsaStats& st = msa.stats();
    const double read = static_cast<double>(st.index_bytes + st.exact_key_bytes + st.kv_bytes);
    std::printf("%lld tokens, %s, budget %.2f GiB: cache %.2f GiB (%zu B pages), RAM %.2f GiB, %lld pages spilled; "
                "fill %.1f s\n",
                static_cast<long long>(n), sl::kv_type_name(type), static_cast<double>(budget) / (1 << 30),
                static_cast<double>(kv.bytes()) / (1 << 30), kv.page_bytes(), static_cast<double>(kv.ram_bytes()) / (1 << 30),
                static_cast<long long>(kv.pages_spilled()), fill_s);
    std::printf("MSA decode step over %d layers: %.1f ms, read %.1f MB (%.2f%% of dense's %.1f MB: index %.1f, exact keys %.1f, "
                "K/V %.1f)\n",
                n_layer, step_s * 1e3, read / 1e6, 100.0 * read / static_cast<double>(st.dense_kv_bytes),
                static_cast<double>(st.dense_kv_bytes) / 1e6, static_cast<double>(st.index_bytes) / 1e6,
                static_cast<double>(st.exact_key_bytes) / 1e6, static_cast<double>(st.kv_bytes) / 1e6);
    std::printf("peak RSS: %.2f GiB after the fill, %.2f GiB at the end (index summaries: %.2f GiB)\n", after_fill,
                peak_rss_gib(), static_cast<double>(msa.index(0)->bytes()) * n_layer / (1 << 30));
    return 0;
}
