// How a person names a place in a document: "R-intro.pdf p. 12", "deck.pptx slide 4",
// "lecture.mp4 00:41:23",
// "report.docx §3 Results". Used in context markers, citations and reports.
#pragma once

#include <string>

#include "core/document/document.h"

namespace sl::doc {

// "00:41:23" (or "41:23" under an hour when short is true).
std::string format_time(double seconds, bool short_form = false);

// The unit's place within its document: "p. 12", "slide 4", "00:41:23", "image", "§3 Results".
std::string unit_locator(const Document& d, const Unit& u);

// The file name and the unit's place: "R-intro.pdf p. 12".
std::string full_locator(const Document& d, const Unit& u);

// The file name of d.path (no folders).
std::string file_name(const Document& d);

}  // namespace sl::doc
