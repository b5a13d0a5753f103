// Sentence embeddings with all-MiniLM-L6-v2 (core/embed/sentence_embedder.h): sentences per second
// for sentences of 32 and 128 tokens ([CLS] and [SEP] included), one at a time and in batches of
// 32, at 1 thread and at every core; and the WordPiece tokenizer's speed alone. Needs the model
// that scripts/setup.sh installs under <cache>/models/all-MiniLM-L6-v2 (skips with that message
// otherwise).
#include <benchmark/benchmark.h>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/embed/sentence_embedder.h"

namespace {

// One embedder per thread count, opened once.
sl::SentenceEmbedder* embedder(int threads) {
    static std::map<int, std::unique_ptr<sl::SentenceEmbedder>> cache;
    auto& e = cache[threads];
    if (!e && std::filesystem::exists(sl::SentenceEmbedder::default_dir() / "model.safetensors")) {
        sl::SentenceEmbedder::Options o;
        o.n_threads = threads;
        e = sl::SentenceEmbedder::open(sl::SentenceEmbedder::default_dir().string(), o);
    }
    return e.get();
}

// A sentence of exactly `tokens` tokens with [CLS]/[SEP], varied by `seed` (plain English words,
// one token each).
std::string sentence(const sl::WordpieceTokenizer& tok, int tokens, int seed) {
    static const char* words[] = {
        "the",   "model", "reads",    "every", "page",    "of",    "a",     "long", "report",
        "and",   "cites", "slide",    "where", "answer",  "was",   "found", "in",   "data",
        "video", "time",  "question", "about", "results", "shows", "table"};
    std::string s;
    for (int i = 0; i < tokens - 2; ++i) s += std::string(words[(i * 7 + seed * 13) % 25]) + " ";
    if (tok.encode(s, 100000).size() != static_cast<size_t>(tokens)) return {};
    return s;
}

int threads_arg(int64_t a) {
    return a > 0 ? static_cast<int>(a)
                 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Args: tokens per sentence, batch size, threads (0 = every core).
void BM_Embed(benchmark::State& state) {
    const int tokens = static_cast<int>(state.range(0));
    const auto batch = static_cast<size_t>(state.range(1));
    sl::SentenceEmbedder* e = embedder(threads_arg(state.range(2)));
    if (!e) {
        state.SkipWithError("all-MiniLM-L6-v2 is missing: run scripts/setup.sh");
        return;
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < batch; ++i)
        texts.push_back(sentence(e->tokenizer(), tokens, static_cast<int>(i)));
    if (texts[0].empty()) {
        state.SkipWithError("could not build a sentence of that many tokens");
        return;
    }
    for (auto _ : state) {
        auto out = e->embed(std::span<const std::string>(texts));
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
    state.counters["sentences/s"] = benchmark::Counter(
        static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
    state.counters["tokens/s"] = benchmark::Counter(
        static_cast<double>(state.iterations() * batch * tokens), benchmark::Counter::kIsRate);
    state.counters["threads"] = threads_arg(state.range(2));
}

void BM_Tokenize(benchmark::State& state) {
    sl::SentenceEmbedder* e = embedder(1);
    if (!e) {
        state.SkipWithError("all-MiniLM-L6-v2 is missing: run scripts/setup.sh");
        return;
    }
    std::string text;
    for (int i = 0; i < 40; ++i)
        text +=
            "R is an integrated suite of software facilities for data manipulation, calculation "
            "and "
            "graphical display. Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e. ";
    size_t n = 0;
    for (auto _ : state) {
        const auto ids = e->tokenizer().encode_pieces(text);
        n += ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
    state.counters["tokens/s"] =
        benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_Embed)
    ->ArgNames({"tokens", "batch", "threads"})
    ->Args({32, 1, 1})
    ->Args({32, 32, 1})
    ->Args({128, 1, 1})
    ->Args({128, 32, 1})
    ->Args({32, 1, 0})
    ->Args({32, 32, 0})
    ->Args({128, 1, 0})
    ->Args({128, 32, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Tokenize)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
