// The app's AskService: the core's ask (core/ask/ask.h) over the documents in the library store
// (one long context, MSA prefill saved and reused, citations from the engine's own block
// selections, each verified against the sentence it backs, by word overlap and, when
// all-MiniLM-L6-v2 is installed, by meaning). The ChatAnswer wraps ask's sl::Answer as it is:
// weak supports stay, flagged; citations the answer read but no sentence used stay, listed as
// such by the chat.
//
// When the library's background prefill (prefill_controller.h) recorded a context for these
// documents, ask answers from it (what is prefilled so far plus a preselection of the rest);
// ChatAnswer::read_summary then says what was read. Stop (the chat's cancel flag) stops ask
// between prefill chunks and during generation; the text so far is kept, without citations.
//
// With LibraryAnswerOptions::engine_url set, a remote engine answers (sl::ask_remote; the engine
// is connected per answer on the worker thread, which spins its own event loop for the requests).
//
// The library prefill's session stays in memory between questions once it is complete (the next
// question takes it instead of restoring the file: sl::WarmContext); releaseWarm() gives its
// memory back, as a change of the library's documents should (a prefill of the new context starts).
//
// Threading: answer() runs on a worker thread; it opens its own sl::Library connection there (a
// Library is one connection per thread), loads the model once (SharedModel: kept, shared
// read-only with the background prefill) and opens MiniLM once (kept; used only under mutex_).
// releaseWarm() from any thread: it never waits for an answer (one running drops the session
// when it ends), nor for the memory to be freed (a worker frees it: on a GPU that waits for the
// device; the destructor and the next answer wait for it).
#pragma once

#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "app/desktop/ask_service.h"
#include "app/desktop/shared_model.h"
#include "core/answer/minilm_embedder.h"
#include "core/ask/warm_context.h"

namespace sl {
struct LoadedVisionModel;
}

namespace sl::desktop {

struct LibraryAnswerOptions {
    int n_ctx = 0;         // the context's size; 0: the model's trained context
    bool semantic = true;  // rank units and verify citations with MiniLM too, when it is installed
    int64_t kv_cap_bytes = int64_t{2} << 30;  // the library's kv/ folder cap (AskOptions::kv_cap_bytes)
    // A remote OpenAI-compatible engine answers when engine_url is set (core/ask/remote_ask.h): the
    // local model then only plans the context (its tokenizer) and the citations are verified here.
    std::string engine_url;
    std::string engine_model;  // empty: the server's first
    std::string api_key;       // empty: $SIGHTLINE_API_KEY
    float temperature = 0;     // AskOptions::temperature (0: greedy)
    int threads = 0;           // AskOptions::threads (0: all cores)
    std::string device = "cpu";  // AskOptions::device: "cpu", or "auto" when the GPU is chosen
    int64_t device_kv_budget_bytes = 0;  // AskOptions::device_kv_budget_bytes (0: the context all on the GPU)
    int64_t kv_budget_bytes = 0;         // AskOptions::kv_budget_bytes (0: host RAM for the K/V unbounded)
    // The model's vision tower (an mmproj GGUF; empty: none): loaded on the first answer, the
    // visuals the plan keeps then enter as image tokens (AskOptions::vision). Local engine only.
    std::string mmproj_path;
};

class LibraryAnswerService : public AskService {
public:
    // `library_dir`: the store the IngestQueue writes to.
    LibraryAnswerService(std::filesystem::path library_dir, std::string model_path,
                         LibraryAnswerOptions options = {});
    // The same with a model shared with others (the background prefill).
    LibraryAnswerService(std::filesystem::path library_dir, std::shared_ptr<SharedModel> model,
                         LibraryAnswerOptions options = {});
    ~LibraryAnswerService() override;
    std::string name() const override { return "library context (MSA selections)"; }
    ChatAnswer answer(const std::string& question, Effort effort, const AskStream& stream,
                      const std::atomic<bool>* cancel) override;
    // The kept session's context, a slice of it, brought from its saved file onto the device
    // (sl::WarmContext::fill); false when nothing is left, an answer holds the service, or the
    // kept session is being let go.
    bool idle() override;
    void releaseWarm();
    bool holdsWarm();  // for tests: a session is kept (false while an answer runs)

private:
    // MiniLM, opened on first use; null (and `semantic_note_` says why) when it cannot be.
    MiniLmEmbedder* embedder();

    std::filesystem::path dir_;
    std::shared_ptr<SharedModel> model_;
    LibraryAnswerOptions options_;
    std::mutex mutex_;  // one answer at a time
    bool embedder_tried_ = false;
    InstalledMiniLm minilm_;
    std::string semantic_note_;
    std::unique_ptr<LoadedVisionModel> vision_;  // loaded on first use
    std::string vision_sha256_;
    // The model the warm session reads, kept alive as long as it (declared first: destroyed last).
    std::shared_ptr<const LoadedModel> warm_model_;
    sl::WarmContext warm_{true};  // complete library prefills only (the background prefill grows partial ones)
    std::atomic<bool> drop_warm_{false};
    std::atomic<bool> idling_{false};  // an idle() slice holds mutex_

    // Sessions releaseWarm() handed to workers to free (with the model they read); under mutex_.
    // Declared last: destroyed (so waited for) first.
    std::vector<std::future<void>> freeing_;
    void wait_freed();  // under mutex_
};

}  // namespace sl::desktop
