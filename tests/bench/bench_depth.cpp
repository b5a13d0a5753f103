// End-to-end SmolLM2 speed at depth, dense vs MSA, on a real long context: restores a saved context
// (a library prefill's .slkv: real text, real activations; `sightline-cli prefill --max-tokens N`
// makes one), then for each attention mode, side by side in one run:
//   - warms up: one token appended (the MSA builds its block index of the restored keys: a
//     one-time cost after a restore, timed apart as "index build"), then truncated back;
//   - prefill: the context's own last `chunk` tokens appended again at its end (tokens/s of
//     prefill at that depth);
//   - decode: `decode` single tokens after that (tokens/s of decode at that depth);
//   - truncates back to the saved context.
// Whole-context prefill throughput is the library prefill's own figure (`prefill` prints it).
//
//   bench_depth --context FILE.slkv [--model M] [--chunk 256] [--decode 32] [--threads N]
//               [--modes dense,hybrid,block-max,mean-key] [--positions auto|original|remap]
//   (an MSA mode is any parse_msa_scoring name: /group-mean, the group's mean query as the index
//   query, default head-max; hybridN, a shortlist of N x top-k blocks, default 4; hybridNdM, M x in
//   decode; /wN, a local window of N blocks; /pN[xM], growth to N% of the estimated mass; the library
//   prefill's is kTrainingFreeMode)
//
// MSA as the library prefill runs it: blocks of 128, top-k 16; positions
// remapped (window min(4096, n_ctx_train / 2)) when the context is longer than the model's training
// context (auto). Prints one line per mode and a ratio against dense.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/paths.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        const size_t e = s.find(',', b);
        out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = sl::paths::default_model().string(), context, positions = "auto";
    int threads = 0, chunk = 256, decode = 32;
    std::vector<std::string> modes = {"dense", "hybrid", "block-max"};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool v = i + 1 < argc;
        if (a == "--model" && v) model = argv[++i];
        else if (a == "--context" && v) context = argv[++i];
        else if (a == "--threads" && v) threads = std::atoi(argv[++i]);
        else if (a == "--chunk" && v) chunk = std::atoi(argv[++i]);
        else if (a == "--decode" && v) decode = std::atoi(argv[++i]);
        else if (a == "--modes" && v) modes = split(argv[++i]);
        else if (a == "--positions" && v) positions = argv[++i];
        else {
            std::fprintf(stderr, "bench_depth: unknown or incomplete argument %s\n", a.c_str());
            return 2;
        }
    }
    if (context.empty() || chunk <= 0 || decode < 0) {
        std::fprintf(stderr, "usage: bench_depth --context FILE.slkv [--chunk 256] [--decode 32] [--modes ...]\n");
        return 2;
    }
    try {
        auto m = sl::load_model(model);
        const int64_t n_train = m->model->config().n_ctx_train;
        double dense_prefill = 0, dense_decode = 0;
        for (const std::string& mode : modes) {
            std::unique_ptr<sl::Attention> att;
            sl::MsaConfig cfg;
            if (mode == "dense") {
                att = std::make_unique<sl::DenseAttention>();
            } else {
                sl::parse_msa_scoring(mode, cfg);
                att = std::make_unique<sl::MsaAttention>(cfg);  // positions set below, once the depth is known
            }
            const std::vector<int32_t> saved = sl::saved_context_tokens(context);
            const auto n = static_cast<int64_t>(saved.size());
            if (n == 0) throw std::runtime_error(context + ": not a readable saved context");
            if (n <= chunk) throw std::runtime_error(context + ": holds " + std::to_string(n) + " tokens, not more than the chunk");
            if (mode != "dense") {
                const bool remap = positions == "remap" || (positions == "auto" && n_train > 0 && n + chunk + decode > n_train);
                if (remap) {
                    cfg.positions = sl::PositionMode::Remap;
                    cfg.remap_window = static_cast<int>(std::min<int64_t>(4096, n_train > 0 ? n_train / 2 : 4096));
                }
                att = std::make_unique<sl::MsaAttention>(cfg);
            }
            sl::SessionOptions so;
            so.n_threads = threads;
            so.device = "cpu";
            so.n_batch = 256;
            so.n_ctx = static_cast<int>(n + chunk + decode + 8);
            sl::Session s(*m, so, std::move(att));
            s.restore(context);
            const std::string sig = s.attention().signature();
            const int32_t one_tok[1] = {saved.back()};
            double t = now_s();
            s.prefill(one_tok);
            const double warm = now_s() - t;
            s.truncate(n);
            const std::vector<int32_t> again(saved.end() - chunk, saved.end());
            t = now_s();
            s.prefill(again);
            const double prefill_s = now_s() - t;
            t = now_s();
            for (int i = 0; i < decode; ++i) {
                const int32_t tok[1] = {saved[static_cast<size_t>(n - decode + i)]};
                s.prefill(tok);
            }
            const double decode_s = now_s() - t;
            const double ptps = chunk / prefill_s, dtps = decode > 0 ? decode / decode_s : 0;
            if (mode == "dense") {
                dense_prefill = ptps;
                dense_decode = dtps;
            }
            std::printf("depth %lld  %-52s index build %6.2f s  prefill %4d tok at depth: %7.2f tok/s%s  decode %3d: "
                        "%7.2f tok/s%s\n",
                        static_cast<long long>(n), sig.c_str(), warm, chunk, ptps,
                        dense_prefill > 0 && mode != "dense" ? (" (" + std::to_string(ptps / dense_prefill).substr(0, 5) + "x dense)").c_str() : "",
                        decode, dtps,
                        dense_decode > 0 && mode != "dense" ? (" (" + std::to_string(dtps / dense_decode).substr(0, 5) + "x dense)").c_str() : "");
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_depth: %s\n", e.what());
        return 1;
    }
    return 0;
}
