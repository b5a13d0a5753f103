// The pixels behind a document's visuals, for a vision tower in the ask flow
// (core/ask/visual_context.h: AskVision::pixels):
//   PDF page renders ("page:N@...")  rendered again from the file through Poppler, longest side
//                                    about max_px (pdf_render.h keeps hostile sizes bounded);
//   pictures ("zip:ENTRY", "file")   decoded from the slide deck's media or the image file itself,
//                                    scaled on decode so a huge picture never lands whole;
//   video frames ("frame:t=...")     the frame the reader kept with the visual (its thumbnail, 256 px
//                                    by default: full frames are not stored), from the library.
// Anything that cannot be read gives nullopt or throws sl::Error naming the file (the ask flow
// notes it and reads a blank image).
//
// Not thread-safe (keeps open PDF renderers): use from the thread that asks. The Library must
// outlive this object.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <QImage>

#include "core/ask/visual_context.h"
#include "core/document/document.h"
#include "core/vision/image_preprocess.h"

namespace sl {
class Library;
}
namespace sl::ingest {
class PdfPageRenderer;
}

namespace sl::app {

// 8-bit RGB of `img` (any format); empty for a null image.
RgbImage rgb_of(const QImage& img);

// Decodes image file `path` into RGB; throws sl::FormatError naming the file when it cannot or
// when it is over 16384 pixels per edge.
RgbImage load_rgb_file(const std::string& path);

class VisualPixels {
public:
    explicit VisualPixels(const Library* lib);
    ~VisualPixels();

    std::optional<RgbImage> operator()(const doc::Document& d, const doc::Unit& u, const doc::Visual& v, int max_px);
    VisualPixelSource fn() {
        return [this](const doc::Document& d, const doc::Unit& u, const doc::Visual& v, int max_px) {
            return (*this)(d, u, v, max_px);
        };
    }

private:
    std::optional<RgbImage> stored_frame(const doc::Document& d, const doc::Unit& u, const doc::Visual& v);

    const Library* lib_;
    std::map<std::string, int64_t> doc_ids_;  // doc::Document::id -> the library's id
    std::map<std::string, std::unique_ptr<ingest::PdfPageRenderer>> pdfs_;  // by path
};

}  // namespace sl::app
