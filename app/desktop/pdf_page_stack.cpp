#include "app/desktop/pdf_page_stack.h"

#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>

#include "app/desktop/highlight_canvas.h"

namespace sl::desktop {

namespace {

constexpr double kDefaultWidthPt = 612.0;  // US Letter, for a page of unknown size
constexpr double kDefaultHeightPt = 792.0;

}  // namespace

PdfPageStack::PdfPageStack(PdfRenderQueue* queue, QWidget* parent)
    : QWidget(parent), queue_(queue) {
    setAccessibleName(tr("PDF pages"));
}

PdfPageStack::~PdfPageStack() {
    for (auto& [page, slot] : slots_) slot.ticket.cancel();
}

void PdfPageStack::setDocument(const doc::Document& d) {
    while (!slots_.empty()) dropSlot(slots_.begin());
    highlight_page_ = -1;
    highlight_.reset();
    size_pt_.clear();
    label_.clear();
    size_pt_.reserve(d.units.size());
    label_.reserve(d.units.size());
    for (const doc::Unit& u : d.units) {
        size_pt_.emplace_back(u.width > 0 ? u.width : kDefaultWidthPt,
                              u.height > 0 ? u.height : kDefaultHeightPt);
        label_.push_back(
            QString::fromStdString(u.label.empty() ? std::to_string(u.index + 1) : u.label));
    }
    empty_text_ =
        size_pt_.empty() ? tr("%1 has no pages.").arg(QString::fromStdString(d.path)) : QString();
    setZoom(zoom_, width_);
}

double PdfPageStack::widestPagePoints() const {
    double w = 0;
    for (const QSizeF& s : size_pt_) w = std::max(w, s.width());
    return w > 0 ? w : kDefaultWidthPt;
}

double PdfPageStack::maxZoom() const {
    double height_pt = 0;
    for (const QSizeF& s : size_pt_) height_pt += s.height();
    const double room =
        QWIDGETSIZE_MAX - 2.0 * kMargin - kGap * std::max<double>(0, pageCount() - 1) - pageCount();
    return height_pt > 0 ? std::min(8.0, room / height_pt) : 8.0;
}

void PdfPageStack::setZoom(double zoom, int min_width) {
    zoom_ = zoom;
    const size_t n = size_pt_.size();
    size_px_.resize(n);
    top_.resize(n);
    int widest = 0;
    int y = kMargin;
    for (size_t i = 0; i < n; ++i) {
        const QSize s(std::max(1, static_cast<int>(std::lround(size_pt_[i].width() * zoom))),
                      std::max(1, static_cast<int>(std::lround(size_pt_[i].height() * zoom))));
        size_px_[i] = s;
        top_[i] = y;
        y += s.height() + kGap;
        widest = std::max(widest, s.width());
    }
    width_ = std::max(min_width, widest + 2 * kMargin);
    const int height = n == 0 ? 8 * kMargin : y - kGap + kMargin;  // no pages: room for the note
    resize(width_, height);
    for (auto& [page, slot] : slots_) slot.canvas->setGeometry(pageRect(page));
    update();
}

QRect PdfPageStack::pageRect(int page) const {
    if (page < 0 || page >= pageCount()) return {};
    const QSize s = size_px_[static_cast<size_t>(page)];
    return {(width_ - s.width()) / 2, top_[static_cast<size_t>(page)], s.width(), s.height()};
}

int PdfPageStack::pageAt(int y) const {
    if (top_.empty()) return -1;
    const auto it = std::upper_bound(top_.begin(), top_.end(), y);
    return it == top_.begin() ? 0 : static_cast<int>(it - top_.begin()) - 1;
}

int PdfPageStack::mostVisiblePage(int top, int height) const {
    const int first = pageAt(top);
    if (first < 0) return -1;
    int best = first, best_rows = -1;
    for (int p = first; p < pageCount(); ++p) {
        const QRect r = pageRect(p);
        if (r.top() >= top + height) break;
        const int rows = std::min(r.bottom() + 1, top + height) - std::max(r.top(), top);
        if (rows > best_rows) {
            best = p;
            best_rows = rows;
        }
    }
    return best;
}

void PdfPageStack::setHighlight(int page, std::optional<doc::BBox> box) {
    if (HighlightCanvas* old = canvas(highlight_page_)) old->setHighlight(std::nullopt);
    highlight_page_ = box ? page : -1;
    highlight_ = box;
    if (HighlightCanvas* c = canvas(highlight_page_)) c->setHighlight(highlight_);
}

QRect PdfPageStack::highlightRect() const {
    if (!highlight_ || highlight_page_ < 0 || highlight_page_ >= pageCount()) return {};
    const QRect r = pageRect(highlight_page_);
    const doc::BBox& b = *highlight_;
    return QRectF(r.x() + b.x0 * r.width(), r.y() + b.y0 * r.height(), (b.x1 - b.x0) * r.width(),
                  (b.y1 - b.y0) * r.height())
        .toRect();
}

int PdfPageStack::dpi() const {
    return std::max(18, static_cast<int>(std::lround(72.0 * zoom_ * devicePixelRatioF())));
}

void PdfPageStack::dropSlot(std::map<int, Slot>::iterator it) {
    it->second.ticket.cancel();
    delete it->second.canvas;
    slots_.erase(it);
}

void PdfPageStack::setWindow(int top, int bottom, int keep) {
    const int n = pageCount();
    if (n == 0) return;
    const int first = std::max(0, pageAt(top));
    const int last = std::max(first, pageAt(bottom));
    const QSize px = size_px_[static_cast<size_t>(first)] * devicePixelRatioF();
    const double page_pixels = double(px.width()) * px.height();
    int prefetch = kPrefetch;
    while (prefetch > 0 && 2 * prefetch * page_pixels > kPrefetchPixels) --prefetch;
    const int lo = std::max(0, first - prefetch);
    const int hi = std::min(n - 1, last + prefetch);
    const bool keep_valid = keep >= 0 && keep < n;
    for (auto it = slots_.begin(); it != slots_.end();) {
        const int p = it->first;
        auto next = std::next(it);
        if ((p < lo || p > hi) && !(keep_valid && p == keep)) dropSlot(it);
        it = next;
    }
    // The order of the asks is the order of the renders (the queue is first in, first out).
    std::vector<int> order;
    if (keep_valid) order.push_back(keep);
    for (int p = first; p <= last; ++p) order.push_back(p);
    for (int p = last + 1; p <= hi; ++p) order.push_back(p);
    for (int p = first - 1; p >= lo; --p) order.push_back(p);
    const int want = dpi();
    for (int p : order) {
        auto it = slots_.find(p);
        if (it == slots_.end()) {
            Slot s;
            s.canvas = new HighlightCanvas(this);
            s.canvas->setAccessibleName(tr("PDF page %1").arg(label_[static_cast<size_t>(p)]));
            s.canvas->setAttribute(
                Qt::WA_TransparentForMouseEvents);  // wheel and clicks reach the view
            s.canvas->setGeometry(pageRect(p));
            if (p == highlight_page_) s.canvas->setHighlight(highlight_);
            s.canvas->show();
            it = slots_.emplace(p, s).first;
        }
        if (it->second.dpi_asked != want) ask(p, it->second);
    }
}

void PdfPageStack::ask(int page, Slot& slot) {
    slot.ticket.cancel();
    const int d = dpi();
    slot.dpi_asked = d;
    // The callback runs on the GUI thread, and only while the slot's ticket is live.
    slot.ticket =
        queue_->render(page, d, [this, page, d](const QImage& image, const QString& error) {
            rendered(page, d, image, error);
        });
}

void PdfPageStack::rendered(int page, int d, const QImage& image, const QString& error) {
    const auto it = slots_.find(page);
    if (it == slots_.end()) return;
    Slot& s = it->second;
    s.dpi_shown = d;
    if (!error.isEmpty() || image.isNull()) {
        s.canvas->setImage({});
        s.canvas->setPlaceholder(error);
        update(pageRect(page));
        Q_EMIT renderFailed(page, error);
        return;
    }
    QImage shown = image;
    // The render's pixels per layout pixel: the dpi asked over the layout's 72 * zoom.
    shown.setDevicePixelRatio(d / (72.0 * zoom_));
    s.canvas->setImage(shown);
    if (d == dpi()) Q_EMIT pageRendered(page);
}

HighlightCanvas* PdfPageStack::canvas(int page) const {
    const auto it = slots_.find(page);
    return it == slots_.end() ? nullptr : it->second.canvas;
}

bool PdfPageStack::rendered(int page) const {
    const auto it = slots_.find(page);
    return it != slots_.end() && it->second.dpi_shown == dpi() &&
           !it->second.canvas->image().isNull();
}

int PdfPageStack::heldImages() const {
    int held = 0;
    for (const auto& [page, slot] : slots_) held += !slot.canvas->image().isNull();
    return held;
}

void PdfPageStack::paintEvent(QPaintEvent* event) {
    QPainter p(this);
    if (pageCount() == 0) {
        p.setPen(palette().color(QPalette::Light));
        p.drawText(rect().adjusted(kMargin, kMargin, -kMargin, -kMargin),
                   Qt::AlignCenter | Qt::TextWordWrap, empty_text_);
        return;
    }
    // Blank sheets under the pages in the exposed rows; a canvas with a render paints over its own.
    const QRect exposed = event->rect();
    QFont f = font();
    f.setPointSizeF(f.pointSizeF() * 1.5);
    p.setFont(f);
    for (int page = std::max(0, pageAt(exposed.top())); page < pageCount(); ++page) {
        const QRect r = pageRect(page);
        if (r.top() > exposed.bottom()) break;
        if (!r.intersects(exposed)) continue;
        p.fillRect(r, Qt::white);
        p.setPen(QColor(0, 0, 0, 60));
        p.drawRect(r.adjusted(-1, -1, 0, 0));
        const HighlightCanvas* c = canvas(page);
        const auto it = slots_.find(page);
        const bool failed =
            it != slots_.end() && it->second.dpi_shown != 0 && c && c->image().isNull();
        if ((!c || c->image().isNull()) && !failed) {
            p.setPen(QColor(0, 0, 0, 90));
            p.drawText(r, Qt::AlignCenter, label_[static_cast<size_t>(page)]);
        }
    }
}

}  // namespace sl::desktop
