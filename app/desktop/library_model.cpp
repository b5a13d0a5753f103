#include "app/desktop/library_model.h"

#include <QFileInfo>

#include <cmath>

#include "core/document/locator.h"

namespace sl::desktop {

const char* to_string(ItemState s) {
    switch (s) {
        case ItemState::Queued: return "queued";
        case ItemState::Ingesting: return "ingesting";
        case ItemState::Ready: return "ready";
        case ItemState::Failed: return "failed";
        case ItemState::Cancelled: return "cancelled";
    }
    return "?";
}

FileKind guess_kind(const QString& path) {
    const QString ext = QFileInfo(path).suffix().toLower();
    if (ext == QLatin1String("pdf")) return FileKind::Pdf;
    if (ext == QLatin1String("pptx")) return FileKind::Slides;
    static const QStringList images = {QStringLiteral("png"), QStringLiteral("jpg"), QStringLiteral("jpeg"),
                                       QStringLiteral("webp"), QStringLiteral("tif"), QStringLiteral("tiff"),
                                       QStringLiteral("bmp"), QStringLiteral("gif")};
    static const QStringList videos = {QStringLiteral("mp4"), QStringLiteral("mkv"), QStringLiteral("webm"),
                                       QStringLiteral("avi"), QStringLiteral("mov"), QStringLiteral("m4v")};
    static const QStringList audios = {QStringLiteral("wav"), QStringLiteral("mp3"), QStringLiteral("flac"),
                                       QStringLiteral("ogg"), QStringLiteral("m4a"), QStringLiteral("opus")};
    if (images.contains(ext)) return FileKind::Image;
    if (videos.contains(ext)) return FileKind::Video;
    if (audios.contains(ext)) return FileKind::Audio;
    static const QStringList texts = {QStringLiteral("docx"), QStringLiteral("txt"), QStringLiteral("md"),
                                      QStringLiteral("markdown"), QStringLiteral("html"), QStringLiteral("htm"),
                                      QStringLiteral("xhtml"), QStringLiteral("epub")};
    if (texts.contains(ext)) return FileKind::Text;
    return FileKind::Unknown;
}

FileKind kind_of(doc::DocumentKind k) {
    switch (k) {
        case doc::DocumentKind::Pdf: return FileKind::Pdf;
        case doc::DocumentKind::Slides: return FileKind::Slides;
        case doc::DocumentKind::Image: return FileKind::Image;
        case doc::DocumentKind::Video: return FileKind::Video;
        case doc::DocumentKind::Audio: return FileKind::Audio;
        case doc::DocumentKind::Text: return FileKind::Text;
    }
    return FileKind::Unknown;
}

QIcon kind_icon(FileKind k) {
    switch (k) {
        case FileKind::Pdf: return QIcon(QStringLiteral(":/icons/kind-pdf.svg"));
        case FileKind::Slides: return QIcon(QStringLiteral(":/icons/kind-slides.svg"));
        case FileKind::Image: return QIcon(QStringLiteral(":/icons/kind-image.svg"));
        case FileKind::Video: return QIcon(QStringLiteral(":/icons/kind-video.svg"));
        case FileKind::Audio: return QIcon(QStringLiteral(":/icons/kind-audio.svg"));
        case FileKind::Text: return QIcon(QStringLiteral(":/icons/kind-text.svg"));
        case FileKind::Unknown: break;
    }
    return QIcon(QStringLiteral(":/icons/kind-unknown.svg"));
}

QString kind_name(FileKind k) {
    switch (k) {
        case FileKind::Pdf: return QObject::tr("PDF document");
        case FileKind::Slides: return QObject::tr("Slide deck");
        case FileKind::Image: return QObject::tr("Image");
        case FileKind::Video: return QObject::tr("Video");
        case FileKind::Audio: return QObject::tr("Audio");
        case FileKind::Text: return QObject::tr("Text document");
        case FileKind::Unknown: break;
    }
    return QObject::tr("File");
}

LibraryModel::LibraryModel(QObject* parent) : QAbstractListModel(parent) {}

int LibraryModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(items_.size());
}

