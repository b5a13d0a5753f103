#include "app/desktop/slide_view.h"

#include <QHBoxLayout>
#include <QImageReader>
#include <QLabel>
#include <QPainter>
#include <QSplitter>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

#include <cmath>

#include "app/desktop/highlight_canvas.h"

namespace sl::desktop {

QImage draw_slide(const doc::Unit& unit, int width, const QPalette&) {
    const double aspect = (unit.width > 0 && unit.height > 0) ? unit.height / unit.width : 0.5625;
    const int height = std::max(1, static_cast<int>(std::lround(width * aspect)));
    QImage img(width, height, QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::white);  // slides are drawn as paper, whatever the theme
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    auto rect_of = [&](const doc::BBox& b) {
        return QRectF(b.x0 * width, b.y0 * height, (b.x1 - b.x0) * width, (b.y1 - b.y0) * height);
    };
    for (const auto& v : unit.visuals) {
        if (!v.bbox || v.encoded.empty()) continue;
        QImage pic;
        if (pic.loadFromData(v.encoded.data(), static_cast<int>(v.encoded.size())))
            p.drawImage(rect_of(*v.bbox), pic);
    }
    for (const auto& b : unit.blocks) {
        if (b.role == doc::BlockRole::Note || !b.bbox || !b.bbox->valid()) continue;
        const QRectF r = rect_of(*b.bbox);
        QFont f = p.font();
        const bool title = b.role == doc::BlockRole::Title;
        f.setPixelSize(std::max(8, static_cast<int>(height * (title ? 0.06 : 0.035))));
        f.setBold(title);
        p.setFont(f);
        p.setPen(QColor(title ? 0x1f4e79 : 0x222222));
        p.drawText(r, Qt::TextWordWrap | (title ? Qt::AlignVCenter : Qt::AlignTop) | Qt::AlignLeft,
                   QString::fromStdString(b.text));
    }
    p.setPen(QPen(QColor(0xbbbbbb), 1));
    p.drawRect(QRectF(0.5, 0.5, width - 1.0, height - 1.0));
    return img;
}

SlideView::SlideView(QWidget* parent) : QWidget(parent) {
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(4, 2, 4, 2);
    auto* prev = new QToolButton(this);
    prev->setIcon(QIcon(QStringLiteral(":/icons/action-prev.svg")));
    prev->setAccessibleName(tr("Previous slide"));
    prev->setToolTip(tr("Previous slide (Page Up)"));
    prev->setShortcut(Qt::Key_PageUp);
    prev->setAutoRaise(true);
    auto* next = new QToolButton(this);
    next->setIcon(QIcon(QStringLiteral(":/icons/action-next.svg")));
    next->setAccessibleName(tr("Next slide"));
    next->setToolTip(tr("Next slide (Page Down)"));
    next->setShortcut(Qt::Key_PageDown);
    next->setAutoRaise(true);
    title_ = new QLabel(this);
    bar->addWidget(prev);
    bar->addWidget(title_, 1);
    bar->addWidget(next);

    canvas_ = new HighlightCanvas;
    canvas_->setAccessibleName(tr("Slide"));
    notes_ = new QTextBrowser;
    notes_->setAccessibleName(tr("Speaker notes"));
    notes_->setPlaceholderText(tr("No speaker notes on this slide."));
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(canvas_);
    split->addWidget(notes_);
    split->setStretchFactor(0, 4);
    split->setStretchFactor(1, 1);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(bar);
    layout->addWidget(split, 1);
    connect(prev, &QToolButton::clicked, this, &SlideView::previousSlide);
    connect(next, &QToolButton::clicked, this, &SlideView::nextSlide);
}

void SlideView::showSlide(std::shared_ptr<const doc::Document> document, int slide, std::optional<doc::BBox> box) {
    if (!document) return;
    document_ = std::move(document);
    slide_ = std::clamp(slide, 0, std::max(0, static_cast<int>(document_->units.size()) - 1));
    box_ = box;
    redraw();
    Q_EMIT slideChanged(slide_);
}

QString SlideView::notes() const { return notes_->toPlainText(); }

void SlideView::nextSlide() {
    if (document_ && slide_ + 1 < static_cast<int>(document_->units.size())) showSlide(document_, slide_ + 1, std::nullopt);
}

void SlideView::previousSlide() {
    if (document_ && slide_ > 0) showSlide(document_, slide_ - 1, std::nullopt);
}

void SlideView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (document_) redraw();
}

void SlideView::redraw() {
    if (!document_ || document_->units.empty()) return;
    const doc::Unit& u = document_->units[static_cast<size_t>(slide_)];
    const qreal dpr = devicePixelRatioF();
    QImage img = draw_slide(u, std::max(200, static_cast<int>(canvas_->width() * dpr)), palette());
    img.setDevicePixelRatio(dpr);
    canvas_->setImage(img);
    canvas_->setHighlight(box_);
    title_->setText(tr("Slide %1 of %2").arg(slide_ + 1).arg(document_->units.size()));
    QString notes;
    for (const auto& b : u.blocks)
        if (b.role == doc::BlockRole::Note) notes += QString::fromStdString(b.text) + QLatin1Char('\n');
    notes_->setPlainText(notes.trimmed());
}

ImageView::ImageView(QWidget* parent) : QWidget(parent) {
    canvas_ = new HighlightCanvas(this);
    canvas_->setAccessibleName(tr("Image"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(canvas_);
}

void ImageView::showImage(std::shared_ptr<const doc::Document> document, std::optional<doc::BBox> box) {
    if (!document) return;
    QImageReader reader(QString::fromStdString(document->path));
    reader.setAutoTransform(true);
    const QSize full = reader.size();
    if (full.isValid() && static_cast<qint64>(full.width()) * full.height() > 4096LL * 4096LL)
        reader.setScaledSize(full.scaled(4096, 4096, Qt::KeepAspectRatio));
    QImage img = reader.read();
    if (img.isNull()) {
        canvas_->setImage({});
        canvas_->setPlaceholder(tr("%1: cannot show the image (%2)")
                                    .arg(QString::fromStdString(document->path), reader.errorString()));
        return;
    }
    canvas_->setImage(img);
    canvas_->setHighlight(box);
}

}  // namespace sl::desktop
