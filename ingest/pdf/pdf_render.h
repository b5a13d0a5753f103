// Page renders on demand: the pixels behind a PageRender visual ("page:<index>@<dpi>dpi"), the
// input of OCR, and thumbnails. Every render stays within a pixel budget so that a hostile page
// size (a MediaBox of 10^7 points) cannot exhaust memory: larger requests render at a lower DPI.
#pragma once

#include <QImage>

#include <memory>
#include <string>

namespace Poppler {
class Document;
class Page;
}  // namespace Poppler

namespace sl::ingest {

inline constexpr double kMaxRenderPixels = 64e6;  // ~256 MB as RGB32
inline constexpr int kMaxRenderSide = 16384;

// The DPI (<= `dpi`) at which a page of width_pt x height_pt points fits the render budget.
double capped_dpi(double width_pt, double height_pt, double dpi);

// Renders `page` at `dpi`, capped by capped_dpi(); white paper, antialiased. Null on failure.
// Runs on the caller's thread; the page's document must not be used on another thread meanwhile.
QImage render_poppler_page(const Poppler::Page& page, double dpi);

// A render of `page` whose longest side is about `max_px` pixels.
QImage render_poppler_thumbnail(const Poppler::Page& page, int max_px);

// Holds one open document for repeated renders (a viewer scrolling, a citation being shown).
// Not thread-safe: use one instance per thread. Movable, not copyable.
class PdfPageRenderer {
public:
    // Throws IngestError (Io, Unsupported, Corrupt, Encrypted) naming the file.
    explicit PdfPageRenderer(const std::string& path);
    ~PdfPageRenderer();
    PdfPageRenderer(PdfPageRenderer&&) noexcept;
    PdfPageRenderer& operator=(PdfPageRenderer&&) noexcept;

    int page_count() const;
    // `page` is 0-based. Throws IngestError (Corrupt) when the page is out of range or fails.
    QImage render(int page, int dpi) const;

private:
    std::string path_;
    std::unique_ptr<Poppler::Document> doc_;
};

// One-shot form of PdfPageRenderer(path).render(page, dpi).
QImage render_page(const std::string& path, int page, int dpi);

}  // namespace sl::ingest
