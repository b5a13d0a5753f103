// `sightline-cli ask "QUESTION" [--library DIR] [--effort low|medium|high] [--attention dense|msa]
//  [--ctx N] [--no-cache] [--no-library-prefill] [--preselect N]`: asks the library's documents a
// question in one long context. When the library's own prefill (`sightline-cli prefill`, or the
// app's background prefill) is recorded, complete or partial, the answer reads what it has saved
// plus a preselection of the rest (--preselect tokens) and says what it read; otherwise it prints
// the question's context plan and prefills (or restores) that. Then it streams the answer, prints it
// with inline citation markers and the numbered sources (weak ones flagged), and stores the chat.
#include <QStringList>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "app/cli/cli_command.h"
#include "app/common/ask.h"
#include "core/answer/minilm_embedder.h"
#include "core/embed/sentence_embedder.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"
#include "core/util/paths.h"

namespace {

int usage() {
    sl::cli::err("usage: sightline-cli ask \"QUESTION\" [--library DIR] [--effort low|medium|high] "
                 "[--attention dense|msa] [--ctx N] [--no-cache] [--no-semantic] [--no-library-prefill] "
                 "[--preselect N]\n");
    return 2;
}

int run(const QStringList& args) {
    sl::app::AskOptions o;
    std::filesystem::path dir = sl::Library::default_dir();
    bool semantic = true;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        auto value = [&]() -> QString { return i + 1 < args.size() ? args[++i] : QString(); };
        if (a == QLatin1String("--library")) dir = value().toStdString();
        else if (a == QLatin1String("--effort")) o.effort = sl::parse_effort(value().toStdString());
        else if (a == QLatin1String("--attention")) {
            const QString v = value();
            if (v == QLatin1String("msa")) o.msa = true;
            else if (v == QLatin1String("dense")) o.msa = false;
            else return usage();
        } else if (a == QLatin1String("--ctx")) o.n_ctx = value().toInt();
        else if (a == QLatin1String("--no-cache")) o.reuse_kv = false;
        else if (a == QLatin1String("--no-semantic")) semantic = false;
        else if (a == QLatin1String("--no-library-prefill")) o.use_library_prefill = false;
        else if (a == QLatin1String("--preselect")) o.preselect_tokens = value().toLongLong();
        else if (!a.startsWith(QLatin1String("--")) && o.question.empty()) o.question = a.toStdString();
        else return usage();
    }
    if (o.question.empty()) return usage();

    sl::Library lib = sl::Library::open(dir);
    const auto model = sl::load_model(sl::paths::default_model());
    std::unique_ptr<sl::SentenceEmbedder> minilm;
    std::unique_ptr<sl::MiniLmEmbedder> embedder;
    if (semantic && std::filesystem::exists(sl::SentenceEmbedder::default_dir())) {
        try {
            minilm = sl::SentenceEmbedder::open(sl::SentenceEmbedder::default_dir().string());
            embedder = std::make_unique<sl::MiniLmEmbedder>(*minilm);
            o.embedder = embedder.get();
        } catch (const sl::Error& e) {
            sl::cli::err(std::string("note: semantic verification off: ") + e.what() + "\n");
        }
    }
    sl::cli::out("Library: " + lib.dir().string() + "\nQuestion: " + o.question + "\n");
    sl::app::AskCallbacks cb;
    bool plan_shown = false;
    cb.on_status = [&](const std::string& s) { sl::cli::out(s + "\n"); };
    cb.on_text = [&](std::string_view t) {
        if (!plan_shown) {
            sl::cli::out("\nAnswer (streaming): ");
            plan_shown = true;
        }
        sl::cli::out(std::string(t));
    };
    const sl::app::AskResult r = sl::app::ask(lib, *model, o, cb);
    sl::cli::out("\n\n" + r.plan);
    sl::cli::out(r.kv_note.empty() ? "" : "KV cache: " + r.kv_note + "\n");
    if (!r.read_summary.empty()) sl::cli::out("Read: " + r.read_summary + "\n");
    sl::cli::out("\nAnswer with citations:\n" + r.answer.with_markers() + "\n\nSources:\n");
    if (r.answer.citations.empty())
        sl::cli::out(o.msa ? "  (the answer attended to no document block)\n"
                           : "  (none: citations come from MSA's selections; use --attention msa)\n");
    else sl::cli::out(r.answer.sources_text());
    char stats[256];
    std::snprintf(stats, sizeof stats,
                  "\n(%lld context tokens %s in %.1f s; first answer text after %.1f s; %d answer steps in %.1f s; "
                  "verification %s; chat %lld stored)\n",
                  static_cast<long long>(r.context_tokens),
                  r.from_library_prefill ? (r.prefilled_tokens ? "restored + preselected" : "restored")
                                         : (r.restored ? "restored" : "prefilled"),
                  r.prefill_seconds, r.first_token_seconds,
                  r.answer.steps, r.decode_seconds, o.embedder ? "lexical + semantic" : "lexical",
                  static_cast<long long>(r.chat_id));
    sl::cli::out(stats);
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(ask, "ask", "ask the library a question; the answer cites pages, slides and times", run);
