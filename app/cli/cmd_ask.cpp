// `sightline-cli ask "QUESTION" [--library DIR] [--effort low|medium|high] [--attention dense|msa]
//  [--ctx N] [--no-cache] [--no-semantic] [--no-library-prefill] [--preselect N] [--kv-cap SIZE]
//  [--temp T] [--threads N] [--device auto|cpu|cuda] [--device-kv-budget SIZE] [--kv-budget SIZE] [--json] [--model FILE.gguf [--mmproj VISION.gguf]]
//  [--engine URL [--engine-model NAME] [--api-key-env VAR]]`: asks the library's documents a question in one long context (core/ask/ask.h: every
// unit ranked for the question, the best that fit read; or the library's own prefill plus the best
// units it has not read). Prints the plan first, a progress line with an ETA while it prefills (on
// a terminal; one line per 10% otherwise), streams the answer, then prints it with inline citation
// markers and the numbered sources (weak ones flagged), and stores the chat. --json prints the
// answer (core/answer/answer_json.h) as the last line instead of the text summary.
// --engine URL answers with a remote OpenAI-compatible server (core/ask/remote_ask.h,
// app/common/openai_engine.h): the context is planned here and sent there, the citations verified
// here; the API key is read from $SIGHTLINE_API_KEY (or the variable --api-key-env names). Ctrl-C
// cancels the question (exit 130). --model answers with another GGUF than the embedded default;
// --mmproj adds its vision tower: the visuals the plan keeps (slide pictures, images, video frames,
// pages with little text) enter the context as image-patch tokens (core/ask/visual_context.h).
// --device-kv-budget (on the GPU, MSA) keeps that much of the context's K/V in device memory and
// the rest in pinned host memory, fetched as the selections need it; --kv-budget caps the host RAM
// of the K/V (on the CPU the rest spills to a mapped temp file; on the GPU it bounds the pinned
// host tier, blocks of the saved context past it read back from the mapped file).
#include <QStringList>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "app/common/openai_engine.h"
#include "app/common/visual_pixels.h"
#include "core/answer/answer_json.h"
#include "core/answer/minilm_embedder.h"
#include "core/ask/ask.h"
#include "core/ask/remote_ask.h"
#include "core/context/preselect.h"
#include "core/embed/sentence_embedder.h"
#include "core/kvcache/kv_cache.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/util/sha256.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_model.h"

