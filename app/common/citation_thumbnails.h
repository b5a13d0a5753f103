// Thumbnails of cited places for reports: PDF pages rendered through the ingest renderer with the
// cited region outlined; video frames and slide pictures taken from the encoded thumbnails the
// readers kept in the Document's visuals (the frame nearest the cited time).
//
// Not thread-safe (keeps open PDF renderers): use from one thread. Documents added with
// add_document must outlive this object.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "app/common/report.h"
#include "core/document/document.h"

namespace sl::ingest {
class PdfPageRenderer;
}

namespace sl::app {

class CitationThumbnails {
public:
    explicit CitationThumbnails(int max_px = 200);
    ~CitationThumbnails();

    // Visual thumbnails (frames, pictures) of `d` become available for its citations.
    void add_document(const doc::Document& d);

    // The thumbnail of `c`'s place, or nothing (unreadable file, no visual kept).
    std::optional<Thumbnail> operator()(const Citation& c);

    ThumbnailFn fn() { return [this](const Citation& c) { return (*this)(c); }; }

private:
    int max_px_;
    std::map<std::string, const doc::Document*> docs_;  // by id
    std::map<std::string, std::unique_ptr<ingest::PdfPageRenderer>> pdfs_;  // by path
};

}  // namespace sl::app
