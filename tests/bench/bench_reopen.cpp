// Time to the first token of a question after reopening a saved context — Session::restore, then
// the question's tokens prefilled, as `ask` does over a library prefill — the way a restore was
// (every page hashed up front, MSA's block index built from every key) vs now (headers, tokens and
// the block summaries read; pages checked as they are first read: with MSA a few blocks), side by
// side, alternating, in one run. A fresh session each time; the same attention as the library
// prefill (choose_attention). --cold evicts the file from the page cache before each reopening
// (posix_fadvise DONTNEED: a question in a new process a while after the prefill); without it the
// file stays cached (a question right after another).
//
//   bench_reopen --context FILE.slkv [--model M] [--reps 5] [--threads N] [--cold]
//
// Prints per variant the median seconds to the first token, the pages read of all, and the ratio.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/ask/attention_choice.h"
#include "core/kvcache/kv_file.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/mapped_file.h"
#include "core/util/paths.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void evict(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = sl::paths::default_model().string(), context;
    int threads = 0, reps = 5;
    bool cold = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool v = i + 1 < argc;
        if (a == "--model" && v) model = argv[++i];
        else if (a == "--context" && v) context = argv[++i];
        else if (a == "--threads" && v) threads = std::atoi(argv[++i]);
        else if (a == "--reps" && v) reps = std::atoi(argv[++i]);
        else if (a == "--cold") cold = true;
        else {
            std::fprintf(stderr, "bench_reopen: unknown or incomplete argument %s\n", a.c_str());
            return 2;
        }
    }
    if (context.empty() || reps <= 0) {
        std::fprintf(stderr, "usage: bench_reopen --context FILE.slkv [--model M] [--reps 5] [--threads N] [--cold]\n");
        return 2;
    }
    try {
        auto m = sl::load_model(model);
        const std::vector<int32_t> saved = sl::saved_context_tokens(context);
        const auto n = static_cast<int64_t>(saved.size());
        if (n == 0) throw std::runtime_error(context + ": not a readable saved context");
        const std::vector<int32_t> question = m->tokenizer->encode(
            "Which function reads a data frame from a file, and how are missing values marked?", false, false);
        const sl::AttentionChoice att = sl::choose_attention(m->model->config(), n + 600, sl::Effort::Medium);
        sl::SessionOptions so;
        so.n_threads = threads;
        so.device = "cpu";
        so.n_ctx = static_cast<int>(n + 600);
        const sl::KvFileBase base = sl::kv_file_base(context);
        const std::string base_path =
            base.empty() ? std::string() : (std::filesystem::path(context).parent_path() / base.name).string();
        {
            const sl::MappedFile map(context);
            const sl::KvFileContents c = sl::parse_kv_file(map.bytes(), context, sl::KvVerify::Headers);
            int with = 0;
            for (int l = 0; l < static_cast<int>(c.info.n_layer); ++l) with += c.has_summaries(l) ? 1 : 0;
            std::printf("%s: %lld tokens, %.2f GB, block summaries for %d of %u layers; attention %s; %s page cache\n",
                        context.c_str(), static_cast<long long>(n),
                        static_cast<double>(std::filesystem::file_size(context)) / 1e9, with, c.info.n_layer,
                        att.mode.c_str(), cold ? "cold (evicted before each reopening)" : "warm");
        }
        std::vector<double> t_eager, t_lazy;
        int64_t pages = 0, read_lazy = 0, imported = 0;
        for (int r = 0; r < reps; ++r)
            for (const bool eager : {true, false}) {
                if (cold) {
                    evict(context);
                    if (!base_path.empty()) evict(base_path);
                }
                sl::Session s(*m, so, std::make_unique<sl::MsaAttention>(att.config));
                const double t0 = now_s();
                if (eager) {  // what a restore did: every page hashed before anything else
                    const sl::MappedFile map(context);
                    sl::parse_kv_file(map.bytes(), context, sl::KvVerify::Full);
                    if (!base_path.empty()) {
                        const sl::MappedFile bm(base_path);
                        sl::parse_kv_file(bm.bytes(), base_path, sl::KvVerify::Full);
                    }
                }
                s.restore(context);
                if (eager) s.attention().reset_state();  // and the block index built from every key
                const int64_t before = s.kv_cache().unchecked_pages();
                s.prefill(question);
                const double dt = now_s() - t0;
                (eager ? t_eager : t_lazy).push_back(dt);
                if (!eager) {
                    pages = before;
                    read_lazy = before - s.kv_cache().unchecked_pages();
                    imported = dynamic_cast<sl::MsaAttention&>(s.attention()).stats().imported_indexes;
                }
            }
        const double e = median(t_eager), l = median(t_lazy);
        std::printf("before (pages hashed up front, index from the keys): %7.3f s to the first token (median of %d)\n", e, reps);
        std::printf("now    (pages checked when read, index from the file): %7.3f s to the first token; %lld of %lld pages "
                    "read, %lld layers' index imported\n",
                    l, static_cast<long long>(read_lazy), static_cast<long long>(pages), static_cast<long long>(imported));
        std::printf("ratio before / now: %.2fx\n", l > 0 ? e / l : 0.0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_reopen: %s\n", e.what());
        return 1;
    }
    return 0;
}