namespace {

const char* kUsage =
    "usage: sightline-cli ask \"QUESTION\" [--library DIR] [--effort low|medium|high] "
    "[--attention dense|msa] [--ctx N] [--no-cache] [--no-semantic] [--no-library-prefill] "
    "[--preselect N] [--kv-cap SIZE] [--temp T] [--threads N] [--device auto|cpu|cuda] [--device-kv-budget SIZE] [--kv-budget SIZE] [--json]\n"
    "       [--model FILE.gguf [--mmproj VISION.gguf]]   (another model; its vision tower reads the visuals)\n"
    "       [--engine URL [--engine-model NAME] [--api-key-env VAR]]   (a remote OpenAI-compatible server answers)\n";

int usage() {
    sl::cli::err(kUsage);
    return 2;
}

std::string duration(double s) {
    char buf[32];
    if (s < 90) std::snprintf(buf, sizeof buf, "%.0f s", s);
    else std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    return buf;
}

// The prefill's progress: a line rewritten in place on a terminal, one line per 10% otherwise.
class PrefillProgress {
public:
    explicit PrefillProgress(bool tty) : tty_(tty) {}
    void update(int64_t done, int64_t total, double seconds) {
        if (total <= 0) return;
        const int pct = static_cast<int>(100 * done / total);
        const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
        const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
        char line[160];
        std::snprintf(line, sizeof line, "prefill %3d%%  %s / %s tokens  %.0f tok/s  ETA %s", pct,
                      sl::thousands(done).c_str(), sl::thousands(total).c_str(), rate, duration(eta).c_str());
        if (tty_) {
            sl::cli::err(std::string("\r") + line + "   " + (done >= total ? "\n" : ""));
        } else if (pct / 10 > last_decile_ || done >= total) {
            last_decile_ = pct / 10;
            sl::cli::err(std::string(line) + "\n");
        }
    }

private:
    bool tty_;
    int last_decile_ = -1;
};

std::atomic<bool> g_cancel{false};
void ask_on_interrupt(int) { g_cancel = true; }

int run(const QStringList& args) {
    sl::AskOptions o;
    QString engine_url, engine_model;
    QByteArray key_env = "SIGHTLINE_API_KEY";
    std::filesystem::path dir = sl::Library::default_dir();
    bool semantic = true, json = false;
    std::filesystem::path model_path = sl::paths::default_model(), mmproj_path;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        auto value = [&]() -> QString { return i + 1 < args.size() ? args[++i] : QString(); };
        if (a == QLatin1String("--")) {  // the question follows, whatever it starts with
            if (i + 2 != args.size() || !o.question.empty()) return usage();
            o.question = args[i + 1].toStdString();
            break;
        }
        if (a == QLatin1String("--library")) dir = sl::arg_bytes(value());
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
        else if (a == QLatin1String("--json")) json = true;
        else if (a == QLatin1String("--temp")) {
            bool ok = false;
            o.temperature = value().toFloat(&ok);
            if (!ok || o.temperature < 0 || o.temperature > 2) return usage();
        } else if (a == QLatin1String("--threads")) {
            bool ok = false;
            o.threads = value().toInt(&ok);
            if (!ok || o.threads < 0 || o.threads > 1024) return usage();
        } else if (a == QLatin1String("--device")) {
            o.device = value().toStdString();
            if (!sl::cli::valid_device(o.device)) return usage();
        } else if (a == QLatin1String("--device-kv-budget") || a == QLatin1String("--kv-budget")) {
            const bool device = a == QLatin1String("--device-kv-budget");
            try {
                (device ? o.device_kv_budget_bytes : o.kv_budget_bytes) = sl::parse_byte_size(value().toStdString());
            } catch (const sl::Error& e) {
                sl::cli::err("sightline-cli ask: " + a.toStdString() + ": " + e.what() + "\n");
                return usage();
            }
        } else if (a == QLatin1String("--model")) model_path = sl::arg_bytes(value());
        else if (a == QLatin1String("--mmproj")) mmproj_path = sl::arg_bytes(value());
        else if (a == QLatin1String("--engine")) engine_url = value();
        else if (a == QLatin1String("--engine-model")) engine_model = value();
        else if (a == QLatin1String("--api-key-env")) key_env = value().toUtf8();
        else if (a == QLatin1String("--kv-cap")) {
            try {
                o.kv_cap_bytes = sl::parse_byte_size(value().toStdString());
            } catch (const sl::Error& e) {
                sl::cli::err(std::string("sightline-cli ask: --kv-cap: ") + e.what() + "\n");
                return usage();
            }
        } else if (!a.startsWith(QLatin1String("--")) && o.question.empty()) o.question = a.toStdString();
        else return usage();
    }
    if (o.question.empty()) return usage();
    if (engine_url.isEmpty() && !engine_model.isEmpty()) return usage();

