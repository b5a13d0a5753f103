// Passkey retrieval with the default model (SmolLM2-135M-Instruct, trained on 8K): a 5-digit number
// hidden at a random depth in filler text, asked for at the end; greedy answer. REPORTS accuracy per
// (context length, attention variant) — nothing is asserted (a 135M model is a weak retriever).
//
//   bench_msa_passkey [--tokens 4096,32768] [--trials 3] [--variants dense,msa,msa-remap]
//                     [--remap-window 2048] [--topk 16] [--block 128] [--dense-layers 0] [--kv-type f16]
//                     [--seed 1] [--msa-mode block-max|mean-key|hybrid[N[dM]][/group-mean][/wN]] (the sink is always forced here)
//                     [--save DIR]
//   (--msa-mode as parse_msa_scoring reads it; the library prefill's default is kTrainingFreeMode;
//   --save: each prefilled context is saved as DIR/passkey-N-VARIANT-TRIAL.slkv, e.g. for
//   bench_depth at that depth)
// Prints per trial the prefill time, and the decode speed of the answer's tokens.
//
// Prefill of 32K tokens on a laptop CPU takes minutes per trial and variant; dense at 32K is
// quadratic (leave it out there unless you have the time).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/sampler.h"
#include "core/runtime/session.h"
#include "core/util/paths.h"

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

// Filler token ids, built from a fixed text, repeated to `n` tokens.
std::vector<int32_t> filler(const sl::Tokenizer& tok, size_t n) {
    const std::string text =
        " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
    const std::vector<int32_t> unit = tok.encode(text, false, false);
    std::vector<int32_t> out;
    while (out.size() < n) out.insert(out.end(), unit.begin(), unit.end());
    out.resize(n);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> lengths{4096};
    int trials = 3, topk = 16, block = 128, window = 2048, dense_layers = 0;
    unsigned seed = 1;
    std::vector<std::string> variants{"dense", "msa", "msa-remap"};
    sl::KvType kv_type = sl::KvType::F16;
    std::string mode = "block-max", save_dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--tokens") {
            lengths.clear();
            for (const auto& x : split(v)) lengths.push_back(std::atoi(x.c_str()));
        } else if (a == "--trials") trials = std::atoi(v.c_str());
        else if (a == "--variants") variants = split(v);
        else if (a == "--remap-window") window = std::atoi(v.c_str());
        else if (a == "--topk") topk = std::atoi(v.c_str());
        else if (a == "--dense-layers") dense_layers = std::atoi(v.c_str());
        else if (a == "--block") block = std::atoi(v.c_str());
        else if (a == "--seed") seed = static_cast<unsigned>(std::atoi(v.c_str()));
        else if (a == "--kv-type") kv_type = sl::parse_kv_type(v).value_or(sl::KvType::F16);
        else if (a == "--msa-mode") mode = v;
        else if (a == "--save") save_dir = v;
        else {
            std::fprintf(stderr, "unknown option %s\n", a.c_str());
            return 2;
        }
    }
    sl::MsaConfig base;
    try {
        sl::parse_msa_scoring(mode, base);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    }
    auto m = sl::load_model(sl::paths::default_model());
    const sl::Tokenizer& tok = *m->tokenizer;
    const std::string intro =
        "There is an important piece of information hidden inside a lot of irrelevant text. Find it and memorize "
        "it. I will quiz you about it.";
    std::mt19937 rng(seed);
    std::printf("MSA: top-k %d, block %d, sink, dense layers %d, scoring %s, remap window %d; KV %s\n", topk, block,
                dense_layers, mode.c_str(), window, sl::kv_type_name(kv_type));
    std::printf("%-8s %-10s %6s %9s %9s %9s  answers\n", "tokens", "variant", "trial", "prefill s", "decode/s", "correct");
    for (const int n : lengths) {
        std::vector<int> correct(variants.size(), 0);
        for (int trial = 0; trial < trials; ++trial) {
            const int key = std::uniform_int_distribution<int>(10000, 99999)(rng);
            const double depth = std::uniform_real_distribution<double>(0.1, 0.9)(rng);
            const std::string needle = " The pass key is " + std::to_string(key) + ". Remember it. " + std::to_string(key) +
                                       " is the pass key.";
            const std::string question = " What is the pass key? The pass key is";
            std::vector<int32_t> ids = tok.encode(intro, true, false);
            const auto nd = tok.encode(needle, false, false), q = tok.encode(question, false, false);
            const size_t fill = static_cast<size_t>(n) - ids.size() - nd.size() - q.size();
            const auto f = filler(tok, fill);
            const auto at = static_cast<size_t>(depth * static_cast<double>(fill));
            ids.insert(ids.end(), f.begin(), f.begin() + static_cast<std::ptrdiff_t>(at));
            ids.insert(ids.end(), nd.begin(), nd.end());
            ids.insert(ids.end(), f.begin() + static_cast<std::ptrdiff_t>(at), f.end());
            ids.insert(ids.end(), q.begin(), q.end());
            for (size_t vi = 0; vi < variants.size(); ++vi) {
                const std::string& v = variants[vi];
                std::unique_ptr<sl::Attention> att;
                if (v != "dense") {
                    sl::MsaConfig c = base;
                    c.top_k = topk;
                    c.block_size = block;
                    c.sink = true;
                    c.dense_layers = dense_layers;
                    if (v == "msa-remap") {
                        c.positions = sl::PositionMode::Remap;
                        c.remap_window = window;
                    }
                    att = std::make_unique<sl::MsaAttention>(c);
                }
                sl::SessionOptions so;
                so.n_ctx = n + 16;
                so.kv_type = kv_type;
                so.kv_block = block;
                sl::Session s(*m, so, std::move(att));
                const auto t0 = std::chrono::steady_clock::now();
                s.prefill(ids);
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                if (!save_dir.empty())
                    s.save(save_dir + "/passkey-" + std::to_string(n) + "-" + v + "-" + std::to_string(trial) + ".slkv");
                sl::GenerateOptions g;
                g.max_tokens = 8;
                g.sampling.greedy = true;
                g.sampling.repeat_penalty = 1.0f;
                std::string answer;
                const sl::GenerateStats gs = s.generate(g, [&](std::string_view t) {
                    answer += t;
                    return true;
                });
                const bool ok = answer.find(std::to_string(key)) != std::string::npos;
                correct[vi] += ok;
                for (auto& ch : answer)
                    if (ch == '\n') ch = ' ';
                std::printf("%-8d %-10s %6d %9.1f %9.2f %9s  key %d at %.0f%%: \"%s\"\n", n, v.c_str(), trial, secs,
                            gs.generated_tokens / std::max(gs.decode_seconds, 1e-9), ok ? "yes" : "no", key, depth * 100, answer.c_str());
                std::fflush(stdout);
            }
        }
        for (size_t vi = 0; vi < variants.size(); ++vi)
            std::printf("== %d tokens, %s: %d of %d correct\n", n, variants[vi].c_str(), correct[vi], trials);
    }
    return 0;
}
