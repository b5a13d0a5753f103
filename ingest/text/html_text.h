// Text from HTML and XHTML markup, by a small tolerant scanner of our own (no DOM, no recursion):
// script, style, template and the like are dropped; h1..h6 become headings; p, div, li, br, tr and
// other block elements end a paragraph; td/th become table cells; character references (named,
// decimal, hex) are decoded; comments, CDATA and processing instructions are handled; white space
// is folded. Malformed markup (unclosed tags, stray '<', any nesting depth) never fails: the
// scanner is linear in the input and keeps what it can read.
//
// Threading: pure function.
#pragma once

#include <string>
#include <string_view>

#include "ingest/text/text_sections.h"

namespace sl::ingest::text {

struct HtmlText {
    std::string title;  // <title>, folded; empty when absent
};

// Feeds the paragraphs of `html` (UTF-8; invalid sequences are the caller's to repair) into `out`.
HtmlText html_to_sections(std::string_view html, SectionBuilder& out);

// Decodes one character reference starting at html[i] == '&'; on success appends the UTF-8 to
// `out` and returns the index after it, else returns i (the '&' is literal).
size_t decode_entity(std::string_view html, size_t i, std::string& out);

}  // namespace sl::ingest::text