    sl::Library lib = sl::Library::open(dir, sl::LibraryOpen::Existing);
    if (!mmproj_path.empty() && !engine_url.isEmpty()) {
        sl::cli::err("sightline-cli ask: --mmproj reads visuals here; a remote --engine gets text only\n");
        return usage();
    }
    const auto model = sl::load_model(model_path);
    std::unique_ptr<sl::LoadedVisionModel> vision;
    sl::app::VisualPixels pixels(&lib);
    if (!mmproj_path.empty()) {
        vision = sl::load_mmproj(mmproj_path);
        sl::check_vision_fits_lm(vision->model.config, model->model->config().d_model, mmproj_path.string());
        o.vision.model = &vision->model;
        o.vision.identity = sl::sha256_file_hex(mmproj_path);
        o.vision.pixels = pixels.fn();
        sl::cli::out(sl::vision_mode(&vision->model).description + "\n");
    }
    sl::InstalledMiniLm minilm;
    if (semantic) {
        minilm = sl::InstalledMiniLm::open();
        o.embedder = minilm.get();
        if (!o.embedder && std::filesystem::exists(sl::SentenceEmbedder::default_dir()))
            sl::cli::err("note: semantic ranking and verification off: " + minilm.note + "\n");
    }
    sl::cli::out("Library: " + lib.dir().string() + "\nQuestion: " + o.question + "\n");
    sl::AskCallbacks cb;
    bool answer_started = false;
    PrefillProgress progress(::isatty(STDERR_FILENO) == 1);
    cb.on_status = [&](const std::string& s) { sl::cli::out(s + "\n"); };
    cb.on_plan = [&](const std::string& plan) { sl::cli::out("\n" + plan + "\n"); };
    cb.on_progress = [&](int64_t done, int64_t total, double s) { progress.update(done, total, s); };
    cb.on_text = [&](std::string_view t) {
        if (!answer_started) {
            sl::cli::out("\nAnswer (streaming): ");
            answer_started = true;
        }
        sl::cli::out(std::string(t));
    };
    o.cancel = &g_cancel;
    std::signal(SIGINT, ask_on_interrupt);
    sl::AskResult r;
    try {
        if (!engine_url.isEmpty()) {
            sl::app::OpenAiEngineOptions eo;
            eo.url = engine_url;
            eo.model = engine_model;
            eo.api_key = sl::app::OpenAiEngine::api_key_from_env(key_env.constData());
            sl::app::OpenAiEngine engine(eo);
            r = sl::ask_remote(lib, *model, engine, o, cb);
        } else {
            r = sl::ask(lib, *model, o, cb);
        }
    } catch (const sl::Cancelled&) {
        sl::cli::out("\n");
        sl::cli::err("sightline-cli ask: cancelled\n");
        return 130;
    }
    sl::cli::out("\n\n");
    if (!r.device.empty()) sl::cli::out("Device: " + r.device + "\n");
    if (!r.kv_note.empty()) sl::cli::out((engine_url.isEmpty() ? "KV cache: " : "Engine: ") + r.kv_note + "\n");
    if (!r.read_summary.empty()) sl::cli::out("Read: " + r.read_summary + "\n");
    if (!r.vision_note.empty()) sl::cli::out("Vision: " + r.vision_note.substr(r.vision_note.rfind("vision: ", 0) == 0 ? 8 : 0) + "\n");
    if (r.answer.stop_reason == "repetition")
        sl::cli::out("Note: the answer began to repeat itself; it is cut before the repetition.\n");
    else if (r.answer.cut)
        sl::cli::out("Note: the answer reached its length budget and is cut at its last full sentence "
                     "(--effort high allows longer answers).\n");
    sl::cli::out("\nAnswer with citations:\n" + r.answer.with_markers() + "\n\nSources:\n");
    if (r.answer.citations.empty()) sl::cli::out("  (no source backs the answer)\n");
    else sl::cli::out(r.answer.sources_text());
    char stats[320];
    std::snprintf(stats, sizeof stats,
                  "\n(%lld context tokens %s in %.1f s; attention %s; first answer text after %.1f s; %d answer steps "
                  "in %.1f s; sources ranked by %s; chat %lld stored)\n",
                  static_cast<long long>(r.context_tokens),
                  !engine_url.isEmpty() ? "sent"
                  : r.from_library_prefill ? (r.prefilled_tokens ? "restored + ranked units" : "restored")
                                           : (r.restored ? "restored" : "prefilled"),
                  r.prefill_seconds, r.attention.c_str(), r.first_token_seconds, r.answer.steps, r.decode_seconds,
                  o.embedder ? (o.msa && engine_url.isEmpty() ? "attention + words + MiniLM" : "words + MiniLM")
                             : (o.msa && engine_url.isEmpty() ? "attention + words" : "words"),
                  static_cast<long long>(r.chat_id));
    sl::cli::out(stats);
    if (json) sl::cli::out(sl::answer_to_json(r.answer) + "\n");
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(ask, "ask", "ask the library a question; the answer cites pages, slides and times", kUsage, run);
