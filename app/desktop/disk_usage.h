// File → Disk Use…: what the library takes on disk — its database (documents, thumbnails, chats),
// the saved contexts (kv/: prefilled KV caches, capped by Model → Saved Contexts Size) and the
// search index (embed/: MiniLM passage embeddings) — and clearing the last two. The measuring and
// clearing functions touch no widget and run on a worker thread; the dialog lives on the GUI thread.
#pragma once

#include <QDialog>
#include <QString>

#include <filesystem>
#include <functional>
#include <memory>

class QLabel;
class QPushButton;

namespace sl::desktop {

class PrefillGate;

struct DiskUsage {
    qint64 database = 0;        // library.sqlite with its -wal and -shm files
    qint64 contexts = 0;        // kv/
    int context_files = 0;
    qint64 embeddings = 0;      // embed/
    int embedding_files = 0;
    QString error;              // non-empty when the folder could not be read
    qint64 total() const { return database + contexts + embeddings; }
};

// Sizes under the library folder `dir`. Thread-safe; never throws.
DiskUsage measure_disk_usage(const std::filesystem::path& dir);

// Removes every saved context: the library's records and their files, and any other file in kv/
// (left by a crash). Returns an error message, or empty. Runs on the calling (worker) thread,
// which opens its own Library connection.
QString clear_saved_contexts(const std::filesystem::path& dir);

// Removes the search index's cached embeddings (recomputed on the next question). Returns an
// error message, or empty.
QString clear_search_index(const std::filesystem::path& dir);

// "1.2 GiB", "340 MiB", "12 KiB", "0 bytes".
QString human_size(qint64 bytes);

class DiskDialog : public QDialog {
public:
    // `gate` (may be null) pauses the background prefill while saved contexts are cleared.
    DiskDialog(std::filesystem::path library_dir, qint64 context_cap, std::shared_ptr<PrefillGate> gate,
               QWidget* parent = nullptr);

    const DiskUsage& usage() const { return usage_; }
    // Clears without asking (what the buttons do after their confirmation); for tests.
    void clearContexts();
    void clearIndex();
    // Measures again (asynchronously); `done` runs on the GUI thread after the labels are updated.
    void refresh(std::function<void()> done = {});

private:
    void show_usage();
    void run_clear(std::function<QString()> job, const QString& what);

    std::filesystem::path dir_;
    qint64 cap_;
    std::shared_ptr<PrefillGate> gate_;
    DiskUsage usage_;
    QLabel* database_;
    QLabel* contexts_;
    QLabel* index_;
    QLabel* total_;
    QLabel* status_;
    QPushButton* clear_contexts_;
    QPushButton* clear_index_;
};

}  // namespace sl::desktop
