#include "app/desktop/disk_usage.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <chrono>
#include <system_error>

#include "app/desktop/prefill_gate.h"
#include "core/library/library.h"
#include "core/util/error.h"

namespace sl::desktop {

namespace fs = std::filesystem;

namespace {

// Bytes and files under `folder` (0 when it does not exist).
std::pair<qint64, int> folder_size(const fs::path& folder, QString& error) {
    qint64 bytes = 0;
    int files = 0;
    std::error_code ec;
    if (!fs::exists(folder, ec)) return {0, 0};
    for (auto it = fs::recursive_directory_iterator(folder, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code fe;
        if (!it->is_regular_file(fe)) continue;
        const auto n = it->file_size(fe);
        if (fe) continue;
        bytes += static_cast<qint64>(n);
        ++files;
    }
    if (ec) error = QString::fromStdString(folder.string() + ": " + ec.message());
    return {bytes, files};
}

}  // namespace

QString human_size(qint64 bytes) {
    return QLocale().formattedDataSize(bytes, 1, QLocale::DataSizeTraditionalFormat);
}

DiskUsage measure_disk_usage(const fs::path& dir) {
    DiskUsage u;
    std::error_code ec;
    for (const char* name : {"library.sqlite", "library.sqlite-wal", "library.sqlite-shm"}) {
        const auto n = fs::file_size(dir / name, ec);
        if (!ec) u.database += static_cast<qint64>(n);
    }
    std::tie(u.contexts, u.context_files) = folder_size(dir / "kv", u.error);
    std::tie(u.embeddings, u.embedding_files) = folder_size(dir / "embed", u.error);
    return u;
}

QString clear_saved_contexts(const fs::path& dir) {
    try {
        Library lib = Library::open(dir, LibraryOpen::Existing);
        for (const auto& r : lib.list_kv_caches()) lib.remove_kv_cache(r.id);
        // Files no record names (a crash mid-save, *.tmp).
        std::error_code ec;
        for (auto it = fs::directory_iterator(lib.kv_dir(), ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
            std::error_code fe;
            if (it->is_regular_file(fe)) fs::remove(it->path(), fe);
        }
    } catch (const Error& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

QString clear_search_index(const fs::path& dir) {
    std::error_code ec;
    const fs::path embed = dir / "embed";
    if (!fs::exists(embed, ec)) return {};
    for (auto it = fs::directory_iterator(embed, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::error_code fe;
        fs::remove_all(it->path(), fe);
        if (fe) return QString::fromStdString(it->path().string() + ": " + fe.message());
    }
    return ec ? QString::fromStdString(embed.string() + ": " + ec.message()) : QString();
}

DiskDialog::DiskDialog(fs::path library_dir, qint64 context_cap, std::shared_ptr<PrefillGate> gate, QWidget* parent)
    : QDialog(parent), dir_(std::move(library_dir)), cap_(context_cap), gate_(std::move(gate)) {
    setWindowTitle(tr("Disk Use"));
    setAccessibleName(tr("Disk use of the library"));
    database_ = new QLabel(this);
    contexts_ = new QLabel(this);
    index_ = new QLabel(this);
    total_ = new QLabel(this);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    for (QLabel* l : {database_, contexts_, index_, total_}) l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    clear_contexts_ = new QPushButton(tr("Clear &Saved Contexts…"), this);
    clear_contexts_->setToolTip(tr("Questions then read their documents again (slower) until new contexts are saved."));
    clear_index_ = new QPushButton(tr("Clear Search &Index…"), this);
    clear_index_->setToolTip(tr("The passages' embeddings are computed again on the next question."));
    auto* form = new QFormLayout;
    form->addRow(tr("Folder:"), new QLabel(QString::fromStdString(dir_.string()), this));
    form->addRow(tr("Documents, pictures and chats:"), database_);
    form->addRow(tr("Saved contexts:"), contexts_);
    form->addRow(tr("Search index:"), index_);
    form->addRow(tr("In all:"), total_);
    auto* row = new QHBoxLayout;
    row->addWidget(clear_contexts_);
    row->addWidget(clear_index_);
    row->addStretch(1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(row);
    layout->addWidget(status_);
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto confirm = [this](const QString& text, std::function<void()> then) {
        auto* box = new QMessageBox(QMessageBox::Question, windowTitle(), text, QMessageBox::Yes | QMessageBox::Cancel, this);
        box->setDefaultButton(QMessageBox::Cancel);
        box->setAttribute(Qt::WA_DeleteOnClose);
        connect(box, &QMessageBox::finished, this, [box, then] {
            if (box->clickedButton() == box->button(QMessageBox::Yes)) then();
        });
        box->open();
    };
    connect(clear_contexts_, &QPushButton::clicked, this, [this, confirm] {
        confirm(tr("Remove the %n saved context file(s) (%1)? Questions will read their documents again.", nullptr,
                   usage_.context_files)
                    .arg(human_size(usage_.contexts)),
                [this] { clearContexts(); });
    });
    connect(clear_index_, &QPushButton::clicked, this, [this, confirm] {
        confirm(tr("Remove the search index (%1)? It is computed again on the next question.").arg(human_size(usage_.embeddings)),
                [this] { clearIndex(); });
    });
    status_->setText(tr("Measuring…"));
    refresh();
}

void DiskDialog::show_usage() {
    database_->setText(human_size(usage_.database));
    contexts_->setText(tr("%1 in %n file(s); kept under %2 (the library's own prefilled context not counted), least "
                          "recently used removed first",
                          nullptr, usage_.context_files)
                           .arg(human_size(usage_.contexts), human_size(cap_)));
    index_->setText(tr("%1 in %n file(s)", nullptr, usage_.embedding_files).arg(human_size(usage_.embeddings)));
    total_->setText(human_size(usage_.total()));
    clear_contexts_->setEnabled(usage_.context_files > 0);
    clear_index_->setEnabled(usage_.embedding_files > 0);
}

void DiskDialog::refresh(std::function<void()> done) {
    auto* w = new QFutureWatcher<DiskUsage>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w, done] {
        w->deleteLater();
        usage_ = w->result();
        show_usage();
        if (!usage_.error.isEmpty()) status_->setText(usage_.error);
        else if (status_->text() == tr("Measuring…")) status_->clear();
        if (done) done();
    });
    w->setFuture(QtConcurrent::run(measure_disk_usage, dir_));
}

void DiskDialog::run_clear(std::function<QString()> job, const QString& what) {
    clear_contexts_->setEnabled(false);
    clear_index_->setEnabled(false);
    status_->setText(tr("Removing %1…").arg(what));
    auto* w = new QFutureWatcher<QString>(this);
    connect(w, &QFutureWatcherBase::finished, this, [this, w, what] {
        w->deleteLater();
        const QString error = w->result();
        status_->setText(error.isEmpty() ? tr("Removed the %1.").arg(what) : tr("Could not remove the %1: %2").arg(what, error));
        refresh();
    });
    w->setFuture(QtConcurrent::run(std::move(job)));
}

void DiskDialog::clearContexts() {
    // The background prefill writes into kv/: paused (its file recorded) while the files go.
    run_clear([dir = dir_, gate = gate_] {
        if (gate) {
            gate->hold();
            gate->waitStopped(std::chrono::seconds(30));
        }
        QString error = clear_saved_contexts(dir);
        if (gate) gate->release();
        return error;
    }, tr("saved contexts"));
}

void DiskDialog::clearIndex() { run_clear([dir = dir_] { return clear_search_index(dir); }, tr("search index")); }

}  // namespace sl::desktop
