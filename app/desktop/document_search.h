// Find in a document (the PDF view's Ctrl+F): every occurrence of a text in the document's lines
// (or in a block's text where it has no line boxes), in reading order, with the box to highlight.
// Case-insensitive; a match does not span two lines. Pure function of the document; thread-safe.
#pragma once

#include <QString>

#include <optional>
#include <string>
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

namespace sl::desktop {

// The lines of unit `u` inside `region` that the citation's snippet quotes (a line counts when at
// least three of its words, or all of a shorter line's, run in the snippet in order), as one box
// from the first to the last such line: the cited lines rather than the whole region. Nullopt
// when no line matches (the region is then highlighted as it is).
std::optional<doc::BBox> cited_lines(const doc::Unit& u, const doc::BBox& region, const std::string& snippet);

}  // namespace sl::desktop
