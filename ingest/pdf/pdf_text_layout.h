// From words in reading order to lines and paragraph-ish blocks, with boxes normalized to the page.
// Free of Poppler (the reader converts Poppler::TextBox into PdfWord), so it is testable on its
// own. Pure functions; thread-safe.
#pragma once

#include <QRectF>
#include <QSizeF>
#include <QString>

#include <vector>

#include "core/document/document.h"

namespace sl::ingest {

// One word as Poppler reports it: box in points on the upright page (as authored, before the
// page's /Rotate), origin top-left.
struct PdfWord {
    QString text;
    QRectF box;
    bool space_after = true;  // a space follows before the next word of the same line
    bool ends_line = false;   // the last word of its line (Poppler's nextWord() is null)
};

// Groups `words` (in reading order) into lines, then lines into blocks:
// - a line ends where Poppler says so, or where the next word leaves the baseline or goes back;
// - a block ends at a vertical gap of about a blank line, a change of text size, a jump up (next
//   column) or lines that do not overlap horizontally.
// Each block gets role Body (Title when its lines are markedly taller than the page's median
// line), text = its lines joined by '\n' (so block.lines[i] is the i-th line of block.text), a
// bbox and per-line boxes, all normalized to `upright_size` (points) and clamped to [0, 1], then
// turned by `rotation` degrees clockwise (0, 90, 180, 270: the page's /Rotate) so that they are
// boxes on the page as displayed.
std::vector<doc::Block> layout_blocks(const std::vector<PdfWord>& words, QSizeF upright_size,
                                      int rotation = 0);

// A normalized box on the upright page, seen on the page turned `rotation` degrees clockwise.
doc::BBox rotate_box(const doc::BBox& b, int rotation);

// `r` (points) divided by `page_size` and clamped to [0, 1]; a degenerate page size gives the
// full-page box.
doc::BBox normalize_box(const QRectF& r, QSizeF page_size);

}  // namespace sl::ingest
