#include "app/desktop/pdf_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>
#include <QtConcurrent>

#include <cmath>

#include "app/desktop/highlight_canvas.h"
#include "ingest/pdf/pdf_render.h"

namespace sl::desktop {

namespace {

QToolButton* tool(QWidget* parent, const QString& icon, const QString& text, const QKeySequence& key) {
    auto* b = new QToolButton(parent);
    b->setIcon(QIcon(icon));
    b->setToolTip(key.isEmpty() ? text : text + QStringLiteral(" (") + key.toString(QKeySequence::NativeText) + QLatin1Char(')'));
    b->setAccessibleName(text);
    if (!key.isEmpty()) b->setShortcut(key);
    b->setAutoRaise(true);
    return b;
}

struct RenderResult {
    QImage image;
    QString error;
};

}  // namespace

PdfView::PdfView(QWidget* parent) : QWidget(parent) {
    pool_.setMaxThreadCount(1);
    auto* bar = new QHBoxLayout;
    bar->setContentsMargins(4, 2, 4, 2);
    auto* prev = tool(this, QStringLiteral(":/icons/action-prev.svg"), tr("Previous page"), QKeySequence(Qt::Key_PageUp));
    auto* next = tool(this, QStringLiteral(":/icons/action-next.svg"), tr("Next page"), QKeySequence(Qt::Key_PageDown));
    page_box_ = new QSpinBox(this);
    page_box_->setAccessibleName(tr("Page number"));
    page_box_->setMinimum(1);
    page_count_ = new QLabel(this);
    auto* out = tool(this, QStringLiteral(":/icons/action-zoom-out.svg"), tr("Zoom out"), QKeySequence::ZoomOut);
    auto* in = tool(this, QStringLiteral(":/icons/action-zoom-in.svg"), tr("Zoom in"), QKeySequence::ZoomIn);
    auto* fit = new QToolButton(this);
    fit->setText(tr("Fit width"));
    fit->setAccessibleName(tr("Fit page width"));
    fit->setAutoRaise(true);
    zoom_label_ = new QLabel(this);
    bar->addWidget(prev);
    bar->addWidget(page_box_);
    bar->addWidget(page_count_);
    bar->addWidget(next);
    bar->addStretch();
    bar->addWidget(out);
    bar->addWidget(zoom_label_);
    bar->addWidget(in);
    bar->addWidget(fit);

    canvas_ = new HighlightCanvas;
    canvas_->setAccessibleName(tr("PDF page"));
    canvas_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
    scroll_ = new QScrollArea(this);
    scroll_->setAccessibleName(tr("PDF page view"));
    scroll_->setAlignment(Qt::AlignHCenter | Qt::AlignTop);
    scroll_->setBackgroundRole(QPalette::Dark);
    scroll_->setWidget(canvas_);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addLayout(bar);
    layout->addWidget(scroll_, 1);

    connect(prev, &QToolButton::clicked, this, &PdfView::previousPage);
    connect(next, &QToolButton::clicked, this, &PdfView::nextPage);
    connect(in, &QToolButton::clicked, this, &PdfView::zoomIn);
    connect(out, &QToolButton::clicked, this, &PdfView::zoomOut);
    connect(fit, &QToolButton::clicked, this, &PdfView::fitWidth);
    connect(page_box_, &QSpinBox::editingFinished, this, [this] {
        if (document_ && page_box_->value() - 1 != page_) showPage(document_, page_box_->value() - 1, std::nullopt);
    });
}

PdfView::~PdfView() {
    ++request_;
    pool_.waitForDone();
}

std::optional<doc::BBox> PdfView::highlight() const { return box_; }

void PdfView::showPage(std::shared_ptr<const doc::Document> document, int page, std::optional<doc::BBox> box) {
    if (!document) return;
    if (!document_ || document_->path != document->path || !renderer_)
        renderer_ = std::make_shared<std::shared_ptr<ingest::PdfPageRenderer>>();
    document_ = std::move(document);
    const int n = static_cast<int>(document_->units.size());
    if (n == 0) {
        page_ = -1;
        canvas_->setImage({});
        canvas_->setPlaceholder(tr("%1 has no pages.").arg(QString::fromStdString(document_->path)));
        return;
    }
    page_ = std::clamp(page, 0, n - 1);
    box_ = box;
    page_box_->blockSignals(true);
    page_box_->setMaximum(std::max(1, n));
    page_box_->setValue(page_ + 1);
    page_box_->blockSignals(false);
    // The physical page number in the box; the printed label ("p. 66") beside it when it differs.
    const std::string& label = document_->units[static_cast<size_t>(page_)].label;
    page_count_->setText(!label.empty() && label != std::to_string(page_ + 1)
                             ? tr("of %1 (p. %2)").arg(n).arg(QString::fromStdString(label))
                             : tr("of %1").arg(n));
    Q_EMIT pageChanged(page_);
    render();
}

void PdfView::zoomIn() {
    fit_width_ = false;
    zoom_ = std::min(zoom_ * 1.25, 8.0);
    render();
}

void PdfView::zoomOut() {
    fit_width_ = false;
    zoom_ = std::max(zoom_ / 1.25, 0.2);
    render();
}

void PdfView::fitWidth() {
    fit_width_ = true;
    render();
}

void PdfView::nextPage() {
    if (document_ && page_ + 1 < static_cast<int>(document_->units.size())) showPage(document_, page_ + 1, std::nullopt);
}

void PdfView::previousPage() {
    if (document_ && page_ > 0) showPage(document_, page_ - 1, std::nullopt);
}

void PdfView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    if (fit_width_ && document_ && page_ >= 0) render();
}

