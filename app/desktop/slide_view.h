// The slide view: a slide drawn from the document model (shapes' text at their boxes, pictures
// the reader kept, the cited shape highlighted) with the speaker notes below. Also shows images
// (an Image unit: the picture file with the cited OCR region). GUI thread only; images are decoded
// from the document's small encoded visuals or, for image files, read with a size cap.
#pragma once

#include <QWidget>

#include <memory>
#include <optional>

#include "core/document/document.h"

class QLabel;
class QTextBrowser;

namespace sl::desktop {

class HighlightCanvas;

// Draws `unit` of a slide deck at `width` pixels wide (height from the slide's aspect).
QImage draw_slide(const doc::Unit& unit, int width, const QPalette& palette);

class SlideView : public QWidget {
    Q_OBJECT

public:
    explicit SlideView(QWidget* parent = nullptr);
    void showSlide(std::shared_ptr<const doc::Document> document, int slide, std::optional<doc::BBox> box);
    int currentSlide() const { return slide_; }
    HighlightCanvas* canvas() const { return canvas_; }
    QString notes() const;

public Q_SLOTS:
    void nextSlide();
    void previousSlide();

Q_SIGNALS:
    void slideChanged(int slide);  // `slide` is shown now

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void redraw();

    std::shared_ptr<const doc::Document> document_;
    int slide_ = -1;
    std::optional<doc::BBox> box_;
    HighlightCanvas* canvas_;
    QLabel* title_;
    QTextBrowser* notes_;
};

class ImageView : public QWidget {
    Q_OBJECT

public:
    explicit ImageView(QWidget* parent = nullptr);
    void showImage(std::shared_ptr<const doc::Document> document, std::optional<doc::BBox> box);
    HighlightCanvas* canvas() const { return canvas_; }

private:
    HighlightCanvas* canvas_;
};

}  // namespace sl::desktop
