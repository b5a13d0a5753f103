// `sightline-cli prefill [--library DIR] [--max-tokens N] [--save-every N] [--effort E]`: the
// progressive prefill of the whole library as one long context (MSA attention), saved after every
// chunk into the library's kv/ folder and recorded there (partial, then complete). Progress and ETA
// go to stderr; Ctrl-C stops after the chunk in flight, which is saved; running it again resumes
// where the file ends (core/prefill/progressive_prefill.h). A library larger than --max-tokens
// (default 131072) keeps pages spread over each document (the budget planner, no question).
#include <QStringList>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "app/cli/cli_command.h"
#include "app/common/ask.h"
#include "core/attention/msa_attention.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/sha256.h"

namespace {

std::atomic<bool> g_interrupted{false};
void on_prefill_interrupt(int) { g_interrupted.store(true); }

int usage() {
    sl::cli::err("usage: sightline-cli prefill [--library DIR] [--max-tokens N] [--save-every N] "
                 "[--effort low|medium|high]\n");
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
    int64_t max_tokens = 131072, save_every = 2048;
    sl::Effort effort = sl::Effort::Medium;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (i + 1 >= args.size()) return usage();
        if (a == QLatin1String("--library")) dir = args[++i].toStdString();
        else if (a == QLatin1String("--max-tokens")) max_tokens = args[++i].toLongLong();
        else if (a == QLatin1String("--save-every")) save_every = args[++i].toLongLong();
        else if (a == QLatin1String("--effort")) effort = sl::parse_effort(args[++i].toStdString());
        else return usage();
    }
    if (max_tokens < 1024 || save_every < 1) return usage();

    sl::Library lib = sl::Library::open(dir);
    const auto model = sl::load_model(sl::paths::default_model());
    std::vector<sl::DocId> ids;
    const std::vector<sl::doc::Document> docs = sl::app::ready_documents(lib, ids);
    std::vector<const sl::doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);

    const sl::EffortSettings es = sl::effort_settings(effort);
    sl::MsaConfig mc;
    mc.top_k = es.top_k;
    sl::ContextOptions co;
    co.sink_block = mc.block_size;
    const sl::ContextBuilder builder(*model->tokenizer, *model->chat, co);
    const sl::PreparedContext prepared = builder.prepare(ptrs);
    const sl::BudgetPlan plan = sl::plan_budget(prepared, max_tokens, es);
    const sl::TokenStream ts = builder.assemble(prepared, &plan);
    sl::cli::out(plan.to_text());

    const std::string hash =
        sl::sha256_hex(std::string_view(reinterpret_cast<const char*>(ts.tokens.data()), ts.tokens.size() * sizeof(int32_t)));
    const std::string path = (lib.kv_dir() / ("library-" + hash.substr(0, 24) + ".slkv")).string();
    const std::string settings = "{\"attention\":\"msa\",\"block\":" + std::to_string(mc.block_size) +
                                 ",\"top_k\":" + std::to_string(mc.top_k) + ",\"library_prefill\":true,\"prefix_sha256\":\"" +
                                 hash + "\"}";

    sl::SessionOptions so;
    so.n_ctx = static_cast<int>(ts.tokens.size()) + 1024;  // room for a question and an answer later
    so.kv_block = mc.block_size;
    sl::Session session(*model, so, std::make_unique<sl::MsaAttention>(mc));
    sl::PrefillOptions po;
    po.save_every = save_every;
    po.progress_interval = 0.5;
    sl::ProgressivePrefill prefill(session, ts.tokens, path, po);

    sl::KvCacheRecord rec;
    if (auto old = lib.find_kv_cache(sl::model_fingerprint(*model), ids, settings)) rec = *old;
    rec.path = path;
    rec.model_fingerprint = sl::model_fingerprint(*model);
    rec.documents = ids;
    rec.total_tokens = static_cast<int64_t>(ts.tokens.size());
    rec.settings = settings;

    std::signal(SIGINT, on_prefill_interrupt);
    prefill.start();
    int64_t recorded = -1;
    while (prefill.running()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (g_interrupted.load()) prefill.cancel();
        const sl::PrefillStatus st = prefill.status();
        char line[200];
        std::snprintf(line, sizeof line, "\rprefill %lld / %lld tokens (%.0f%%), %.0f tok/s, ETA %s   ",
                      static_cast<long long>(st.done), static_cast<long long>(st.total),
                      st.total ? 100.0 * static_cast<double>(st.done) / static_cast<double>(st.total) : 100.0,
                      st.tokens_per_second, eta_text(st.eta_seconds).c_str());
        sl::cli::err(line);
        if (st.saved != recorded) {  // the library records how far the file is (a reader sees a valid prefix)
            rec.n_tokens = st.saved;
            rec.state = sl::KvCacheState::Partial;
            rec.id = lib.save_kv_cache(rec);
            recorded = st.saved;
        }
    }
    prefill.wait();
    std::signal(SIGINT, SIG_DFL);
    const sl::PrefillStatus st = prefill.status();
    rec.n_tokens = st.saved;
    rec.state = st.finished ? sl::KvCacheState::Complete : sl::KvCacheState::Partial;
    lib.save_kv_cache(rec);
    sl::cli::err("\n");
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

SIGHTLINE_CLI_COMMAND(prefill, "prefill", "prefill the whole library as one context, saved as it goes (resumable)", run);
