#include "app/desktop/library_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QMenu>
#include <QMessageBox>
#include <QPainter>
#include <QStyleOptionProgressBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/desktop/ingest_queue.h"
#include "app/desktop/library_model.h"

namespace sl::desktop {

namespace {

QIcon state_icon(ItemState s) {
    switch (s) {
        case ItemState::Ready: return QIcon(QStringLiteral(":/icons/state-ready.svg"));
        case ItemState::Failed: return QIcon(QStringLiteral(":/icons/state-failed.svg"));
        case ItemState::Queued: return QIcon(QStringLiteral(":/icons/state-queued.svg"));
        case ItemState::Cancelled: return QIcon(QStringLiteral(":/icons/action-cancel.svg"));
        case ItemState::Ingesting: break;
    }
    return {};
}

}  // namespace

QSize LibraryDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex&) const {
    const int line = option.fontMetrics.height();
    return {240, 3 * line + 14};
}

void LibraryDelegate::paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const {
    QStyleOptionViewItem opt = option;
    initStyleOption(&opt, index);
    const QWidget* w = opt.widget;
    QStyle* style = w ? w->style() : QApplication::style();
    opt.text.clear();
    opt.icon = QIcon();
    style->drawControl(QStyle::CE_ItemViewItem, &opt, p, w);  // background, selection, focus

    const auto state = static_cast<ItemState>(index.data(LibraryModel::StateRole).toInt());
    const QRect r = option.rect.adjusted(6, 5, -6, -5);
    const int line = option.fontMetrics.height();
    const int icon = 2 * line + 4;
    index.data(Qt::DecorationRole).value<QIcon>().paint(p, QRect(r.left(), r.top(), icon, icon));
    const QRect text(r.left() + icon + 8, r.top(), r.width() - icon - 8 - line - 4, r.height());
    const bool selected = opt.state & QStyle::State_Selected;
    const QPalette::ColorGroup cg = (opt.state & QStyle::State_Enabled) ? QPalette::Normal : QPalette::Disabled;
    p->save();
    QFont bold = opt.font;
    bold.setBold(true);
    p->setFont(bold);
    p->setPen(opt.palette.color(cg, selected ? QPalette::HighlightedText : QPalette::Text));
    p->drawText(QRect(text.left(), text.top(), text.width(), line), Qt::AlignLeft | Qt::AlignVCenter,
                option.fontMetrics.elidedText(index.data(Qt::DisplayRole).toString(), Qt::ElideMiddle, text.width()));
    p->setFont(opt.font);
    QColor status = opt.palette.color(cg, selected ? QPalette::HighlightedText : QPalette::PlaceholderText);
    if (state == ItemState::Failed && !selected) status = QColor(0xc0392b);
    p->setPen(status);
    const QString st = index.data(LibraryModel::StatusTextRole).toString();
    p->drawText(QRect(text.left(), text.top() + line + 2, text.width(), line), Qt::AlignLeft | Qt::AlignVCenter,
                option.fontMetrics.elidedText(st, Qt::ElideRight, text.width()));
    p->restore();
    if (state == ItemState::Ingesting) {
        QStyleOptionProgressBar bar;
        bar.rect = QRect(text.left(), text.top() + 2 * line + 5, text.width(), std::max(6, line / 2));
        bar.minimum = 0;
        bar.maximum = 1000;
        bar.progress = static_cast<int>(index.data(LibraryModel::ProgressRole).toDouble() * 1000);
        bar.state = QStyle::State_Enabled | QStyle::State_Horizontal;
        bar.palette = opt.palette;
        style->drawControl(QStyle::CE_ProgressBar, &bar, p, w);
    } else {
        state_icon(state).paint(p, QRect(r.right() - line, r.top(), line, line));
    }
}