namespace {

QString seconds_text(double s) {
    if (s < 60) return QObject::tr("%1 s").arg(static_cast<int>(std::ceil(s)));
    const int m = static_cast<int>(s / 60);
    return QObject::tr("%1 min %2 s").arg(m).arg(static_cast<int>(s) - 60 * m);
}

QString units_text(const doc::Document& d) {
    const int n = static_cast<int>(d.units.size());
    switch (d.kind) {
        case doc::DocumentKind::Pdf: return n == 1 ? QObject::tr("1 page") : QObject::tr("%1 pages").arg(n);
        case doc::DocumentKind::Slides: return n == 1 ? QObject::tr("1 slide") : QObject::tr("%1 slides").arg(n);
        case doc::DocumentKind::Video:
        case doc::DocumentKind::Audio:
            return QString::fromStdString(doc::format_time(d.duration)) +
                   (n == 1 ? QObject::tr(", 1 segment") : QObject::tr(", %1 segments").arg(n));
        case doc::DocumentKind::Image: return QObject::tr("image");
        case doc::DocumentKind::Text: return n == 1 ? QObject::tr("1 section") : QObject::tr("%1 sections").arg(n);
    }
    return {};
}

}  // namespace

QString LibraryModel::statusText(const LibraryItem& it) {
    switch (it.state) {
        case ItemState::Queued: return tr("queued");
        case ItemState::Ingesting: {
            QString s = tr("ingesting %1%").arg(static_cast<int>(it.progress * 100));
            if (!it.stage.isEmpty()) s += QStringLiteral(" · ") + it.stage;
            if (it.eta_seconds >= 0) s += tr(" · about %1 left").arg(seconds_text(it.eta_seconds));
            return s;
        }
        case ItemState::Ready:
            if (it.seconds < 0)  // loaded back from the library store, not read in this session
                return tr("ready · %1").arg(it.document ? units_text(*it.document) : QString());
            return tr("ready · %1 · %2").arg(it.document ? units_text(*it.document) : QString(),
                                            QString::number(it.seconds, 'f', 1) + QStringLiteral(" s"));
        case ItemState::Failed: return tr("failed: %1").arg(it.error);
        case ItemState::Cancelled: return tr("cancelled");
    }
    return {};
}

QVariant LibraryModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const LibraryItem& it = items_[static_cast<size_t>(index.row())];
    switch (role) {
        case Qt::DisplayRole: return it.name;
        case Qt::DecorationRole: return kind_icon(it.kind);
        case Qt::ToolTipRole: return it.path + QLatin1Char('\n') + statusText(it);
        case Qt::AccessibleTextRole: return it.name + QStringLiteral(", ") + statusText(it);
        case Qt::AccessibleDescriptionRole: return kind_name(it.kind);
        case IdRole: return it.id;
        case StateRole: return static_cast<int>(it.state);
        case ProgressRole: return it.progress;
        case StatusTextRole: return statusText(it);
        case ErrorRole: return it.error;
        case PathRole: return it.path;
        default: return {};
    }
}

quint64 LibraryModel::add(const QString& path) {
    const QString abs = QFileInfo(path).absoluteFilePath();
    for (const auto& it : items_)
        if (it.path == abs && it.state != ItemState::Failed && it.state != ItemState::Cancelled) return it.id;
    for (size_t i = 0; i < items_.size(); ++i)
        if (items_[i].path == abs) {  // a failed or cancelled file added again: retry it
            items_[i].state = ItemState::Queued;
            items_[i].error.clear();
            items_[i].progress = 0;
            changed(items_[i].id);
            Q_EMIT stateChanged(items_[i].id, ItemState::Queued);
            return items_[i].id;
        }
    LibraryItem it;
    it.id = next_id_++;
    it.path = abs;
    it.name = QFileInfo(abs).fileName();
    it.kind = guess_kind(abs);
    const int row = rowCount();
    beginInsertRows({}, row, row);
    items_.push_back(std::move(it));
    endInsertRows();
    Q_EMIT stateChanged(items_.back().id, ItemState::Queued);
    return items_.back().id;
}

