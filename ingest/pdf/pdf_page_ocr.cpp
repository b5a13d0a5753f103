#include "ingest/pdf/pdf_page_ocr.h"

#include <cmath>

#include "ingest/pdf/pdf_render.h"
#include <poppler-qt6.h>

namespace sl::ingest {

namespace {

// Fraction of dark pixels on a ~18 DPI render: a blank page has (almost) none.
double ink_fraction(const Poppler::Page& page) {
    const QImage probe = render_poppler_page(page, 18.0);
    if (probe.isNull()) return 0;
    const QImage grey = probe.convertToFormat(QImage::Format_Grayscale8);
    size_t dark = 0;
    for (int y = 0; y < grey.height(); ++y) {
        const uchar* row = grey.constScanLine(y);
        for (int x = 0; x < grey.width(); ++x) dark += row[x] < 200 ? 1 : 0;
    }
    return static_cast<double>(dark) / (static_cast<double>(grey.width()) * grey.height());
}

}  // namespace

bool page_needs_ocr(const std::vector<doc::Block>& text_blocks) {
    size_t chars = 0;
    for (const doc::Block& b : text_blocks)
        for (char c : b.text) chars += (c != ' ' && c != '\n' && c != '\t') ? 1 : 0;
    return chars < kMinTextLayerChars;
}

std::vector<doc::Block> ocr_page(const Poppler::Page& page, OcrEngine& engine,
                                 const std::function<bool()>& cancelled) {
    if (!engine.ready() || ink_fraction(page) < 0.001) return {};
    const QSizeF size = page.pageSizeF();
    const double dpi = capped_dpi(size.width(), size.height(), kOcrDpi);
    const QImage img = render_poppler_page(page, dpi);
    if (img.isNull()) return {};
    // The render covers the whole page, so boxes normalized to it are normalized to the page.
    return engine.recognize(img, static_cast<int>(std::lround(dpi)), cancelled);
}

void merge_ocr_blocks(std::vector<doc::Block>& blocks, std::vector<doc::Block> ocr) {
    const size_t born_digital = blocks.size();
    for (doc::Block& o : ocr) {
        bool covered = false;
        if (o.bbox) {
            const float cx = (o.bbox->x0 + o.bbox->x1) / 2, cy = (o.bbox->y0 + o.bbox->y1) / 2;
            for (size_t i = 0; i < born_digital && !covered; ++i) {
                const auto& b = blocks[i].bbox;
                covered = b && cx >= b->x0 && cx <= b->x1 && cy >= b->y0 && cy <= b->y1;
            }
        }
        if (!covered) blocks.push_back(std::move(o));
    }
}

}  // namespace sl::ingest