LibraryPane::LibraryPane(LibraryModel* model, IngestQueue* queue, QWidget* parent)
    : QWidget(parent), model_(model), queue_(queue) {
    setAccessibleName(tr("Library"));
    view_ = new QListView(this);
    view_->setModel(model_);
    view_->setItemDelegate(new LibraryDelegate(view_));
    view_->setAccessibleName(tr("Library files"));
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setUniformItemSizes(true);
    auto make = [this](const QString& icon, const QString& text, const QString& tip) {
        auto* b = new QToolButton(this);
        b->setIcon(QIcon(icon));
        b->setText(text);
        b->setToolTip(tip);
        b->setAccessibleName(text);
        b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
        b->setAutoRaise(true);
        return b;
    };
    add_ = make(QStringLiteral(":/icons/action-add.svg"), tr("Add"), tr("Add files or folders (Ctrl+O)"));
    retry_ = make(QStringLiteral(":/icons/state-queued.svg"), tr("Retry"), tr("Read the selected failed or cancelled file again"));
    cancel_ = make(QStringLiteral(":/icons/action-cancel.svg"), tr("Cancel"), tr("Cancel reading the selected file"));
    remove_ = make(QStringLiteral(":/icons/action-remove.svg"), tr("Remove"), tr("Remove the selected file (Delete)"));
    remove_->setShortcut(QKeySequence::Delete);
    auto* title = new QLabel(tr("<b>Library</b>"), this);
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(6, 4, 4, 0);
    bar->addWidget(title, 1);
    bar->addWidget(add_);
    bar->addWidget(retry_);
    bar->addWidget(cancel_);
    bar->addWidget(remove_);
    auto* hint = new QLabel(tr("Drop PDFs, slide decks, images, videos or folders anywhere on the window."), this);
    hint->setWordWrap(true);
    hint->setContentsMargins(6, 0, 6, 4);
    hint->setForegroundRole(QPalette::PlaceholderText);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(bar);
    layout->addWidget(hint);
    layout->addWidget(view_, 1);

    connect(add_, &QToolButton::clicked, this, &LibraryPane::addRequested);
    connect(retry_, &QToolButton::clicked, this, &LibraryPane::retrySelected);
    connect(cancel_, &QToolButton::clicked, this, &LibraryPane::cancelSelected);
    view_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(view_, &QListView::customContextMenuRequested, this, &LibraryPane::showMenu);
    connect(remove_, &QToolButton::clicked, this, &LibraryPane::removeSelected);
    connect(view_, &QListView::activated, this, [this](const QModelIndex& i) {
        Q_EMIT openRequested(i.data(LibraryModel::IdRole).toULongLong());
    });
    connect(view_->selectionModel(), &QItemSelectionModel::currentChanged, this, &LibraryPane::updateButtons);
    connect(model_, &QAbstractItemModel::dataChanged, this, &LibraryPane::updateButtons);
    connect(model_, &QAbstractItemModel::rowsRemoved, this, &LibraryPane::updateButtons);
    updateButtons();
}

quint64 LibraryPane::currentId() const {
    const QModelIndex i = view_->currentIndex();
    return i.isValid() ? i.data(LibraryModel::IdRole).toULongLong() : 0;
}

void LibraryPane::cancelSelected() {
    if (const quint64 id = currentId()) queue_->cancel(id);
}

void LibraryPane::removeSelected() {
    const quint64 id = currentId();
    if (!id) return;
    queue_->cancel(id);
    const LibraryItem* it = model_->item(id);
    if (it) queue_->forget(it->path);  // queued after the running file, so after its reader stops
    // A file being read is removed once its reader has stopped (IngestQueue marks it cancelled).
    if (it && it->state == ItemState::Ingesting) {
        auto* conn = new QMetaObject::Connection;
        *conn = connect(model_, &LibraryModel::stateChanged, this, [this, id, conn](quint64 changed, ItemState) {
            if (changed != id) return;
            disconnect(*conn);
            delete conn;
            model_->remove(id);
        });
        return;
    }
    model_->remove(id);
}

void LibraryPane::retrySelected() {
    const LibraryItem* it = model_->item(currentId());
    if (!it || (it->state != ItemState::Failed && it->state != ItemState::Cancelled)) return;
    const QString path = it->path;
    const quint64 id = model_->add(path);  // a failed or cancelled item goes back to Queued
    queue_->enqueue(id);
}

void LibraryPane::updateButtons() {
    const LibraryItem* it = model_->item(currentId());
    retry_->setEnabled(it && (it->state == ItemState::Failed || it->state == ItemState::Cancelled));
    cancel_->setEnabled(it && (it->state == ItemState::Queued || it->state == ItemState::Ingesting));
    remove_->setEnabled(it != nullptr);
}

void LibraryPane::showMenu(const QPoint& pos) {
    const QModelIndex index = view_->indexAt(pos);
    if (!index.isValid()) return;
    view_->setCurrentIndex(index);
    const LibraryItem* it = model_->item(currentId());
    if (!it) return;
    const quint64 id = it->id;
    const QString path = it->path, error = it->error, name = it->name;
    auto* menu = new QMenu(this);
    menu->setAttribute(Qt::WA_DeleteOnClose);
    QAction* open = menu->addAction(tr("&Open"), this, [this, id] { Q_EMIT openRequested(id); });
    open->setEnabled(it->state == ItemState::Ready);
    menu->addAction(retry_->icon(), tr("&Retry"), this, &LibraryPane::retrySelected)->setEnabled(retry_->isEnabled());
    menu->addAction(cancel_->icon(), tr("&Cancel"), this, &LibraryPane::cancelSelected)->setEnabled(cancel_->isEnabled());
    if (it->state == ItemState::Failed && !error.isEmpty())
        menu->addAction(tr("&Why It Failed…"), this, [this, name, error] {
            auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot read %1").arg(name), error, QMessageBox::Ok, this);
            box->setAttribute(Qt::WA_DeleteOnClose);
            box->open();
        });
    menu->addAction(tr("Copy &Path"), this, [path] { QGuiApplication::clipboard()->setText(path); });
    menu->addSeparator();
    menu->addAction(remove_->icon(), tr("Re&move"), this, &LibraryPane::removeSelected);
    menu->popup(view_->viewport()->mapToGlobal(pos));
}

}  // namespace sl::desktop
