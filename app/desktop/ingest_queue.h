// Runs the readers for the library's queued files, one file at a time (each reader already uses
// a thread per core within a file), on a worker thread through QtConcurrent + QPromise.
//
// Threading: every public method and every signal runs on the GUI thread. The worker only calls
// read_document() and reports through its QPromise (progress throttled to ~10 Hz by the
// IngestContext); the QFutureWatcher delivers results to the GUI thread, which updates the
// LibraryModel. The model must outlive the queue.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QThreadPool>

#include <atomic>
#include <deque>
#include <filesystem>
#include <memory>

#include "app/desktop/library_model.h"
#include "ingest/ingest_context.h"

namespace sl::desktop {

struct IngestResult {
    std::shared_ptr<const doc::Document> document;  // when read
    QString error;                                  // when not: the reader's message
    bool cancelled = false;
};

class IngestQueue : public QObject {
    Q_OBJECT

public:
    IngestQueue(LibraryModel* model, QObject* parent = nullptr);
    ~IngestQueue() override;  // cancels the running file and waits for it

    void setOptions(const ingest::IngestOptions& options) { options_ = options; }
    // Ingested files are stored in (and unchanged ones loaded back from) the library store in
    // `dir` (sl::Library, opened on the worker). Empty: nothing is stored.
    void setLibraryDir(const std::filesystem::path& dir) { library_dir_ = dir; }
    const std::filesystem::path& libraryDir() const { return library_dir_; }
    // Loads the store's ready documents into the model (on the worker); loaded() when done.
    void loadStored();
    // Removes the file's document from the store (on the worker).
    void forget(const QString& path);
    const ingest::IngestOptions& options() const { return options_; }

    void enqueue(quint64 id);
    // Queued: dropped and marked cancelled. Running: the reader stops at its next check.
    void cancel(quint64 id);
    void cancelAll();
    bool busy() const { return running_id_ != 0 || !queue_.empty(); }

Q_SIGNALS:
    void idle();    // the queue ran dry
    void loaded();  // loadStored() finished
    // The store's documents may have changed: a file's ingest ended (stored, loaded back or failed)
    // or forget() removed one. Only with a library dir.
    void storeChanged();

private:
    void startNext();
    void finished();

    LibraryModel* model_;
    ingest::IngestOptions options_;
    std::filesystem::path library_dir_;
    QThreadPool pool_;
    std::deque<quint64> queue_;
    quint64 running_id_ = 0;
    std::shared_ptr<std::atomic<bool>> running_cancel_;
    QFutureWatcher<IngestResult>* watcher_ = nullptr;
};

}  // namespace sl::desktop
