#include "app/desktop/ingest_queue.h"

#include <QPromise>
#include <QtConcurrent>

#include <algorithm>

#include "app/common/byte_args.h"
#include "core/library/library.h"
#include "core/util/error.h"
#include "ingest/ingest_error.h"
#include "ingest/reader.h"

namespace sl::desktop {

namespace {

// Reads `path`, and with a store stores it there (or loads it back when unchanged). Runs on a
// worker thread; never touches widgets or the model.
void ingest_file(QPromise<IngestResult>& promise, const QString& path, const ingest::IngestOptions& options,
                 const std::shared_ptr<std::atomic<bool>>& cancel, const std::filesystem::path& store) {
    promise.setProgressRange(0, 1000);
    IngestResult r;
    try {
        auto read = [&](const std::string& p) {
            ingest::IngestContext ctx(
                options,
                [&promise, &cancel](double fraction, const std::string& what) {
                    if (promise.isCanceled()) cancel->store(true);
                    promise.setProgressValueAndText(static_cast<int>(fraction * 1000), QString::fromStdString(what));
                },
                cancel.get());
            doc::Document d = ingest::read_document(p, ctx);
            r.document = std::make_shared<const doc::Document>(d);
            return d;
        };
        if (store.empty()) {
            read(arg_bytes(path));
        } else {
            Library lib = Library::open(store);
            AddOptions add;
            add.ingest_options = std::string("{\"ocr\":") + (options.ocr ? "true" : "false") + "}";
            const AddResult a = add_file(lib, arg_bytes(path), read, add);
            switch (a.status) {
                case AddStatus::Added:
                case AddStatus::Replaced: break;
                case AddStatus::Unchanged:
                case AddStatus::Duplicate:
                    // Read once before: loaded back from the store instead of read again.
                    if (!r.document) r.document = std::make_shared<const doc::Document>(lib.load_document(a.id));
                    break;
                case AddStatus::Failed:
                    r.document.reset();
                    r.error = QString::fromStdString(a.message);
                    break;
            }
        }
    } catch (const ingest::IngestError& e) {
        r.cancelled = e.kind() == ingest::IngestErrorKind::Cancelled;
        r.error = QString::fromStdString(e.what());
    } catch (const std::bad_alloc&) {
        r.error = path + QStringLiteral(": out of memory while reading the file");
    } catch (const std::exception& e) {
        r.error = QString::fromStdString(e.what());
    }
    if (cancel->load()) r.cancelled = true;
    promise.addResult(std::move(r));
}

}  // namespace

IngestQueue::IngestQueue(LibraryModel* model, QObject* parent) : QObject(parent), model_(model) {
    pool_.setMaxThreadCount(1);
    options_.ocr = true;
}

IngestQueue::~IngestQueue() {
    queue_.clear();
    if (running_cancel_) running_cancel_->store(true);
    if (watcher_) watcher_->disconnect(this);
    pool_.waitForDone();
}

void IngestQueue::loadStored() {
    if (library_dir_.empty()) {
        Q_EMIT loaded();
        return;
    }
    // The stored files in the order they were added (document ids), ready and failed alike, so the
    // library reads the same after a restart as before it.
    struct Entry {
        QString path;
        std::shared_ptr<const doc::Document> document;  // null: failed, `reason` says why
        QString reason;
    };
    struct Stored {
        std::vector<Entry> entries;
        QString error;
    };
    auto* w = new QFutureWatcher<Stored>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        const Stored s = w->result();
        for (const auto& e : s.entries) {
            if (e.document) model_->setReady(model_->add(e.path), e.document);
            else model_->setFailed(model_->add(e.path), e.reason);
        }
        if (!s.error.isEmpty()) qWarning("library store: %s", qPrintable(s.error));
        Q_EMIT loaded();
    });
    // Runs on the pool's thread (before any queued file): opens the store and loads its documents.
    w->setFuture(QtConcurrent::run(&pool_, [dir = library_dir_]() -> Stored {
        Stored s;
        try {
            Library lib = Library::open(dir);
            std::vector<DocumentInfo> infos = lib.list_documents();
            std::sort(infos.begin(), infos.end(), [](const DocumentInfo& a, const DocumentInfo& b) { return a.id < b.id; });
            for (const auto& info : infos) {
                if (info.state == DocumentState::Ready)
                    s.entries.push_back({decode_arg(info.path.c_str()),
                                         std::make_shared<const doc::Document>(lib.load_document(info.id)), {}});
                else if (info.state == DocumentState::Failed)
                    s.entries.push_back({decode_arg(info.path.c_str()), nullptr, QString::fromStdString(info.error)});
            }
        } catch (const std::exception& e) {
            s.error = QString::fromUtf8(e.what());
        }
        return s;
    }));
}