void LibraryModel::remove(quint64 id) {
    const int row = rowOf(id);
    if (row < 0) return;
    beginRemoveRows({}, row, row);
    items_.erase(items_.begin() + row);
    endRemoveRows();
}

int LibraryModel::rowOf(quint64 id) const {
    for (size_t i = 0; i < items_.size(); ++i)
        if (items_[i].id == id) return static_cast<int>(i);
    return -1;
}

const LibraryItem* LibraryModel::item(quint64 id) const {
    const int row = rowOf(id);
    return row < 0 ? nullptr : &items_[static_cast<size_t>(row)];
}

LibraryItem* LibraryModel::find(quint64 id) {
    const int row = rowOf(id);
    return row < 0 ? nullptr : &items_[static_cast<size_t>(row)];
}

void LibraryModel::changed(quint64 id) {
    const int row = rowOf(id);
    if (row >= 0) Q_EMIT dataChanged(index(row), index(row));
}

void LibraryModel::setIngesting(quint64 id) {
    LibraryItem* it = find(id);
    if (!it) return;
    it->state = ItemState::Ingesting;
    it->progress = 0;
    it->eta_seconds = -1;
    it->clock.start();
    changed(id);
    Q_EMIT stateChanged(id, it->state);
}

void LibraryModel::setProgress(quint64 id, double fraction, const QString& stage) {
    LibraryItem* it = find(id);
    if (!it || it->state != ItemState::Ingesting) return;
    it->progress = std::clamp(fraction, 0.0, 1.0);
    it->stage = stage;
    const double elapsed = static_cast<double>(it->clock.elapsed()) / 1000.0;
    // A rate once a little work is done; earlier estimates swing too much to be useful.
    it->eta_seconds = (it->progress > 0.02 && elapsed > 0.5) ? elapsed * (1.0 - it->progress) / it->progress : -1;
    changed(id);
}

void LibraryModel::setReady(quint64 id, std::shared_ptr<const doc::Document> document) {
    LibraryItem* it = find(id);
    if (!it) return;
    it->state = ItemState::Ready;
    it->progress = 1;
    it->stage.clear();
    it->seconds = it->clock.isValid() ? static_cast<double>(it->clock.elapsed()) / 1000.0 : -1;
    if (document) it->kind = kind_of(document->kind);
    it->document = std::move(document);
    changed(id);
    Q_EMIT stateChanged(id, it->state);
}

void LibraryModel::setFailed(quint64 id, const QString& reason) {
    LibraryItem* it = find(id);
    if (!it) return;
    it->state = ItemState::Failed;
    it->error = reason;
    it->stage.clear();
    changed(id);
    Q_EMIT stateChanged(id, it->state);
}

void LibraryModel::setCancelled(quint64 id) {
    LibraryItem* it = find(id);
    if (!it) return;
    it->state = ItemState::Cancelled;
    it->stage.clear();
    changed(id);
    Q_EMIT stateChanged(id, it->state);
}

std::vector<std::shared_ptr<const doc::Document>> LibraryModel::readyDocuments() const {
    std::vector<std::shared_ptr<const doc::Document>> out;
    for (const auto& it : items_)
        if (it.state == ItemState::Ready && it.document) out.push_back(it.document);
    return out;
}

std::shared_ptr<const doc::Document> LibraryModel::documentById(const std::string& id) const {
    for (const auto& it : items_)
        if (it.document && it.document->id == id) return it.document;
    return nullptr;
}

}  // namespace sl::desktop
