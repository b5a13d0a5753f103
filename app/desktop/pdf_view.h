// The PDF page view: one page at a time in a scroll area, zoom (fit width, in, out, Ctrl+wheel
// around the pointer), page navigation, a side panel (Contents) with the outline tree and the
// page thumbnails (rendered as they scroll into view, on the render thread), find in the
// document (Ctrl+F: hits counted, Enter / F3 to the next, the line highlighted), and the cited
// region highlighted and scrolled into view. Pages are rendered on
// demand by ingest's PdfPageRenderer on a single worker thread (it is not thread-safe; one pool
// thread serialises its use); the GUI thread only paints the resulting QImage.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QThreadPool>
#include <QWidget>

#include <memory>
#include <optional>

#include "app/desktop/document_search.h"
#include "core/document/document.h"

class QLabel;
class QLineEdit;
class QScrollArea;
class QListWidget;
class QSplitter;
class QTabWidget;
class QTimer;
class QTreeWidget;
class QSpinBox;
class QToolButton;

namespace sl::ingest {
class PdfPageRenderer;
}

namespace sl::desktop {

class HighlightCanvas;

class PdfView : public QWidget {
    Q_OBJECT

public:
    explicit PdfView(QWidget* parent = nullptr);
    ~PdfView() override;

    // Shows `page` (0-based) of `document`, highlighting `box` (normalized) and scrolling to it.
    void showPage(std::shared_ptr<const doc::Document> document, int page, std::optional<doc::BBox> box);

    int currentPage() const { return page_; }
    std::optional<doc::BBox> highlight() const;
    double zoom() const { return zoom_; }     // 1.0 = 72 dpi; fit width recomputes it
    bool rendered() const { return rendered_page_ == page_ && page_ >= 0; }
    HighlightCanvas* canvas() const { return canvas_; }

    // Find: opens the find bar with `text` (empty: as it was) and goes to the first hit at or
    // after the current page. hitCount() / currentHit() (0-based, -1: none) say where it is.
    void find(const QString& text = {});
    int hitCount() const { return static_cast<int>(hits_.size()); }
    int currentHit() const { return hit_; }
    QTreeWidget* outlineTree() const { return outline_; }
    QListWidget* pageList() const { return pages_; }
    QTabWidget* sidePanel() const { return side_; }

public Q_SLOTS:
    void findNext();
    void findPrevious();
    void zoomIn();
    void zoomOut();
    void fitWidth();
    void nextPage();
    void previousPage();

Q_SIGNALS:
    void pageChanged(int page);       // `page` is the current page now (its render may follow)
    void pageShown(int page);         // the render of `page` is on screen
    void renderFailed(const QString& message);

protected:
    void resizeEvent(QResizeEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;  // Ctrl+wheel on the page

private:
    void render();
    void rendered(int page, const QImage& image, const QString& error);
    void scrollToHighlight();
    void runSearch();
    void goToHit(int i);
    void fillOutline();
    void fillPages();
    void renderVisibleThumbnails();
    void zoomAt(double factor, const QPoint& viewport_pos);

    std::shared_ptr<const doc::Document> document_;
    // The open document for renders; the holder is replaced on the GUI thread when the document
    // changes, its content is created and used only on pool_'s thread.
    std::shared_ptr<std::shared_ptr<ingest::PdfPageRenderer>> renderer_;
    QThreadPool pool_;
    int page_ = -1;
    int rendered_page_ = -1;
    double zoom_ = 1.0;
    bool fit_width_ = true;
    quint64 request_ = 0;
    std::optional<doc::BBox> box_;

    QScrollArea* scroll_;
    HighlightCanvas* canvas_;
    QSpinBox* page_box_;
    QLabel* page_count_;
    QLabel* zoom_label_;
    QSplitter* split_;
    QTreeWidget* outline_;
    QListWidget* pages_;
    QTabWidget* side_;
    std::string pages_for_;          // the document whose pages the list shows
    std::vector<bool> thumb_asked_;  // per page: a thumbnail render was requested
    QToolButton* contents_;
    QWidget* find_bar_;
    QLineEdit* find_;
    QLabel* hits_label_;
    QTimer* find_timer_;
    std::vector<SearchHit> hits_;
    int hit_ = -1;
    std::string outline_for_;  // the document whose outline the tree shows
    // Ctrl+wheel zoom: the point of the page (fraction of the canvas) kept under the pointer.
    std::optional<std::pair<QPointF, QPoint>> zoom_anchor_;
};

}  // namespace sl::desktop
