// The pages of one PDF stacked vertically (continuous mode): the widget inside PdfView's scroll
// area. Every page is laid out from its size in points (known from the document without
// rendering) and painted as a blank sheet; only the pages near the viewport (the ones it meets
// ± kPrefetch, and the current one) hold a HighlightCanvas with a render, asked of a
// PdfRenderQueue. A canvas leaving that window is deleted with its image, so the memory held does
// not grow with the document's length. After a zoom a canvas shows its old image scaled until
// the new render arrives.
// GUI thread only. The queue's worker never touches this widget: a render reaches it through the
// queue's callback on the GUI thread, and a canvas's ticket is cancelled when it is deleted.
#pragma once

#include <QWidget>

#include <map>
#include <optional>
#include <vector>

#include "app/desktop/pdf_render_queue.h"
#include "core/document/document.h"

namespace sl::desktop {

class HighlightCanvas;

class PdfPageStack : public QWidget {
    Q_OBJECT

public:
    static constexpr int kMargin = 12;   // px around the pages
    static constexpr int kGap = 10;      // px between two pages
    static constexpr int kPrefetch = 2;  // pages kept rendered beyond the visible ones, each way
    // Prefetched renders (both ways together) stay under this many pixels: at a high zoom fewer
    // pages are prefetched, none at 800 % (a Letter page is then 31 Mpx, 124 MB).
    static constexpr double kPrefetchPixels = 32e6;

    // `queue` renders the pages; it must stay alive while this widget asks renders (PdfView owns
    // both). The widget's own destructor does not use it.
    explicit PdfPageStack(PdfRenderQueue* queue, QWidget* parent = nullptr);
    ~PdfPageStack() override;

    // Lays out the pages of `d` (sizes and labels are copied; no reference kept) at the current
    // zoom; every canvas and pending render of the previous document is dropped.
    void setDocument(const doc::Document& d);
    int pageCount() const { return static_cast<int>(size_pt_.size()); }
    double widestPagePoints() const;  // the widest page, in points (fit width uses it)
    double maxZoom() const;           // the largest zoom whose stack fits a widget's maximum height

    // Lays the pages out at `zoom` (1.0 = 72 dpi), the widget at least `min_width` wide (the
    // pages centred). Canvases follow their pages; renders at the new size are asked by setWindow.
    void setZoom(double zoom, int min_width);
    double zoom() const { return zoom_; }

    QRect pageRect(int page) const;  // in this widget's coordinates
    // The page at height y: the last one whose top is at or above y (0 above the first).
    int pageAt(int y) const;
    // The page covering most of the rows [top, top + height) (the first one on a tie).
    int mostVisiblePage(int top, int height) const;

    // The cited or found region `box` (normalized to the page) drawn on `page`; nullopt: none.
    void setHighlight(int page, std::optional<doc::BBox> box);
    QRect highlightRect() const;  // in this widget's coordinates, from the layout (empty: none)

    // Keeps canvases for the pages meeting rows [top, bottom] ± kPrefetch (fewer when their
    // renders would pass kPrefetchPixels) and for `keep`, deletes
    // the others with their images, and asks a render of each kept page lacking one at the
    // current zoom: `keep` first, then the visible pages, then the prefetched ones.
    void setWindow(int top, int bottom, int keep);

    HighlightCanvas* canvas(int page) const;  // null for a page outside the window
    bool rendered(int page) const;            // `page` shows its render at the current zoom
    int heldImages() const;                   // canvases holding a render (any zoom)
    int canvasCount() const { return static_cast<int>(slots_.size()); }

Q_SIGNALS:
    void pageRendered(int page);  // the render of `page` at the current zoom is on its canvas
    void renderFailed(int page, const QString& message);

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    struct Slot {
        HighlightCanvas* canvas = nullptr;  // child of this widget
        int dpi_asked = 0;                  // the render asked last (0: none)
        int dpi_shown = 0;                  // the render on the canvas (0: none)
        RenderTicket ticket;
    };
    int dpi() const;
    void dropSlot(std::map<int, Slot>::iterator it);
    void ask(int page, Slot& slot);
    void rendered(int page, int dpi, const QImage& image, const QString& error);

    PdfRenderQueue* queue_;
    std::vector<QSizeF> size_pt_;  // per page, points
    std::vector<QString> label_;   // per page, for the blank sheet
    std::vector<QSize> size_px_;   // per page at zoom_
    std::vector<int> top_;         // per page at zoom_
    double zoom_ = 1.0;
    int width_ = 0;
    std::map<int, Slot> slots_;  // the window: page -> its canvas
    int highlight_page_ = -1;
    std::optional<doc::BBox> highlight_;
    QString empty_text_;  // shown when the document has no pages
};

}  // namespace sl::desktop
