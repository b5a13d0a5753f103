// The library's progressive prefill in the background (issue: "starts as soon as a file is
// ingested, is saved as it goes, shows progress and ETA, survives a restart"). Whenever the set of
// ready documents may have changed (libraryChanged(): an ingest finished, a document was removed,
// the stored library was loaded at startup) or the model changed, the controller (re)starts an
// LibraryPrefill of the current library context; a prefill of an older state is cancelled
// first (what it saved stays in its file). The prefill resumes from the context's saved file, so a
// restart continues where the last run stopped, and a context whose file is already complete
// (recorded Complete in the library, file holding exactly the context) is reported ready without
// building a session.
//
// While a question is answered the prefill pauses (gate(), prefill_gate.h; the chat's service is
// wrapped in a PausingAnswerService) and resumes afterwards from its saved prefix.
//
// Threading: the controller lives on the GUI thread; every public method and progressChanged()
// run there. The work runs on the controller's worker QThread, which opens its own sl::Library
// connection, builds the context (tokenizes every ready document), drives the LibraryPrefill (its
// prefill has its own thread) and calls record() every report_ms; progress comes back through
// queued calls. The model is shared read-only (SharedModel) with the chat's answer service.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <filesystem>
#include <memory>

#include "core/ask/library_context.h"

namespace sl::desktop {

class PrefillGate;
class PrefillWorker;
class SharedModel;

enum class PrefillState {
    Idle,        // nothing to prefill (no model, no ready document)
    Preparing,   // tokenizing the documents, loading the model, restoring the saved prefix
    Prefilling,  // done / total, tokens per second, ETA
    Complete,    // the whole context is prefilled and recorded
    Paused,      // stopped while a question is answered; resumes afterwards
    Failed,      // reason says why (names the file)
};
const char* to_string(PrefillState s);

struct PrefillProgress {
    PrefillState state = PrefillState::Idle;
    qint64 done = 0;              // tokens in the prefill's session (restored or prefilled)
    qint64 total = 0;             // tokens of the library context (0 while unknown)
    qint64 saved = 0;             // tokens in the saved file (a valid prefix)
    qint64 resumed_from = 0;      // tokens restored from the file when this run started
    double tokens_per_second = 0;
    double eta_seconds = -1;      // < 0: unknown
    int documents = 0;            // ready documents in the context
    QString file;                 // the context's saved file (kv/library-<hash>.slkv)
    QString reason;               // Failed: what went wrong; Idle: why there is nothing to do
    quint64 generation = 0;       // the library state this is about (libraryChanged() count)
};

// "12:30" (minutes:seconds) or "1:02:03"; empty when unknown (< 0).
QString format_eta(double seconds);
// The status bar's text: "Context: prefilled 31,744 / 78,379 tokens (40%) · ETA 12:30",
// "Context: ready · 78,379 tokens prefilled", "Context: paused while answering · ...",
// "Context: prefill failed: <reason>"; empty when idle.
QString prefill_status_text(const PrefillProgress& p);

struct PrefillControllerOptions {
    LibraryPrefillOptions prefill;  // max_tokens (context size), save_every
    int report_ms = 500;                 // progress signals and record() at most this often
};

class PrefillController : public QObject {
    Q_OBJECT

public:
    PrefillController(std::filesystem::path library_dir, PrefillControllerOptions options = {},
                      QObject* parent = nullptr);
    ~PrefillController() override;  // stops the prefill (its saved prefix is recorded) and the worker

    // The model to prefill with (null: none; the prefill stops). A different model restarts.
    void setModel(std::shared_ptr<SharedModel> model);
    // The library's ready documents may have changed: prefill the current context (a running
    // prefill of the same context keeps going).
    void libraryChanged();
    // Pauses / resumes from the GUI (balanced; answers pause through gate() instead).
    void pause();
    void resume();

    const std::shared_ptr<PrefillGate>& gate() const { return gate_; }
    const PrefillProgress& progress() const { return progress_; }
    QString statusText() const { return prefill_status_text(progress_); }
    const std::filesystem::path& libraryDir() const { return dir_; }

Q_SIGNALS:
    void progressChanged(const sl::desktop::PrefillProgress& progress);

private:
    friend class PrefillWorker;
    void request();
    void onProgress(const PrefillProgress& p);  // from the worker (queued)

    std::filesystem::path dir_;
    PrefillControllerOptions options_;
    std::shared_ptr<PrefillGate> gate_;
    std::shared_ptr<SharedModel> model_;
    PrefillProgress progress_;
    quint64 generation_ = 0;
    int gui_holds_ = 0;
    QThread thread_;
    PrefillWorker* worker_ = nullptr;
};

}  // namespace sl::desktop

Q_DECLARE_METATYPE(sl::desktop::PrefillProgress)
