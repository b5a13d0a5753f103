#include "app/desktop/highlight_canvas.h"

#include <QPainter>

namespace sl::desktop {

HighlightCanvas::HighlightCanvas(QWidget* parent) : QWidget(parent) {
    setAttribute(Qt::WA_OpaquePaintEvent, false);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void HighlightCanvas::setImage(const QImage& image) {
    image_ = image;
    updateGeometry();
    update();
}

void HighlightCanvas::setHighlight(std::optional<doc::BBox> box) {
    highlight_ = box;
    update();
}

void HighlightCanvas::setPlaceholder(const QString& text) {
    placeholder_ = text;
    update();
}

QSize HighlightCanvas::sizeHint() const {
    if (image_.isNull()) return {320, 240};
    return (QSizeF(image_.size()) / image_.devicePixelRatio()).toSize();
}

QRect HighlightCanvas::imageRect() const {
    if (image_.isNull()) return {};
    QSizeF s = QSizeF(image_.size()) / image_.devicePixelRatio();
    s.scale(QSizeF(size()), Qt::KeepAspectRatio);
    const QPointF origin((width() - s.width()) / 2.0, (height() - s.height()) / 2.0);
    return QRectF(origin, s).toRect();
}

QRect HighlightCanvas::highlightRect() const {
    if (!highlight_ || image_.isNull()) return {};
    const QRect r = imageRect();
    const doc::BBox& b = *highlight_;
    return QRectF(r.x() + b.x0 * r.width(), r.y() + b.y0 * r.height(), (b.x1 - b.x0) * r.width(),
                  (b.y1 - b.y0) * r.height())
        .toRect();
}

void HighlightCanvas::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::SmoothPixmapTransform);
    if (image_.isNull()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
        return;
    }
    p.drawImage(imageRect(), image_);
    const QRect h = highlightRect();
    if (!h.isEmpty()) {
        const QRect pad = h.adjusted(-4, -3, 4, 3);
        p.fillRect(pad, QColor(255, 200, 0, 70));
        p.setPen(QPen(QColor(230, 126, 34), 2.5));
        p.drawRoundedRect(pad, 3, 3);
    }
}

}  // namespace sl::desktop
