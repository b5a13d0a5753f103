// End-to-end engine speed on a real model: prefill and decode tokens/s at several context sizes,
// plus model load time and peak RSS. Prints one JSON object per context size, for
// tests/bench/engine_vs_llamacpp.py, which runs llama.cpp on the same file and threads beside it.
//
//   bench_engine [--model M] [--threads N] [--ctx 128,512,4096] [--decode 32]
//                [--attention dense|native|native-brute]
//
// --attention native runs the file's own MSA indexer (MiniMax-M3 style; tests/bench/m3_stack.sh
// compares it with dense on a random-weight M3 layer stack at 32K); native-brute the same with
// every index key scored (no Quest pruning: the same selections).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/paths.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = sl::paths::default_model().string();
    int threads = 0, decode = 32;
    std::string attention = "dense";
    std::vector<int> ctxs = {128, 512, 4096};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool v = i + 1 < argc;
        if (a == "--model" && v) model = argv[++i];
        else if (a == "--threads" && v) threads = std::atoi(argv[++i]);
        else if (a == "--decode" && v) decode = std::atoi(argv[++i]);
        else if (a == "--attention" && v) attention = argv[++i];
        else if (a == "--ctx" && v) {
            ctxs.clear();
            for (char* s = std::strtok(argv[++i], ","); s; s = std::strtok(nullptr, ",")) ctxs.push_back(std::atoi(s));
        }
    }
    try {
        const double t0 = now_s();
        auto m = sl::load_model(model);
        // Fault the mapped weights in as part of the load, as llama.cpp does (it maps with
        // MAP_POPULATE and counts that in its load time): otherwise the first context size's
        // prefill pays for them (the 1B file: ~5 % of a 512-token prefill).
        {
            const auto bytes = m->file.bytes();
            volatile uint8_t sink = 0;
            for (size_t i = 0; i < bytes.size(); i += 4096) sink = static_cast<uint8_t>(sink + bytes[i]);
        }
        const double load_s = now_s() - t0;
        const int nv = m->model->config().n_vocab;
        for (int ctx : ctxs) {
            // Deterministic pseudo-text: token ids spread over the vocabulary.
            std::vector<int32_t> prompt(static_cast<size_t>(ctx));
            for (int i = 0; i < ctx; ++i) prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % nv);
            sl::SessionOptions so;
            so.n_ctx = ctx + decode + 8;
            so.n_threads = threads;
            so.n_batch = 512;
            std::unique_ptr<sl::Attention> att;
            if (attention == "native" || attention == "native-brute") {
                sl::MsaConfig native = sl::native_msa_config(m->model->config(), {});
                native.prune = attention == "native";
                so.kv_block = native.block_size;
                att = std::make_unique<sl::MsaAttention>(native);
            } else if (attention != "dense") {
                throw std::runtime_error("--attention " + attention + ": dense, native or native-brute");
            }
            sl::Session s(*m, so, std::move(att));
            const double p0 = now_s();
            s.prefill(prompt);
            const double prefill_s = now_s() - p0;
            const double d0 = now_s();
            for (int i = 0; i < decode; ++i) {
                const int32_t one[1] = {static_cast<int32_t>((i * 31 + 7) % nv)};
                s.prefill(one);
            }
            const double decode_s = now_s() - d0;
            std::printf("{\"engine\": \"sightline\", \"attention\": \"%s\", \"ctx\": %d, \"threads\": %d, \"prefill_tok_s\": %.2f, "
                        "\"decode_tok_s\": %.2f, \"load_s\": %.3f, \"peak_rss_mib\": %.1f}\n",
                        attention.c_str(), ctx, s.pool().size(), ctx / prefill_s, decode / decode_s, load_s, peak_rss_mib());
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_engine: %s\n", e.what());
        return 1;
    }
    return 0;
}