void PdfView::render() {
    if (!document_ || page_ < 0 || page_ >= static_cast<int>(document_->units.size())) return;
    const doc::Unit& u = document_->units[static_cast<size_t>(page_)];
    const double width_pt = u.width > 0 ? u.width : 612.0;
    if (fit_width_) {
        const int avail = scroll_->viewport()->width() - 24;
        zoom_ = std::clamp(avail / width_pt, 0.2, 8.0);
    }
    zoom_label_->setText(QStringLiteral("%1%").arg(static_cast<int>(std::lround(zoom_ * 100))));
    const double dpr = devicePixelRatioF();
    const int dpi = std::max(18, static_cast<int>(std::lround(72.0 * zoom_ * dpr)));
    const quint64 request = ++request_;
    const int page = page_;
    const std::string path = document_->path;
    auto renderer = renderer_;
    auto* watcher = new QFutureWatcher<RenderResult>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, request, page, dpr] {
        watcher->deleteLater();
        if (request != request_) return;                     // a newer request is on its way
        RenderResult r = watcher->future().result();
        r.image.setDevicePixelRatio(dpr);
        rendered(page, r.image, r.error);
    });
    // Runs on pool_'s single thread; never touches widgets.
    watcher->setFuture(QtConcurrent::run(&pool_, [renderer, path, page, dpi]() -> RenderResult {
        RenderResult r;
        try {
            if (!*renderer) *renderer = std::make_shared<ingest::PdfPageRenderer>(path);
            r.image = (*renderer)->render(page, dpi);
            if (r.image.isNull()) r.error = QString::fromStdString(path) + QStringLiteral(": page %1 did not render").arg(page + 1);
        } catch (const std::exception& e) {
            r.error = QString::fromUtf8(e.what());
        }
        return r;
    }));
}

void PdfView::rendered(int page, const QImage& image, const QString& error) {
    if (!error.isEmpty()) {
        canvas_->setImage({});
        canvas_->setPlaceholder(error);
        canvas_->resize(scroll_->viewport()->size());
        Q_EMIT renderFailed(error);
        return;
    }
    canvas_->setImage(image);
    canvas_->setHighlight(box_);
    canvas_->resize(canvas_->sizeHint());
    rendered_page_ = page;
    scrollToHighlight();
    Q_EMIT pageShown(page);
}

void PdfView::scrollToHighlight() {
    const QRect h = canvas_->highlightRect();
    if (h.isEmpty()) {
        scroll_->verticalScrollBar()->setValue(0);
        return;
    }
    scroll_->ensureVisible(h.center().x(), h.center().y(), scroll_->viewport()->width() / 2 - 10,
                           scroll_->viewport()->height() / 3);
}

}  // namespace sl::desktop
