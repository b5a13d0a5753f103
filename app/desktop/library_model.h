// The library as the app shows it: one row per added file with its kind, state (queued,
// ingesting with progress and ETA, ready, failed with the reason, cancelled) and, once ready, its
// Document. GUI thread only; the IngestQueue feeds it through queued signals.
#pragma once

#include <QAbstractListModel>
#include <QElapsedTimer>
#include <QIcon>

#include <memory>
#include <optional>
#include <vector>

#include "core/document/document.h"

namespace sl::desktop {

enum class ItemState { Queued, Ingesting, Ready, Failed, Cancelled };
const char* to_string(ItemState s);

// The kind a file will be read as, guessed from its extension before it is read.
enum class FileKind { Pdf, Slides, Image, Video, Audio, Text, Unknown };
FileKind guess_kind(const QString& path);
FileKind kind_of(doc::DocumentKind k);
QIcon kind_icon(FileKind k);
QString kind_name(FileKind k);

struct LibraryItem {
    quint64 id = 0;                                // stable for the item's life
    QString path;
    QString name;                                  // file name
    FileKind kind = FileKind::Unknown;
    ItemState state = ItemState::Queued;
    double progress = 0;                           // [0, 1] while ingesting
    QString stage;                                 // what the reader is doing ("page 12 of 113")
    double eta_seconds = -1;                       // < 0: unknown
    QString error;                                 // the reason, when failed
    double seconds = 0;                            // ingest time, when ready (< 0: loaded from the store)
    std::shared_ptr<const doc::Document> document; // when ready
    QElapsedTimer clock;                           // since ingest started
};

class LibraryModel : public QAbstractListModel {
    Q_OBJECT

public:
    enum Role { IdRole = Qt::UserRole + 1, StateRole, ProgressRole, StatusTextRole, ErrorRole, PathRole };

    explicit LibraryModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;

    // Adds a queued item; returns its id. A path already in the library returns the existing id.
    quint64 add(const QString& path);
    void remove(quint64 id);
    int rowOf(quint64 id) const;  // -1 when absent
    const LibraryItem* item(quint64 id) const;
    const std::vector<LibraryItem>& items() const { return items_; }

    // Called by the IngestQueue (GUI thread).
    void setIngesting(quint64 id);
    void setProgress(quint64 id, double fraction, const QString& stage);
    void setReady(quint64 id, std::shared_ptr<const doc::Document> document);
    void setFailed(quint64 id, const QString& reason);
    void setCancelled(quint64 id);

    // The ready documents, in library order.
    std::vector<std::shared_ptr<const doc::Document>> readyDocuments() const;
    // The ready document with this Document::id, or nullptr.
    std::shared_ptr<const doc::Document> documentById(const std::string& id) const;

    // "ingesting 43% · page 49 of 113 · about 12 s left", "ready · 113 pages · 0.9 s", "failed: ..."
    static QString statusText(const LibraryItem& item);

Q_SIGNALS:
    void stateChanged(quint64 id, sl::desktop::ItemState state);

private:
    LibraryItem* find(quint64 id);
    void changed(quint64 id);

    std::vector<LibraryItem> items_;
    quint64 next_id_ = 1;
};

}  // namespace sl::desktop
