// A widget that paints one image (a rendered page, a slide, a video frame, a picture) scaled to
// its size with its aspect kept, and a highlighted region given in the image's normalized
// coordinates (doc::BBox). GUI thread only.
#pragma once

#include <QImage>
#include <QWidget>

#include <optional>

#include "core/document/document.h"

namespace sl::desktop {

class HighlightCanvas : public QWidget {
    Q_OBJECT

public:
    explicit HighlightCanvas(QWidget* parent = nullptr);

    void setImage(const QImage& image);
    const QImage& image() const { return image_; }
    void setHighlight(std::optional<doc::BBox> box);
    const std::optional<doc::BBox>& highlight() const { return highlight_; }
    // Where the highlight is drawn, in widget coordinates (empty when none).
    QRect highlightRect() const;
    // The image's drawn rectangle in widget coordinates.
    QRect imageRect() const;
    void setPlaceholder(const QString& text);

    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QImage image_;
    std::optional<doc::BBox> highlight_;
    QString placeholder_;
};

}  // namespace sl::desktop
