#include "app/desktop/library_answer_service.h"

#include <QLocale>
#include <QString>

#include <chrono>
#include <system_error>
#include <thread>

#include "core/answer/minilm_embedder.h"
#include "app/common/openai_engine.h"
#include "app/common/visual_pixels.h"
#include "core/ask/ask.h"
#include "core/ask/remote_ask.h"
#include "core/embed/sentence_embedder.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/util/error.h"
#include "core/util/sha256.h"
#include "core/vision/vision_model.h"

namespace sl::desktop {

namespace {

std::string count(int64_t n) {
    return QLocale().toString(static_cast<qlonglong>(n)).toStdString();
}

}  // namespace

LibraryAnswerService::LibraryAnswerService(std::filesystem::path library_dir,
                                           std::string model_path, LibraryAnswerOptions options)
    : LibraryAnswerService(std::move(library_dir),
                           std::make_shared<SharedModel>(std::move(model_path)), options) {}

LibraryAnswerService::LibraryAnswerService(std::filesystem::path library_dir,
                                           std::shared_ptr<SharedModel> model,
                                           LibraryAnswerOptions options)
    : dir_(std::move(library_dir)), model_(std::move(model)), options_(options) {}

LibraryAnswerService::~LibraryAnswerService() = default;

MiniLmEmbedder* LibraryAnswerService::embedder() {
    if (!options_.semantic) return nullptr;
    if (embedder_tried_) return minilm_.embedder.get();
    embedder_tried_ = true;
    minilm_ = InstalledMiniLm::open();
    semantic_note_ = minilm_.note;
    return minilm_.embedder.get();
}

ChatAnswer LibraryAnswerService::answer(const std::string& question, Effort effort,
                                        const AskStream& stream, const std::atomic<bool>* cancel) {
    const std::lock_guard lock(mutex_);
    const std::shared_ptr<const LoadedModel> model = model_->get();
    wait_freed();  // a released session's memory is given back before this answer takes more
    if (drop_warm_.exchange(false) || model != warm_model_) warm_.clear();
    warm_model_ = model;
    struct DropLate {  // a releaseWarm() during the answer drops what it keeps
        LibraryAnswerService* s;
        ~DropLate() {
            if (s->drop_warm_.exchange(false)) s->warm_.clear();
        }
    } drop_late{this};
    Library lib = Library::open(dir_);
    AskOptions o;
    o.question = question;
    o.effort = effort;
    o.n_ctx = options_.n_ctx;
    o.kv_cap_bytes = options_.kv_cap_bytes;
    o.device_kv_budget_bytes = options_.device_kv_budget_bytes;
    o.kv_budget_bytes = options_.kv_budget_bytes;
    o.temperature = options_.temperature;
    o.threads = options_.threads;
    o.device = options_.device;
    o.cancel = cancel;
    o.embedder = embedder();
    app::VisualPixels pixels(&lib);
    if (!options_.mmproj_path.empty() && options_.engine_url.empty()) {
        if (!vision_) {
            if (stream.on_status) stream.on_status("loading the vision tower " + options_.mmproj_path);
            auto v = load_mmproj(options_.mmproj_path);
            check_vision_fits_lm(v->model.config, model->model->config().d_model, options_.mmproj_path);
            vision_sha256_ = sha256_file_hex(options_.mmproj_path);
            vision_ = std::move(v);
        }
        o.vision.model = &vision_->model;
        o.vision.identity = vision_sha256_;
        o.vision.pixels = pixels.fn();
    }
    std::string streamed;
    AskCallbacks cb;
    cb.on_text = [&](std::string_view t) {
        streamed += t;
        if (stream.on_text && !(cancel && cancel->load())) stream.on_text(t);
    };
    if (stream.on_status) {
        cb.on_status = stream.on_status;
        cb.on_progress = [&](int64_t done, int64_t total, double) {
            stream.on_status("reading the context: " + count(done) + " of " + count(total) +
                             " tokens");
        };
    }

    ChatAnswer out;
    out.model = model_->path().filename().string();
    out.method =
        "one long context with MSA; citations from the engine's block selections, verified by word "
        "overlap";
    if (o.embedder)
        out.method += " and meaning (" + o.embedder->name() + ")";
    else if (!semantic_note_.empty())
        out.method += " (not by meaning: " + semantic_note_ + ")";
    AskResult r;
    try {
        if (!options_.engine_url.empty()) {
            app::OpenAiEngineOptions eo;
            eo.url = QString::fromStdString(options_.engine_url);
            eo.model = QString::fromStdString(options_.engine_model);
            eo.api_key = options_.api_key.empty() ? app::OpenAiEngine::api_key_from_env()
                                                  : QByteArray::fromStdString(options_.api_key);
            if (stream.on_status) stream.on_status("connecting to " + options_.engine_url);
            app::OpenAiEngine engine(eo);
            out.model = engine.model() + " (remote)";
            out.method = "the remote engine " + engine.describe() +
                         " with the context planned here; citations verified here by word overlap";
            if (o.embedder) out.method += " and meaning (" + o.embedder->name() + ")";
            out.method += " (attention-based citations need the local engine)";
            r = ask_remote(lib, *model, engine, o, cb);
        } else {
            o.warm = &warm_;
            r = ask(lib, *model, o, cb);
        }
    } catch (const Cancelled&) {
        // Stopped: keep what was streamed; citations come only with a complete answer.
        out.answer.question = question;
        out.answer.text = streamed;
        out.answer.stop_reason = "cancelled";
        out.finished = true;
        return out;
    }
    out.answer = std::move(r.answer);
    if (out.answer.question.empty()) out.answer.question = question;
    out.read_summary = r.read_summary;
    out.plan = r.plan;
    out.context_tokens = r.context_tokens;
    out.device = r.device;
    if (!r.attention.empty()) out.method += "; attention " + r.attention;
    if (!r.vision_note.empty()) out.method += "; " + r.vision_note;
    if (r.from_library_prefill) {
        const bool all = r.library_saved >= r.library_tokens;
        out.method += all ? "; the library's prefilled context"
                          : "; the library's prefill so far plus a preselection";
        if (r.warm) out.method += " (kept in memory from the last question)";
    } else if (r.restored) {
        out.method += "; prefill restored from the library";
    }
    out.finished = true;
    return out;
}

bool LibraryAnswerService::idle() {
    idling_ = true;  // before the lock: holdsWarm() waits for the slice rather than answering "no"
    struct Done {
        std::atomic<bool>& flag;
        ~Done() { flag = false; }
    } done{idling_};
    const std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const bool more = !drop_warm_ && warm_.fill() > 0;
    // A releaseWarm() before or during the slice drops the session here, on this worker (its
    // memory, the device's too), before the lock goes.
    if (drop_warm_.exchange(false)) {
        warm_.clear();
        return false;
    }
    return more;
}

void LibraryAnswerService::releaseWarm() {
    const std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
        drop_warm_ = true;  // an answer runs: it drops the session when it ends
        return;
    }
    WarmSession held = warm_.release();
    if (!held.session) return;
    // Freed on a worker, not on the caller's (the GUI) thread: a session's pages, its file maps and
    // on a GPU the device's memory (whose release waits for the device). The model stays alive
    // until it is gone. Finished ones are forgotten here; the rest are waited for by the next
    // answer and the destructor (freeing_ is declared last, so destroyed first).
    std::erase_if(freeing_, [](const std::future<void>& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    auto model = warm_model_;
    try {
        freeing_.push_back(std::async(std::launch::async, [s = std::move(held), m = std::move(model)]() mutable {
            s = WarmSession();  // the session first, then (maybe) the model it read
            m.reset();
        }));
    } catch (const std::system_error&) {
        // No thread to be had: the task's function, and the session in it, went with the exception
        // (freed here after all; warm_model_ still holds the model).
    }
}

void LibraryAnswerService::wait_freed() {
    for (auto& f : freeing_) f.wait();
    freeing_.clear();
}

bool LibraryAnswerService::holdsWarm() {
    // An idle slice holds the lock briefly (an answer for its whole run): wait out the slice.
    for (int i = 0; i < 2000; ++i) {
        const std::unique_lock lock(mutex_, std::try_to_lock);
        if (lock.owns_lock()) return warm_.holds();
        if (!idling_) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

}  // namespace sl::desktop