void IngestQueue::forget(const QString& path) {
    if (library_dir_.empty()) return;
    // Runs on the pool's thread, after the file's own ingest (if any) has stopped.
    auto* w = new QFutureWatcher<void>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w] {
        w->deleteLater();
        Q_EMIT storeChanged();
    });
    w->setFuture(QtConcurrent::run(&pool_, [dir = library_dir_, p = arg_bytes(path)] {
        try {
            Library lib = Library::open(dir);
            if (auto info = lib.find_any_by_path(p)) lib.remove_document(info->id);
        } catch (const std::exception& e) {
            qWarning("library store: %s", e.what());
        }
    }));
}

void IngestQueue::enqueue(quint64 id) {
    if (id == running_id_) return;
    for (quint64 q : queue_)
        if (q == id) return;
    queue_.push_back(id);
    startNext();
}

void IngestQueue::cancel(quint64 id) {
    if (id == running_id_ && running_cancel_) {
        running_cancel_->store(true);
        return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if (*it == id) {
            queue_.erase(it);
            model_->setCancelled(id);
            return;
        }
}

void IngestQueue::cancelAll() {
    while (!queue_.empty()) cancel(queue_.front());
    if (running_id_) cancel(running_id_);
}

void IngestQueue::startNext() {
    if (running_id_ != 0) return;
    while (!queue_.empty()) {
        const quint64 id = queue_.front();
        queue_.pop_front();
        const LibraryItem* item = model_->item(id);
        if (!item) continue;  // removed meanwhile
        running_id_ = id;
        running_cancel_ = std::make_shared<std::atomic<bool>>(false);
        model_->setIngesting(id);
        watcher_ = new QFutureWatcher<IngestResult>(this);
        connect(watcher_, &QFutureWatcherBase::progressValueChanged, this, [this, id](int value) {
            model_->setProgress(id, value / 1000.0, watcher_ ? watcher_->progressText() : QString());
        });
        connect(watcher_, &QFutureWatcherBase::finished, this, &IngestQueue::finished);
        watcher_->setFuture(QtConcurrent::run(&pool_, ingest_file, item->path, options_, running_cancel_, library_dir_));
        return;
    }
    Q_EMIT idle();
}

void IngestQueue::finished() {
    const quint64 id = running_id_;
    QFutureWatcher<IngestResult>* w = watcher_;
    watcher_ = nullptr;
    running_id_ = 0;
    running_cancel_.reset();
    IngestResult r;
    if (w->future().resultCount() > 0) r = w->future().result();
    else r.error = tr("the reader stopped without a result");
    w->deleteLater();
    if (r.cancelled) {
        model_->setCancelled(id);
        if (const LibraryItem* it = model_->item(id)) forget(it->path);  // no "failed: cancelled" row kept
    }
    else if (r.document) model_->setReady(id, r.document);
    else model_->setFailed(id, r.error);
    if (!r.cancelled && !library_dir_.empty()) Q_EMIT storeChanged();
    startNext();
}

}  // namespace sl::desktop
