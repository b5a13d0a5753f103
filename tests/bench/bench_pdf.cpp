// PDF text + boxes throughput on refman.pdf (2,415 pages): our reader (Poppler, lines grouped
// into blocks, boxes normalized, outline, links) side by side with `pdftotext -bbox-layout` on the
// same file in the same run, as pages/s and their ratio (goal: ours >= 0.5x), and peak RSS.
// Ours runs twice: on one thread (like for like with pdftotext) and with its default of one page
// thread per core (each its own Poppler document). One iteration each (a whole-file read takes
// tens of seconds); manual time.
#include <benchmark/benchmark.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>

#include "core/util/assets.h"
#include "ingest/ingest_context.h"
#include "ingest/pdf/pdf_reader.h"

extern char** environ;

namespace {

const std::string& refman_path() {
    static const std::string p = sl::assets::path_of("samples/pdf/refman.pdf").string();
    return p;
}

double ours_pages_per_s[2] = {0, 0}, tool_pages_per_s = 0;  // [0]: 1 thread, [1]: default
long ours_peak_kb = 0;

void BM_pdf_reader_refman(benchmark::State& state) {
    if (!std::filesystem::is_regular_file(refman_path())) {
        state.SkipWithError("refman.pdf missing: run scripts/setup.sh");
        return;
    }
    const bool one_thread = state.range(0) == 1;  // else the reader's default: a thread per core
    unsetenv("SIGHTLINE_PDF_THREADS");
    const auto reader = sl::ingest::make_pdf_reader();
    size_t pages = 0, chars = 0;
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        sl::ingest::IngestOptions opt;  // defaults: OCR on (no page needs it), no renders
        if (one_thread) opt.page_threads = 1;
        sl::ingest::IngestContext ctx(opt);
        const sl::doc::Document d = reader->read(refman_path(), ctx);
        const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        state.SetIterationTime(dt.count());
        seconds += dt.count();
        pages += d.units.size();
        chars += d.text_chars();
        benchmark::DoNotOptimize(d.units.data());
    }
    double& pps = ours_pages_per_s[one_thread ? 0 : 1];
    pps = static_cast<double>(pages) / seconds;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    ours_peak_kb = ru.ru_maxrss;
    state.counters["pages/s"] = pps;
    state.counters["chars"] = static_cast<double>(chars) / static_cast<double>(state.iterations());
    state.counters["peak_rss_MiB"] = static_cast<double>(ours_peak_kb) / 1024.0;
}

void BM_pdftotext_bbox_layout_refman(benchmark::State& state) {
    if (!std::filesystem::is_regular_file(refman_path())) {
        state.SkipWithError("refman.pdf missing: run scripts/setup.sh");
        return;
    }
    double seconds = 0;
    for (auto _ : state) {
        std::string a0 = "pdftotext", a1 = "-bbox-layout", a2 = refman_path(), a3 = "/dev/null";
        char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
        const auto t0 = std::chrono::steady_clock::now();
        pid_t pid = 0;
        int status = 0;
        if (posix_spawnp(&pid, "pdftotext", nullptr, nullptr, argv, environ) != 0 ||
            waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            state.SkipWithError("pdftotext (poppler-utils) failed: run scripts/setup.sh");
            return;
        }
        const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
        state.SetIterationTime(dt.count());
        seconds += dt.count();
    }
    tool_pages_per_s = 2415.0 * static_cast<double>(state.iterations()) / seconds;
    rusage ru{};
    getrusage(RUSAGE_CHILDREN, &ru);
    state.counters["pages/s"] = tool_pages_per_s;
    state.counters["peak_rss_MiB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}

}  // namespace

BENCHMARK(BM_pdftotext_bbox_layout_refman)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK(BM_pdf_reader_refman)
    ->ArgName("one_thread")
    ->Arg(1)
    ->Arg(0)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (tool_pages_per_s > 0) {
        std::printf("refman.pdf text + boxes, pdftotext -bbox-layout: %.1f pages/s\n",
                    tool_pages_per_s);
        const char* names[2] = {"1 thread", "thread per core"};
        for (int i = 0; i < 2; ++i) {
            if (ours_pages_per_s[i] <= 0) continue;
            std::printf("  ours, %-15s: %.1f pages/s, ratio %.2fx (goal >= 0.5x)\n", names[i],
                        ours_pages_per_s[i], ours_pages_per_s[i] / tool_pages_per_s);
        }
        std::printf("  our peak RSS: %.0f MiB\n", static_cast<double>(ours_peak_kb) / 1024.0);
    }
    return 0;
}
