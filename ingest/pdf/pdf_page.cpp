#include "ingest/pdf/pdf_page.h"

#include "ingest/image/thumbnail.h"
#include "ingest/pdf/pdf_page_ocr.h"
#include "ingest/pdf/pdf_render.h"
#include "ingest/pdf/pdf_structure.h"
#include "ingest/pdf/pdf_text_layout.h"

namespace sl::ingest {

namespace {

int rotation_degrees(Poppler::Page::Orientation o) {
    switch (o) {
        case Poppler::Page::Landscape:
            return 90;
        case Poppler::Page::UpsideDown:
            return 180;
        case Poppler::Page::Seascape:
            return 270;
        case Poppler::Page::Portrait:
            break;
    }
    return 0;
}

// The words of `page` on the upright page: Poppler adds the page's own rotation to the one asked
// for, so asking for the opposite turn gives the text as authored, in horizontal lines.
std::vector<PdfWord> page_words(const Poppler::Page& page, int rotation) {
    static constexpr Poppler::Page::Rotation kUndo[] = {
        Poppler::Page::Rotate0, Poppler::Page::Rotate270, Poppler::Page::Rotate180,
        Poppler::Page::Rotate90};
    std::vector<PdfWord> words;
    const std::vector<std::unique_ptr<Poppler::TextBox>> boxes =
        page.textList(kUndo[(rotation / 90) % 4]);
    words.reserve(boxes.size());
    for (const auto& b : boxes) {
        if (!b) continue;
        words.push_back(
            {b->text(), b->boundingBox(), b->hasSpaceAfter(), b->nextWord() == nullptr});
    }
    return words;
}

// The PageRender visual of a page: its size at `dpi` (rendered on demand from the locator) and,
// when `thumbnail_px` > 0, a small PNG.
doc::Visual page_visual(const Poppler::Page& page, int index, int dpi, int thumbnail_px) {
    doc::Visual v;
    v.kind = doc::VisualKind::PageRender;
    const QSizeF size = page.pageSizeF();
    const double d = capped_dpi(size.width(), size.height(), dpi);
    v.width = static_cast<int>(size.width() * d / 72.0 + 0.5);
    v.height = static_cast<int>(size.height() * d / 72.0 + 0.5);
    v.locator = "page:" + std::to_string(index) + "@" + std::to_string(dpi) + "dpi";
    if (thumbnail_px > 0) {
        const QImage thumb = render_poppler_thumbnail(page, thumbnail_px);
        if (!thumb.isNull()) {
            v.encoded = encode_png(thumb);
            if (!v.encoded.empty()) v.mime = "image/png";
        }
    }
    return v;
}

}  // namespace

PdfPageReader::PdfPageReader(const Poppler::Document& pdf, const IngestOptions& options)
    : pdf_(pdf), options_(options), page_count_(pdf.numPages()) {}

PdfPageResult PdfPageReader::read(int i, const std::function<bool()>& cancelled) {
    PdfPageResult r;
    doc::Unit& u = r.unit;
    u.kind = doc::UnitKind::Page;
    u.index = i;
    const std::unique_ptr<Poppler::Page> page = pdf_.page(i);
    if (!page) {
        r.damaged = true;
        u.label = std::to_string(i + 1);
        return r;
    }
    const QString label = page->label().simplified();
    u.label = label.isEmpty() ? std::to_string(i + 1) : label.toStdString();
    const QSizeF size = page->pageSizeF();
    u.width = static_cast<float>(size.width());
    u.height = static_cast<float>(size.height());
    u.rotation = rotation_degrees(page->orientation());
    const QSizeF upright = u.rotation % 180 ? size.transposed() : size;
    u.blocks = layout_blocks(page_words(*page, u.rotation), upright, u.rotation);
    append_page_links(*page, i, page_count_, r.links);
    if (options_.ocr && page_needs_ocr(u.blocks)) {
        if (!ocr_) {
            ocr_.emplace(options_.ocr_language);
            if (!ocr_->ready()) ocr_error_ = ocr_->error();
        }
        std::vector<doc::Block> found = ocr_page(*page, *ocr_, cancelled);
        r.ocr_text = !found.empty();
        merge_ocr_blocks(u.blocks, std::move(found));
    }
    if (options_.render_dpi > 0)
        u.visuals.push_back(page_visual(*page, i, options_.render_dpi, options_.thumbnail_px));
    return r;
}

}  // namespace sl::ingest
