#include "core/document/document.h"

#include <algorithm>
#include <string>
#include <utility>

namespace sl::doc {

const char* to_string(DocumentKind k) {
    switch (k) {
        case DocumentKind::Pdf: return "pdf";
        case DocumentKind::Slides: return "slides";
        case DocumentKind::Image: return "image";
        case DocumentKind::Video: return "video";
        case DocumentKind::Audio: return "audio";
        case DocumentKind::Text: return "text";
    }
    return "unknown";
}

DocumentKind kind_from_extension(std::string_view path) {
    const size_t dot = path.rfind('.');
    const size_t slash = path.rfind('/');
    if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) return DocumentKind::Pdf;
    std::string ext(path.substr(dot + 1));
    for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    static const std::pair<const char*, DocumentKind> kTable[] = {
        {"pptx", DocumentKind::Slides}, {"ppt", DocumentKind::Slides}, {"odp", DocumentKind::Slides}, {"key", DocumentKind::Slides},
        {"png", DocumentKind::Image},   {"jpg", DocumentKind::Image},  {"jpeg", DocumentKind::Image}, {"gif", DocumentKind::Image},
        {"bmp", DocumentKind::Image},   {"tif", DocumentKind::Image},  {"tiff", DocumentKind::Image}, {"webp", DocumentKind::Image},
        {"mp4", DocumentKind::Video},   {"mkv", DocumentKind::Video},  {"webm", DocumentKind::Video}, {"avi", DocumentKind::Video},
        {"mov", DocumentKind::Video},   {"m4v", DocumentKind::Video},  {"mpg", DocumentKind::Video},  {"mpeg", DocumentKind::Video},
        {"ogv", DocumentKind::Video},   {"wmv", DocumentKind::Video},  {"flv", DocumentKind::Video},  {"ts", DocumentKind::Video},
        {"mp3", DocumentKind::Audio},   {"wav", DocumentKind::Audio},  {"flac", DocumentKind::Audio}, {"ogg", DocumentKind::Audio},
        {"m4a", DocumentKind::Audio},   {"opus", DocumentKind::Audio},
        {"docx", DocumentKind::Text},   {"docm", DocumentKind::Text},  {"dotx", DocumentKind::Text},  {"txt", DocumentKind::Text},
        {"md", DocumentKind::Text},     {"markdown", DocumentKind::Text}, {"html", DocumentKind::Text}, {"htm", DocumentKind::Text},
        {"xhtml", DocumentKind::Text},  {"epub", DocumentKind::Text},
    };
    for (const auto& [e, k] : kTable)
        if (ext == e) return k;
    return DocumentKind::Pdf;
}

const char* to_string(UnitKind k) {
    switch (k) {
        case UnitKind::Page: return "page";
        case UnitKind::Slide: return "slide";
        case UnitKind::Segment: return "segment";
        case UnitKind::Image: return "image";
        case UnitKind::Section: return "section";
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

void Document::add_note(const std::string& text) {
    std::string line = text;
    for (char& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    std::string& all = metadata["notes"];
    if (!all.empty()) all += '\n';
    all += line;
}

std::vector<std::string> Document::notes() const {
    std::vector<std::string> out;
    const auto it = metadata.find("notes");
    if (it == metadata.end()) return out;
    size_t from = 0;
    while (from <= it->second.size()) {
        const size_t nl = std::min(it->second.find('\n', from), it->second.size());
        if (nl > from) out.push_back(it->second.substr(from, nl - from));
        from = nl + 1;
    }
    return out;
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
