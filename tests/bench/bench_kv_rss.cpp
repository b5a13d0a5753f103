// Peak RSS holding a long SmolLM2-shaped context (30 layers, 3 KV heads of dim 64, 9 query heads) in
// the paged KV cache under a RAM budget. The cache is filled with SYNTHETIC K/V (structured random
// rows written position by position, as prefill would, without running the model: hours of prefill
// otherwise), then decode steps run over every layer for each attention mode in turn (reading spilled
// pages through the map).
//
//   bench_kv_rss [--tokens 1048576] [--budget 2G] [--kv-type f16] [--spill-dir DIR]
//                [--modes hybrid,block-max,dense] [--steps 2]
//
// Modes: block-max, mean-key, hybrid (MSA, B 128, k 16) and dense. Each mode's first step also builds
// the MSA block index (it reads every key once); the later steps are the steady decode cost. Dense
// reads every K/V byte of the cache per step.
//
// Prints the cache size, RAM pages, pages and bytes spilled, the fill time, and per mode each step's
// time, the bytes it read (and the share of dense's), the page reads served from the spill map (read
// calls: each reads one KV head's rows of a page, so a page may count several times), and the mode's
// peak RSS. Peak RSS: VmHWM of /proc/self/status, reset (clear_refs 5) before each mode so
// each mode has its own peak, and getrusage ru_maxrss (on Linux the same high-water mark: the reset
// lowers it too, so the process-wide peak is the largest figure printed). Mapped
// spill pages count as RSS while resident; the cache drops them every budget/4 bytes read.
// Linux only (the /proc figures print -1 elsewhere).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double ru_maxrss_gib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB
}

// A "Vm...:  N kB" field of /proc/self/status in GiB; -1 when unavailable.
double proc_status_gib(const std::string& field) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(field + ":", 0) == 0) return std::atof(line.c_str() + field.size() + 1) / (1024.0 * 1024.0);
    return -1.0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false when the kernel refuses.
bool reset_peak() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.flush();
    return static_cast<bool>(f);
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

