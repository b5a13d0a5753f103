#include "core/document/document.h"

namespace sl::doc {

const char* to_string(DocumentKind k) {
    switch (k) {
        case DocumentKind::Pdf: return "pdf";
        case DocumentKind::Slides: return "slides";
        case DocumentKind::Image: return "image";
        case DocumentKind::Video: return "video";
        case DocumentKind::Audio: return "audio";
    }
    return "unknown";
}

const char* to_string(UnitKind k) {
    switch (k) {
        case UnitKind::Page: return "page";
        case UnitKind::Slide: return "slide";
        case UnitKind::Segment: return "segment";
        case UnitKind::Image: return "image";
    }
    return "unknown";
}

const char* to_string(BlockRole r) {
    switch (r) {
        case BlockRole::Title: return "title";
        case BlockRole::Body: return "body";
        case BlockRole::Note: return "note";
        case BlockRole::Ocr: return "ocr";
        case BlockRole::Subtitle: return "subtitle";
        case BlockRole::Transcript: return "transcript";
        case BlockRole::TableCell: return "table_cell";
        case BlockRole::Caption: return "caption";
    }
    return "unknown";
}

const char* to_string(VisualKind k) {
    switch (k) {
        case VisualKind::PageRender: return "page_render";
        case VisualKind::Picture: return "picture";
        case VisualKind::Frame: return "frame";
    }
    return "unknown";
}

size_t Document::text_chars() const {
    size_t n = 0;
    for (const auto& u : units)
        for (const auto& b : u.blocks) n += b.text.size();
    return n;
}

size_t Document::block_count() const {
    size_t n = 0;
    for (const auto& u : units) n += u.blocks.size();
    return n;
}

size_t Document::visual_count() const {
    size_t n = 0;
    for (const auto& u : units) n += u.visuals.size();
    return n;
}

}  // namespace sl::doc
