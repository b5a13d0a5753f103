#include "ingest/pdf/pdf_render.h"

#include <algorithm>
#include <cmath>

#include "ingest/ingest_error.h"
#include "ingest/pdf/pdf_open.h"

namespace sl::ingest {

double capped_dpi(double width_pt, double height_pt, double dpi) {
    if (!(dpi > 0) || !std::isfinite(dpi)) return 0;
    if (!(width_pt > 0) || !(height_pt > 0) || !std::isfinite(width_pt) ||
        !std::isfinite(height_pt))
        return 0;
    const double w_in = width_pt / 72.0, h_in = height_pt / 72.0;
    double d = dpi;
    d = std::min(d, std::sqrt(kMaxRenderPixels / (w_in * h_in)));
    d = std::min(d, kMaxRenderSide / std::max(w_in, h_in));
    return d;
}

QImage render_poppler_page(const Poppler::Page& page, double dpi) {
    const QSizeF size = page.pageSizeF();
    const double d = capped_dpi(size.width(), size.height(), dpi);
    // Below ~1 pixel per page side Poppler has nothing sensible to draw.
    if (!(d * std::max(size.width(), size.height()) / 72.0 >= 1.0)) return {};
    try {
        return page.renderToImage(d, d);
    } catch (const std::bad_alloc&) {
        return {};
    }
}

QImage render_poppler_thumbnail(const Poppler::Page& page, int max_px) {
    const QSizeF size = page.pageSizeF();
    const double longest = std::max(size.width(), size.height());
    if (max_px <= 0 || !(longest > 0)) return {};
    QImage img = render_poppler_page(page, 72.0 * max_px / longest);
    if (!img.isNull() && (img.width() > max_px || img.height() > max_px))
        img = img.scaled(max_px, max_px, Qt::KeepAspectRatio, Qt::SmoothTransformation);
    return img;
}

PdfPageRenderer::PdfPageRenderer(const std::string& path) : path_(path), doc_(open_pdf(path)) {}
PdfPageRenderer::~PdfPageRenderer() = default;
PdfPageRenderer::PdfPageRenderer(PdfPageRenderer&&) noexcept = default;
PdfPageRenderer& PdfPageRenderer::operator=(PdfPageRenderer&&) noexcept = default;

int PdfPageRenderer::page_count() const {
    return doc_->numPages();
}

QImage PdfPageRenderer::render(int page, int dpi) const {
    const int n = doc_->numPages();
    if (page < 0 || page >= n)
        throw IngestError(
            IngestErrorKind::Corrupt, path_,
            "no page " + std::to_string(page) + " (the PDF has " + std::to_string(n) + " pages)");
    const std::unique_ptr<Poppler::Page> p = doc_->page(page);
    QImage img = p ? render_poppler_page(*p, dpi) : QImage();
    if (img.isNull())
        throw IngestError(IngestErrorKind::Corrupt, path_,
                          "page " + std::to_string(page + 1) + " cannot be rendered");
    return img;
}

QImage render_page(const std::string& path, int page, int dpi) {
    return PdfPageRenderer(path).render(page, dpi);
}

}  // namespace sl::ingest
