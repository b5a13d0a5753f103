#include "app/common/citation_thumbnails.h"

#include <QBuffer>
#include <QImage>
#include <QPainter>

#include <cmath>

#include "core/util/error.h"
#include "ingest/pdf/pdf_render.h"

namespace sl::app {

namespace {

std::optional<Thumbnail> encode_png(const QImage& img) {
    QByteArray bytes;
    QBuffer buf(&bytes);
    buf.open(QIODevice::WriteOnly);
    if (!img.save(&buf, "PNG")) return std::nullopt;
    Thumbnail t;
    t.mime = "image/png";
    t.bytes.assign(bytes.begin(), bytes.end());
    t.width = img.width();
    t.height = img.height();
    return t;
}

}  // namespace

CitationThumbnails::CitationThumbnails(int max_px) : max_px_(max_px) {}
CitationThumbnails::~CitationThumbnails() = default;

void CitationThumbnails::add_document(const doc::Document& d) { docs_[d.id] = &d; }

std::optional<Thumbnail> CitationThumbnails::operator()(const Citation& c) {
    try {
        if (c.kind == doc::DocumentKind::Pdf && !c.path.empty()) {
            auto& r = pdfs_[c.path];
            if (!r) r = std::make_unique<ingest::PdfPageRenderer>(c.path);
            QImage page = r->render(c.ref.unit, 72);
            if (page.isNull()) return std::nullopt;
            page = page.scaled(max_px_, max_px_, Qt::KeepAspectRatio, Qt::SmoothTransformation)
                       .convertToFormat(QImage::Format_RGB32);
            if (c.ref.bbox && c.ref.bbox->valid()) {
                QPainter p(&page);
                p.setPen(QPen(QColor(220, 40, 40), 2));
                const auto& b = *c.ref.bbox;
                p.drawRect(QRectF(b.x0 * page.width(), b.y0 * page.height(), (b.x1 - b.x0) * page.width(),
                                  (b.y1 - b.y0) * page.height()));
            }
            return encode_png(page);
        }
        // Frames and pictures the reader kept: the one nearest the cited time, else the first.
        auto it = docs_.find(c.ref.document);
        if (it == docs_.end()) return std::nullopt;
        const doc::Document& d = *it->second;
        const doc::Visual* best = nullptr;
        double best_dt = 1e300;
        const double t = c.ref.time ? c.ref.time->t0 : 0.0;
        for (const auto& u : d.units) {
            if (u.index != c.ref.unit && d.kind != doc::DocumentKind::Video) continue;
            for (const auto& v : u.visuals) {
                if (v.encoded.empty()) continue;
                const double dt = v.timestamp ? std::abs(*v.timestamp - t) : (u.index == c.ref.unit ? 0 : 1e299);
                if (dt < best_dt) best_dt = dt, best = &v;
            }
        }
        if (!best) return std::nullopt;
        QImage img;
        if (!img.loadFromData(best->encoded.data(), static_cast<int>(best->encoded.size()))) return std::nullopt;
        return encode_png(img.scaled(max_px_, max_px_, Qt::KeepAspectRatio, Qt::SmoothTransformation));
    } catch (const Error&) {
        return std::nullopt;  // a thumbnail is a nicety: the report still names the place
    }
}

}  // namespace sl::app
