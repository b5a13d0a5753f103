#include "app/desktop/prefill_controller.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QLocale>
#include <QTimer>

#include <cmath>
#include <optional>
#include <vector>

#include "app/desktop/prefill_gate.h"
#include "app/desktop/shared_model.h"
#include "core/library/library.h"
#include "core/model/model_loader.h"
#include "core/prefill/progressive_prefill.h"
#include "core/runtime/session.h"

namespace sl::desktop {

const char* to_string(PrefillState s) {
    switch (s) {
        case PrefillState::Idle: return "idle";
        case PrefillState::Preparing: return "preparing";
        case PrefillState::Prefilling: return "prefilling";
        case PrefillState::Complete: return "complete";
        case PrefillState::Paused: return "paused";
        case PrefillState::Failed: return "failed";
    }
    return "idle";
}

QString format_eta(double seconds) {
    if (!(seconds >= 0) || !std::isfinite(seconds)) return {};
    const auto s = static_cast<qint64>(std::llround(seconds));
    const qint64 h = s / 3600, m = (s / 60) % 60, sec = s % 60;
    if (h > 0) return QStringLiteral("%1:%2:%3").arg(h).arg(m, 2, 10, QLatin1Char('0')).arg(sec, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1:%2").arg(m).arg(sec, 2, 10, QLatin1Char('0'));
}

QString prefill_status_text(const PrefillProgress& p) {
    const QLocale l;
    const QString of = QObject::tr("%1 / %2 tokens").arg(l.toString(p.done), l.toString(p.total));
    switch (p.state) {
        case PrefillState::Idle: return {};
        case PrefillState::Preparing:
            return p.total > 0 ? QObject::tr("Context: preparing %1 tokens…").arg(l.toString(p.total))
                               : QObject::tr("Context: preparing…");
        case PrefillState::Prefilling: {
            const int pct = p.total > 0 ? static_cast<int>(p.done * 100 / p.total) : 0;
            QString t = QObject::tr("Context: prefilled %1 (%2%)").arg(of).arg(pct);
            const QString eta = format_eta(p.eta_seconds);
            if (!eta.isEmpty()) t += QObject::tr(" · ETA %1").arg(eta);
            return t;
        }
        case PrefillState::Complete:
            return QObject::tr("Context: ready · %1 tokens prefilled").arg(l.toString(p.total));
        case PrefillState::Paused:
            return p.total > 0 ? QObject::tr("Context: paused while answering · %1 / %2 tokens prefilled")
                                     .arg(l.toString(p.saved), l.toString(p.total))
                               : QObject::tr("Context: paused while answering");
        case PrefillState::Failed: return QObject::tr("Context: prefill failed: %1").arg(p.reason);
    }
    return {};
}

// The controller's worker: lives on the controller's QThread; every method runs there.
class PrefillWorker : public QObject {
public:
    PrefillWorker(std::filesystem::path dir, PrefillControllerOptions options, std::shared_ptr<PrefillGate> gate,
                  PrefillController* controller)
        : dir_(std::move(dir)), options_(options), gate_(std::move(gate)), controller_(controller) {
        tick_ = new QTimer(this);
        tick_->setInterval(100);
        QObject::connect(tick_, &QTimer::timeout, this, [this] { step(); });
    }

    // A new library state (or model): a running prefill of the same context keeps going; one of
    // another context is cancelled and the new one starts once it stopped.
    void request(quint64 generation, std::shared_ptr<SharedModel> model) {
        want_gen_ = generation;
        want_model_ = std::move(model);
        if (prefill_) {
            bool same = false;
            if (want_model_ == have_model_) {
                try {
                    same = readyIds() == prefill_->context().ids;
                } catch (const std::exception&) {
                }
            }
            if (same) {
                have_gen_ = want_gen_;
                return;
            }
            prefill_->cancel();
            return;  // step() (the tick) finishes it and starts the new state
        }
        step();
    }

    // Polls a running prefill (records and reports every report_ms), finishes a stopped one, and
    // starts what is wanted when nothing runs and the gate is free.
    void step() {
        if (prefill_) {
            if (prefill_->running()) {
                if (since_report_.elapsed() >= options_.report_ms) {
                    record();
                    report(fromStatus(prefill_->status()));
                }
                return;
            }
            finishRun();
        }
        if (want_gen_ == 0) return;
        if (!want_model_) {
            PrefillProgress p;
            p.reason = QObject::tr("no model");
            report(p);
            return;
        }
        if (gate_->held()) {
            reportPaused();
            return;
        }
        startRun();
    }

    void shutdown() {
        tick_->stop();
        if (prefill_) {
            gate_->setCanceller({});
            prefill_->cancel();
            prefill_->wait();
            record();
            prefill_.reset();
        }
        gate_->setBusy(false);
        model_.reset();
        lib_.reset();
    }

private:
    Library& library() {
        if (!lib_) lib_.emplace(Library::open(dir_));
        return *lib_;
    }

    // The ready documents' ids in library order (the order library_context uses).
    std::vector<DocId> readyIds() {
        std::vector<DocId> ids;
        for (const auto& info : library().list_documents())
            if (info.state == DocumentState::Ready) ids.push_back(info.id);
        return ids;
    }

    // A newer request queued meanwhile is handled when it arrives (request(): the same context
    // keeps going, another one cancels this run); a hold of the gate stops it here.
    void startRun() {
        const quint64 gen = want_gen_;
        std::vector<DocId> ids;
        gate_->setBusy(true);
        try {
            Library& lib = library();
            ids = readyIds();
            if (ids.empty()) {
                gate_->setBusy(false);
                PrefillProgress p;
                p.reason = QObject::tr("no ready document");
                report(p);
                return;
            }
            if (settled_ && settled_model_ == want_model_.get() && settled_ids_ == ids) {
                gate_->setBusy(false);
                report(*settled_);
                return;
            }
            PrefillProgress prep;
            prep.state = PrefillState::Preparing;
            prep.documents = static_cast<int>(ids.size());
            report(prep);
            model_ = want_model_->get();
            if (gate_->held()) return bail();
            if (auto done = completeContext(lib, ids)) {
                gate_->setBusy(false);
                settle(*done, ids);
                return;
            }
            if (gate_->held()) return bail();
            prefill_ = std::make_unique<LibraryPrefill>(lib, *model_, options_.prefill);
        } catch (const std::exception& e) {
            prefill_.reset();
            gate_->setBusy(false);
            PrefillProgress p;
            p.state = PrefillState::Failed;
            p.reason = QString::fromUtf8(e.what());
            p.documents = static_cast<int>(ids.size());
            settle(p, ids);
            return;
        }
        if (gate_->held()) {
            prefill_.reset();
            return bail();
        }
        have_gen_ = gen;
        have_model_ = want_model_;
        prefill_->start();
        LibraryPrefill* p = prefill_.get();
        gate_->setCanceller([p] { p->cancel(); });  // cancel() is thread-safe; cleared before p dies
        report(fromStatus(prefill_->status()));
        tick_->start();
    }

    // The gate is held: its release starts the run again.
    void bail() {
        gate_->setBusy(false);
        reportPaused();
    }

    void finishRun() {
        tick_->stop();
        prefill_->wait();
        gate_->setCanceller({});
        const PrefillStatus st = prefill_->status();
        const bool superseded = want_gen_ != have_gen_;
        // A superseded context whose document was removed cannot be recorded (the removal dropped
        // its record and file; its last chunk may have written the file again): drop the file.
        if (!record(!superseded) && superseded) {
            std::error_code ec;
            std::filesystem::remove(prefill_->context().path, ec);
        }
        PrefillProgress p = fromStatus(st);
        const std::vector<DocId> ids = prefill_->context().ids;
        prefill_.reset();
        gate_->setBusy(false);  // recorded: an answer waiting for the gate may read it now
        if (!st.error.empty()) {
            p.state = PrefillState::Failed;
            p.reason = QString::fromStdString(st.error);
            if (!p.reason.contains(QFileInfo(p.file).fileName())) p.reason += QStringLiteral(" (%1)").arg(p.file);
            settle(p, ids);
        } else if (st.finished) {
            p.state = PrefillState::Complete;
            settle(p, ids);
        } else if (superseded) {
            // The next run reports.
        } else if (gate_->held()) {
            p.state = PrefillState::Paused;
            report(p);
        } else if (!st.cancelled) {
            p.state = PrefillState::Failed;
            p.reason = QObject::tr("the prefill of %1 stopped before the end").arg(p.file);
            settle(p, ids);
        }
        // Else: cancelled by a hold already released; step() starts it again.
    }

    // The context, when its file is complete and recorded so: no session needed. Only builds the
    // context (tokenizes) when the library records a complete library prefill of these documents.
    std::optional<PrefillProgress> completeContext(Library& lib, const std::vector<DocId>& ids) {
        const std::string fingerprint = model_fingerprint(*model_);
        bool candidate = false;
        for (const auto& r : lib.list_kv_caches())
            candidate = candidate || (r.state == KvCacheState::Complete && r.model_fingerprint == fingerprint &&
                                      r.documents == ids && ContextSpec::decode(r.settings).value_or(ContextSpec{}).library_prefill);
        if (!candidate) return std::nullopt;
        const LibraryContext c = library_context(lib, *model_, options_.prefill.max_tokens);
        const auto rec = lib.find_kv_cache(c.fingerprint, c.ids, c.spec.encode());
        if (!rec || rec->state != KvCacheState::Complete || saved_context_tokens(c.path) != c.stream.tokens)
            return std::nullopt;
        PrefillProgress p;
        p.state = PrefillState::Complete;
        p.total = p.done = p.saved = p.resumed_from = static_cast<qint64>(c.stream.tokens.size());
        p.eta_seconds = 0;
        p.documents = static_cast<int>(c.ids.size());
        p.file = QString::fromStdString(c.path);
        return p;
    }

    // False when the library refused the record (a document of the context was removed meanwhile).
    bool record(bool warn = true) {
        try {
            prefill_->record();
            return true;
        } catch (const std::exception& e) {
            if (warn) qWarning("library prefill: %s", e.what());
            return false;
        }
    }

    PrefillProgress fromStatus(const PrefillStatus& st) const {
        PrefillProgress p;
        p.state = st.done > 0 ? PrefillState::Prefilling : PrefillState::Preparing;
        p.done = st.done;
        p.total = st.total;
        p.saved = st.saved;
        p.resumed_from = st.resumed_from;
        p.tokens_per_second = st.tokens_per_second;
        p.eta_seconds = st.eta_seconds;
        if (prefill_) {
            p.documents = static_cast<int>(prefill_->context().ids.size());
            p.file = QString::fromStdString(prefill_->context().path);
        }
        return p;
    }

    void reportPaused() {
        PrefillProgress p = last_;
        p.state = PrefillState::Paused;
        p.tokens_per_second = 0;
        p.eta_seconds = -1;
        report(p);
    }

    void settle(PrefillProgress p, const std::vector<DocId>& ids) {
        settled_ = p;
        settled_ids_ = ids;
        settled_model_ = want_model_.get();
        report(p);
    }

    void report(PrefillProgress p) {
        p.generation = want_gen_;
        last_ = p;
        since_report_.start();
        PrefillController* c = controller_;
        QMetaObject::invokeMethod(c, [c, p] { c->onProgress(p); }, Qt::QueuedConnection);
    }

    const std::filesystem::path dir_;
    const PrefillControllerOptions options_;
    const std::shared_ptr<PrefillGate> gate_;
    PrefillController* const controller_;
    QTimer* tick_ = nullptr;
    QElapsedTimer since_report_;
    std::optional<Library> lib_;
    quint64 want_gen_ = 0, have_gen_ = 0;
    std::shared_ptr<SharedModel> want_model_, have_model_;
    std::shared_ptr<const LoadedModel> model_;
    std::unique_ptr<LibraryPrefill> prefill_;
    PrefillProgress last_;
    // The last context that ended complete or failed: not run again until documents or model change.
    std::optional<PrefillProgress> settled_;
    std::vector<DocId> settled_ids_;
    const SharedModel* settled_model_ = nullptr;
};

PrefillController::PrefillController(std::filesystem::path library_dir, PrefillControllerOptions options,
                                     QObject* parent)
    : QObject(parent), dir_(std::move(library_dir)), options_(options), gate_(std::make_shared<PrefillGate>()) {
    qRegisterMetaType<PrefillProgress>();
    worker_ = new PrefillWorker(dir_, options_, gate_, this);
    worker_->moveToThread(&thread_);
    thread_.setObjectName(QStringLiteral("sightline-prefill"));
    thread_.start();
    gate_->setListener([w = worker_] { QMetaObject::invokeMethod(w, [w] { w->step(); }, Qt::QueuedConnection); });
}

PrefillController::~PrefillController() {
    gate_->setListener({});
    QMetaObject::invokeMethod(worker_, [w = worker_] { w->shutdown(); }, Qt::BlockingQueuedConnection);
    thread_.quit();
    thread_.wait();
    delete worker_;
}

void PrefillController::setModel(std::shared_ptr<SharedModel> model) {
    if (model == model_) return;
    model_ = std::move(model);
    request();
}

void PrefillController::libraryChanged() { request(); }

void PrefillController::pause() {
    ++gui_holds_;
    gate_->hold();
}

void PrefillController::resume() {
    if (gui_holds_ == 0) return;
    --gui_holds_;
    gate_->release();
}

void PrefillController::request() {
    ++generation_;
    QMetaObject::invokeMethod(worker_, [w = worker_, g = generation_, m = model_] { w->request(g, m); },
                              Qt::QueuedConnection);
}

void PrefillController::onProgress(const PrefillProgress& p) {
    progress_ = p;
    Q_EMIT progressChanged(p);
}

}  // namespace sl::desktop