// Fast synthetic noise: a fixed pool of N(0,1) samples read at pseudo-random offsets (xorshift), so
// the fill of a million positions is bound by the cache writes, not by the normal generator.
class Noise {
public:
    explicit Noise(unsigned seed) : pool_(size_t{1} << 22) {
        std::mt19937 g(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& x : pool_) x = nd(g);
    }
    // n consecutive pool samples from a random start (n <= 4096).
    const float* next(size_t n) {
        s_ ^= s_ << 13;
        s_ ^= s_ >> 7;
        s_ ^= s_ << 17;
        return pool_.data() + (s_ % (pool_.size() - n));
    }

private:
    std::vector<float> pool_;
    uint64_t s_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace

int main(int argc, char** argv) {
    int64_t n = 1 << 20;
    int64_t budget = sl::parse_byte_size("2G");
    sl::KvType type = sl::KvType::F16;
    std::string spill_dir;
    std::vector<std::string> modes{"hybrid", "block-max", "dense"};
    int steps = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--tokens") n = std::atoll(v.c_str());
        else if (a == "--budget") budget = sl::parse_byte_size(v);
        else if (a == "--kv-type") type = sl::parse_kv_type(v).value_or(sl::KvType::F16);
        else if (a == "--spill-dir") spill_dir = v;
        else if (a == "--modes") modes = split(v);
        else if (a == "--steps") steps = std::max(1, std::atoi(v.c_str()));
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    for (const auto& m : modes)
        if (m != "dense" && m != "block-max" && m != "mean-key" && m != "hybrid") {
            std::fprintf(stderr, "unknown mode %s (block-max, mean-key, hybrid or dense)\n", m.c_str());
            return 2;
        }
    const int n_layer = 30, n_kv = 3, hd = 64, n_head = 9;
    sl::KvCacheOptions o;
    o.type = type;
    o.budget_bytes = budget;
    o.spill_dir = spill_dir;
    sl::KvCache kv(n_layer, static_cast<int>(n), n_kv, hd, o);
    Noise noise(1);
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Keys: a per-(layer, block) center plus noise of scale 0.5 (so blocks differ, as real keys do);
    // values: noise.
    std::vector<float> center(static_cast<size_t>(n_layer) * static_cast<size_t>(n_kv * hd)), k(static_cast<size_t>(n_kv * hd));
    const auto t0 = std::chrono::steady_clock::now();
    // Positions in chunks of 2048 across all layers (as prefill writes them).
    for (int64_t p0 = 0; p0 < n; p0 += 2048) {
        for (int l = 0; l < n_layer; ++l) {
            float* c = center.data() + static_cast<size_t>(l) * k.size();
            for (int64_t p = p0; p < std::min(n, p0 + 2048); ++p) {
                if (p % 128 == 0)
                    for (size_t i = 0; i < k.size(); ++i) c[i] = nd(g);
                const float* kn = noise.next(k.size());
                for (size_t i = 0; i < k.size(); ++i) k[i] = c[i] + 0.5f * kn[i];
                kv.write(l, p, k.data(), noise.next(k.size()));
            }
        }
        kv.set_n_past(std::min(n, p0 + 2048));
    }
    const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double spilled = static_cast<double>(kv.pages_spilled()) * static_cast<double>(kv.page_bytes());
    std::printf("%lld tokens, %s, budget %.2f GiB: cache %.2f GiB (%zu B pages), RAM %.2f GiB, %lld pages spilled "
                "(%.2f GiB); fill %.1f s\n",
                static_cast<long long>(n), sl::kv_type_name(type), static_cast<double>(budget) / kGiB,
                static_cast<double>(kv.bytes()) / kGiB, kv.page_bytes(), static_cast<double>(kv.ram_bytes()) / kGiB,
                static_cast<long long>(kv.pages_spilled()), spilled / kGiB, fill_s);
    std::printf("peak RSS after the fill: VmHWM %.2f GiB, ru_maxrss %.2f GiB (VmRSS now %.2f GiB)\n", proc_status_gib("VmHWM"),
                ru_maxrss_gib(), proc_status_gib("VmRSS"));
    std::fflush(stdout);

    sl::ThreadPool pool(0);
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
    // Bytes dense attention reads per step: every K and V row of every layer.
    const double dense_bytes = static_cast<double>(n) * n_layer * n_kv * hd * 2.0 * static_cast<double>(sl::kv_type_size(type));
    for (const auto& mode : modes) {
        const bool hwm_reset = reset_peak();
        std::unique_ptr<sl::Attention> att;
        sl::MsaAttention* msa = nullptr;
        if (mode == "dense") {
            att = std::make_unique<sl::DenseAttention>();
        } else {
            sl::MsaConfig cfg;  // B 128, k 16
            cfg.scoring = mode == "hybrid" ? sl::BlockScoring::Hybrid
                          : mode == "mean-key" ? sl::BlockScoring::MeanKey
                                               : sl::BlockScoring::BlockMax;
            auto m = std::make_unique<sl::MsaAttention>(cfg);
            msa = m.get();
            att = std::move(m);
        }
        for (int s = 0; s < steps; ++s) {
            if (msa) msa->reset_stats();
            const int64_t mapped0 = kv.mapped_reads();
            const auto t1 = std::chrono::steady_clock::now();
            for (int l = 0; l < n_layer; ++l) {
                c.layer = l;
                att->forward(c, kv, pool);
            }
            kv.maintain();
            const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
            const long long mapped = static_cast<long long>(kv.mapped_reads() - mapped0);
            double read = dense_bytes;
            char detail[256] = "";
            if (msa) {
                const sl::MsaStats& st = msa->stats();
                read = static_cast<double>(st.index_bytes + st.exact_key_bytes + st.kv_bytes);
                std::snprintf(detail, sizeof detail, " (index %.1f, exact keys %.1f, K/V %.1f MB)",
                              static_cast<double>(st.index_bytes) / 1e6, static_cast<double>(st.exact_key_bytes) / 1e6,
                              static_cast<double>(st.kv_bytes) / 1e6);
            }
            std::printf("%-9s step %d%s over %d layers: %.1f ms, read %.1f MB = %.2f%% of dense's %.1f MB%s; "
                        "%lld page reads served by the spill map\n",
                        mode.c_str(), s, msa && s == 0 ? " (builds the index)" : "", n_layer, step_s * 1e3, read / 1e6,
                        100.0 * read / dense_bytes, dense_bytes / 1e6, detail, mapped);
            std::fflush(stdout);
        }
        const double index_gib = msa && msa->index(0) ? static_cast<double>(msa->index(0)->bytes()) * n_layer / kGiB : 0.0;
        std::printf("%-9s peak RSS: VmHWM %.2f GiB%s, ru_maxrss %.2f GiB, VmRSS now %.2f GiB (index summaries %.2f GiB)\n",
                    mode.c_str(), proc_status_gib("VmHWM"), hwm_reset ? " (this mode)" : " (not reset: process peak)",
                    ru_maxrss_gib(), proc_status_gib("VmRSS"), index_gib);
        std::fflush(stdout);
    }
    return 0;
}
