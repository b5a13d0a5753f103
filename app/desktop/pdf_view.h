// The PDF page view: one page at a time in a scroll area, zoom (fit width, in, out), page
// navigation, and the cited region highlighted and scrolled into view. Pages are rendered on
// demand by ingest's PdfPageRenderer on a single worker thread (it is not thread-safe; one pool
// thread serialises its use); the GUI thread only paints the resulting QImage.
#pragma once

#include <QFutureWatcher>
#include <QImage>
#include <QThreadPool>
#include <QWidget>

#include <memory>
#include <optional>

#include "core/document/document.h"

class QLabel;
class QScrollArea;
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

public Q_SLOTS:
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

private:
    void render();
    void rendered(int page, const QImage& image, const QString& error);
    void scrollToHighlight();

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
};

}  // namespace sl::desktop
