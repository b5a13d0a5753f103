// Find in a document (the PDF view's Ctrl+F): every occurrence of a text in the document's lines
// (or in a block's text where it has no line boxes), in reading order, with the box to highlight.
// Case-insensitive; a match does not span two lines. Pure function of the document; thread-safe.
#pragma once

#include <QString>

#include <vector>

#include "core/document/document.h"

namespace sl::desktop {

struct SearchHit {
    int unit = 0;        // page (unit index)
    doc::BBox box;       // the line (or block) holding the match, normalized to the unit
    QString line;        // that line's text, for a tooltip
};

// At most max_hits hits; an empty or blank query finds nothing.
std::vector<SearchHit> find_in_document(const doc::Document& d, const QString& query, size_t max_hits = 5000);

}  // namespace sl::desktop
