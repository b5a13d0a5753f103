// The library pane: the list of added files with their kind icon, state line and progress bar
// (a delegate draws them), and Add / Retry / Cancel / Remove, also on the items' context menu
// (with Open, Copy Path and, for a failed file, Why It Failed). Dropping is handled by the main window
// (anywhere on it). GUI thread only; the model and queue must outlive the pane.
#pragma once

#include <QStyledItemDelegate>
#include <QWidget>

class QListView;
class QToolButton;

namespace sl::desktop {

class IngestQueue;
class LibraryModel;

class LibraryDelegate : public QStyledItemDelegate {
    Q_OBJECT

public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

class LibraryPane : public QWidget {
    Q_OBJECT

public:
    LibraryPane(LibraryModel* model, IngestQueue* queue, QWidget* parent = nullptr);

    QListView* view() const { return view_; }
    quint64 currentId() const;  // 0 when nothing is selected

public Q_SLOTS:
    void cancelSelected();
    void removeSelected();
    void retrySelected();  // a failed or cancelled file is queued again

Q_SIGNALS:
    void addRequested();
    void openRequested(quint64 id);

private:
    void updateButtons();
    void showMenu(const QPoint& pos);

    LibraryModel* model_;
    IngestQueue* queue_;
    QListView* view_;
    QToolButton* add_;
    QToolButton* retry_;
    QToolButton* cancel_;
    QToolButton* remove_;
};

}  // namespace sl::desktop
