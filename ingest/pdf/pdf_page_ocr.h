// OCR of PDF pages that have no text layer, or almost none (scans, pages that are one picture).
// Internal to ingest/pdf. Runs on the reader's thread; `engine` is that thread's.
#pragma once

#include <functional>
#include <vector>

#include "core/document/document.h"
#include "ingest/ocr/ocr_engine.h"

namespace Poppler {
class Page;
}

namespace sl::ingest {

inline constexpr int kOcrDpi = 300;
// A page whose born-digital text has fewer non-space characters than this is OCRed.
inline constexpr size_t kMinTextLayerChars = 32;

// Whether a page with these born-digital blocks should be OCRed.
bool page_needs_ocr(const std::vector<doc::Block>& text_blocks);

// Renders `page` at kOcrDpi (lower for huge pages, see capped_dpi) and recognizes it; blank pages
// (checked on a cheap low-resolution render first) are skipped. Blocks have role Ocr and boxes
// normalized to the page as displayed. `cancelled` is polled during recognition.
std::vector<doc::Block> ocr_page(const Poppler::Page& page, OcrEngine& engine,
                                 const std::function<bool()>& cancelled);

// Appends the OCR blocks to `blocks`, leaving out those centred inside a born-digital block
// (the text layer already has them).
void merge_ocr_blocks(std::vector<doc::Block>& blocks, std::vector<doc::Block> ocr);

}  // namespace sl::ingest
