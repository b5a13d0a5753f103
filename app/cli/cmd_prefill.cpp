// `sightline-cli prefill [--library DIR] [--max-tokens N] [--save-every N] [--device auto|cpu|cuda]
// [--device-kv-budget SIZE] [--kv-budget SIZE]`: the progressive
// prefill of the whole library as one long context (app/common/library_prefill.h: MSA, block 128,
// top-k 16), saved after every chunk into the library's kv/ folder and recorded there (partial,
// then complete); `ask` answers from it, complete or not. Progress and ETA
// go to stderr; Ctrl-C stops after the chunk in flight, which is saved; running it again resumes
// where the file ends (core/prefill/progressive_prefill.h). A library larger than --max-tokens
// (default 131072) keeps pages spread over each document (the budget planner, no question).
// --device-kv-budget (on the GPU) keeps that much of the K/V in device memory, the rest in pinned
// host memory; --kv-budget caps that host memory (and, on the CPU, the RAM of the K/V pages): the
// chunks already saved leave the GPU without a copy past it, read back from the saved file.
// --ids-out FILE: writes the context's token ids (int32 in the machine's byte order) to FILE and
// prefills nothing (tests/gpu/pack.sh: the sample library's context for the device's end-to-end
// rows); written to FILE.tmp and renamed, so a failed write leaves no partial FILE.
#include <QStringList>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/ask/library_context.h"
#include "core/kvcache/kv_cache.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace {

std::atomic<bool> g_interrupted{false};
void on_prefill_interrupt(int) { g_interrupted.store(true); }

const char* kUsage =
    "usage: sightline-cli prefill [--library DIR] [--max-tokens N] [--save-every N] [--device auto|cpu|cuda] "
    "[--device-kv-budget SIZE] [--kv-budget SIZE] [--ids-out FILE]\n";

int usage() {
    sl::cli::err(kUsage);
    return 2;
}

std::string eta_text(double s) {
    if (s < 0) return "?";
    char buf[32];
    const int t = static_cast<int>(s + 0.5);
    std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    return buf;
}

int run(const QStringList& args) {
    std::filesystem::path dir = sl::Library::default_dir();
    sl::LibraryPrefillOptions po;
    po.progress_interval = 0.5;
    std::filesystem::path ids_out;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (i + 1 >= args.size()) return usage();
        if (a == QLatin1String("--library")) dir = sl::arg_bytes(args[++i]);
        else if (a == QLatin1String("--max-tokens")) po.max_tokens = args[++i].toLongLong();
        else if (a == QLatin1String("--save-every")) po.save_every = args[++i].toLongLong();
        else if (a == QLatin1String("--device")) po.device = args[++i].toStdString();
        else if (a == QLatin1String("--ids-out")) {
            ids_out = sl::arg_bytes(args[++i]);
            if (ids_out.empty()) return usage();
        }
        else if (a == QLatin1String("--device-kv-budget") || a == QLatin1String("--kv-budget")) {
            const bool device = a == QLatin1String("--device-kv-budget");
            try {
                (device ? po.device_kv_budget_bytes : po.kv_budget_bytes) = sl::parse_byte_size(args[++i].toStdString());
            } catch (const sl::Error& e) {
                sl::cli::err("sightline-cli prefill: " + a.toStdString() + ": " + e.what() + "\n");
                return usage();
            }
        } else return usage();
    }
    if (po.max_tokens < 1024 || po.save_every < 1 || !sl::cli::valid_device(po.device)) return usage();

    sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
    const auto model = sl::load_model(sl::paths::default_model());
    if (!ids_out.empty()) {
        const sl::LibraryContext c = sl::library_context(lib, *model, po.max_tokens);
        const std::vector<int32_t>& t = c.stream.tokens;
        const std::filesystem::path tmp = ids_out.string() + ".tmp";
        std::FILE* f = std::fopen(tmp.c_str(), "wb");
        bool ok = f && std::fwrite(t.data(), sizeof(int32_t), t.size(), f) == t.size();
        const int err = errno;
        if (f && std::fclose(f) != 0) ok = false;
        std::error_code ec;
        if (ok) std::filesystem::rename(tmp, ids_out, ec);
        if (!ok || ec) {
            std::filesystem::remove(tmp, ec);
            throw sl::Error(ids_out.string() + ": cannot write the token ids (" + std::strerror(err ? err : EIO) + ")");
        }
        sl::cli::out(c.plan.to_text());
        sl::cli::out(std::to_string(t.size()) + " token ids written to " + ids_out.string() + "\n");
        return 0;
    }
    sl::LibraryPrefill prefill(lib, *model, po);
    const std::string& path = prefill.context().path;
    sl::cli::out(prefill.context().plan.to_text());
    sl::cli::out("Device: " + prefill.device_reason() + "\n");

    std::signal(SIGINT, on_prefill_interrupt);
    prefill.start();
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    int last_decile = -1;
    while (prefill.running()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (g_interrupted.load()) prefill.cancel();
        const sl::PrefillStatus st = prefill.status();
        const double pct = st.total ? 100.0 * static_cast<double>(st.done) / static_cast<double>(st.total) : 100.0;
        // A line rewritten in place on a terminal; into a log, one line per 10%.
        const int decile = static_cast<int>(pct / 10);
        if (tty || decile != last_decile) {
            last_decile = decile;
            char line[200];
            std::snprintf(line, sizeof line, "%sprefill %lld / %lld tokens (%.0f%%), %.0f tok/s, ETA %s%s", tty ? "\r" : "",
                          static_cast<long long>(st.done), static_cast<long long>(st.total), pct, st.tokens_per_second,
                          eta_text(st.eta_seconds).c_str(), tty ? "   " : "\n");
            sl::cli::err(line);
        }
        prefill.record();  // the library records how far the file is (a reader sees a valid prefix)
    }
    prefill.wait();
    std::signal(SIGINT, SIG_DFL);
    prefill.record();
    const sl::PrefillStatus st = prefill.status();
    if (tty) sl::cli::err("\n");
    if (!st.note.empty()) sl::cli::out("note: " + st.note + "\n");
    if (!st.error.empty()) throw sl::Error(st.error);
    char done[300];
    std::snprintf(done, sizeof done, "%s: %lld of %lld tokens saved in %s (resumed from %lld; %.1f s, %.0f tok/s)\n",
                  st.finished ? "complete" : "stopped", static_cast<long long>(st.saved),
                  static_cast<long long>(st.total), path.c_str(), static_cast<long long>(st.resumed_from), st.seconds,
                  st.tokens_per_second);
    sl::cli::out(done);
    return st.finished ? 0 : 130;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(prefill, "prefill", "prefill the whole library as one context, saved as it goes (resumable)", kUsage, run);
