// The PDF view: the pages stacked in one scroll area (continuous mode, PdfPageStack), the current
// page following the scroll position (the page covering most of the viewport), zoom (fit width,
// in, out, Ctrl+wheel around the pointer) keeping the reading position, page navigation (Page
// Up / Down, the page box, the outline, the thumbnails) to page tops, a side panel (Contents)
// with the outline tree and the page thumbnails (rendered as they scroll into view), find in the
// document (Ctrl+F: hits counted, Enter / F3 to the next, the line highlighted), and the cited
// region highlighted and scrolled into view. Pages and thumbnails are rendered by one
// PdfRenderQueue (a single worker thread; ingest's PdfPageRenderer is not thread-safe) only as
// they come near the viewport; the worker never touches widgets, the GUI thread paints the
// resulting QImages. GUI thread only.
#pragma once

#include <QPointF>
#include <QWidget>

#include <memory>
#include <optional>

#include "app/desktop/document_search.h"
#include "app/desktop/pdf_render_queue.h"
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

namespace sl::desktop {

class HighlightCanvas;
class PdfPageStack;

class PdfView : public QWidget {
    Q_OBJECT

public:
    explicit PdfView(QWidget* parent = nullptr);
    ~PdfView() override;

    // Makes `page` (0-based) of `document` the current page: scrolls to its top or, with `box`
    // (normalized), highlights that region and scrolls it into view (where it is not already).
    void showPage(std::shared_ptr<const doc::Document> document, int page, std::optional<doc::BBox> box);

    int currentPage() const { return page_; }
    std::optional<doc::BBox> highlight() const;
    double zoom() const { return zoom_; }  // 1.0 = 72 dpi; fit width recomputes it
    bool rendered() const;                 // the current page shows its render at this zoom
    // The current page's canvas (its render and highlight); null when no page is shown.
    HighlightCanvas* canvas() const;
    PdfPageStack* pageStack() const { return stack_; }
    QScrollArea* scrollArea() const { return scroll_; }
    int heldImages() const;  // page renders held (thumbnails aside)
    int rendersDone() const { return queue_.rendersDone(); }  // renders made, thumbnails included

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
    void showEvent(QShowEvent* event) override;
    // On the viewport: Ctrl+wheel zooms; a resize lays the pages out again.
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    // The reading position: the point `on_page` of page `page` (fractions of its size; may lie
    // outside [0, 1]) shows at `view_frac` of the viewport's size plus `view_px` pixels. Set by
    // navigation, zoom and the user's scrolling; restored after every layout (zoom, resize, show).
    struct Anchor {
        int page = 0;
        QPointF on_page;
        QPointF view_frac;
        QPointF view_px;
    };
    void setCurrentPage(int page);
    void layoutPages();
    void relayout();
    void applyAnchor();
    void updateWindow();
    void followScroll();
    Anchor anchorAt(int page, QPointF view_frac, QPointF view_px) const;
    bool highlightInView() const;
    void runSearch();
    void goToHit(int i);
    void fillOutline();
    void fillPages();
    void renderVisibleThumbnails();
    void zoomAt(double factor, const QPoint& viewport_pos);

    std::shared_ptr<const doc::Document> document_;
    // Renders pages and thumbnails on its worker. A member, so it is gone (its worker joined)
    // before the child widgets whose callbacks it runs.
    PdfRenderQueue queue_;
    int page_ = -1;
    double zoom_ = 1.0;
    bool fit_width_ = true;
    std::optional<doc::BBox> box_;
    Anchor anchor_;

    QScrollArea* scroll_;
    PdfPageStack* stack_;
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
};

}  // namespace sl::desktop
