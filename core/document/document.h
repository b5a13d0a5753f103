// The document model that every ingest reader fills and everything downstream reads: a Document
// is an ordered list of units (PDF page, slide, video segment, image), each holding text blocks and
// visuals that know where they came from. Plain data, free of Qt; copyable and movable; no
// invariants beyond those stated on the fields.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sl::doc {

// A box in the unit's normalized coordinates: (0,0) top-left, (1,1) bottom-right.
struct BBox {
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    bool valid() const { return x0 <= x1 && y0 <= y1 && x0 >= 0 && y0 >= 0 && x1 <= 1 && y1 <= 1; }
    bool operator==(const BBox&) const = default;
};

// A half-open time range in seconds within the media, [t0, t1).
struct TimeRange {
    double t0 = 0, t1 = 0;
};

// Text: documents whose pages are not fixed by the file (DOCX, plain text, Markdown, HTML, EPUB);
// their units are Sections. New kinds go at the end: answers store kinds by number.
enum class DocumentKind { Pdf, Slides, Image, Video, Audio, Text };
// Section: a part of a Text document that starts at a heading (label: the heading) or continues
// the previous one past a page-sized amount of text.
enum class UnitKind { Page, Slide, Segment, Image, Section };
enum class BlockRole { Title, Body, Note, Ocr, Subtitle, Transcript, TableCell, Caption };
enum class VisualKind { PageRender, Picture, Frame };

const char* to_string(DocumentKind k);
// The kind a file of this name would be by its extension (case-insensitive), before it is read;
// Pdf when the extension says nothing (a failed add is listed with this kind).
DocumentKind kind_from_extension(std::string_view path);
const char* to_string(UnitKind k);
const char* to_string(BlockRole r);
const char* to_string(VisualKind k);

// A word or line with its box, for highlighting a cited region precisely (PDF, OCR).
struct Span {
    std::string text;
    BBox bbox;
};

struct Block {
    BlockRole role = BlockRole::Body;
    std::string text;                  // UTF-8
    std::optional<BBox> bbox;          // where on the unit (pages, slides, images, frames)
    std::optional<TimeRange> time;     // when in the media (subtitles, transcript)
    std::vector<Span> lines;           // optional finer boxes: lines (PDF), words (OCR)
    float confidence = 1.0f;           // OCR / speech confidence in [0, 1]; 1 for born-digital text
};

struct Visual {
    VisualKind kind = VisualKind::PageRender;
    std::optional<BBox> bbox;          // position on the unit (embedded pictures)
    std::optional<double> timestamp;   // exact presentation time in seconds (video frames)
    int width = 0, height = 0;         // pixels (0 when rendered on demand)
    std::string locator;               // how to get the pixels again: "page:12@150dpi",
                                       // "zip:ppt/media/image3.png", "frame:pts=123456"
    std::string mime;                  // of `encoded`, when present ("image/png", "image/jpeg")
    std::vector<uint8_t> encoded;      // small encoded image (thumbnail/frame) when the reader kept one
};

struct Unit {
    UnitKind kind = UnitKind::Page;
    int index = 0;                     // 0-based position in the document
    std::string label;                 // what a person calls it: "12" (page label), "4", "00:41:23"
    std::optional<TimeRange> time;     // video/audio segments
    float width = 0, height = 0;       // page/slide size in points (1/72 in); pixels for images
    int rotation = 0;                  // degrees, as the file says (PDF)
    std::vector<Block> blocks;
    std::vector<Visual> visuals;
};

// An outline (bookmark) entry or video chapter: a titled position in the document.
struct OutlineEntry {
    std::string title;
    int level = 0;                     // nesting depth, 0 = top
    int unit = -1;                     // target unit index, -1 when unresolved
    std::optional<double> time;        // chapters
};

struct Link {
    int unit = 0;                      // unit the link is on
    BBox bbox;
    std::string uri;                   // external target, or empty
    int target_unit = -1;              // internal target
};

struct Document {
    std::string id;                    // sha256 of the file's bytes (content hash)
    std::string path;
    DocumentKind kind = DocumentKind::Pdf;
    std::string title;
    std::map<std::string, std::string> metadata;  // author, creator, producer, dates, codec...
    double duration = 0;               // seconds, for media
    std::vector<Unit> units;
    std::vector<OutlineEntry> outline;
    std::vector<Link> links;

    // What the reader noticed and the user should hear (a file it skipped, a limit it applied): kept
    // in metadata["notes"], one per line, so that it is stored and exported with the document.
    void add_note(const std::string& text);
    std::vector<std::string> notes() const;

    size_t text_chars() const;         // total UTF-8 bytes of block text
    size_t block_count() const;
    size_t visual_count() const;
};

// What a citation resolves to: a document, a unit, and a region or a time range within it.
struct SourceRef {
    std::string document;              // Document::id
    int unit = 0;
    std::optional<BBox> bbox;
    std::optional<TimeRange> time;
};

}  // namespace sl::doc
