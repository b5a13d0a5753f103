#include "core/document/locator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace sl::doc {

std::string format_time(double seconds, bool short_form) {
    const long long s = std::llround(std::max(0.0, seconds));
    char buf[32];
    if (short_form && s < 3600) std::snprintf(buf, sizeof buf, "%02lld:%02lld", s / 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
    return buf;
}

std::string file_name(const Document& d) { return std::filesystem::path(d.path).filename().string(); }

std::string unit_locator(const Document& d, const Unit& u) {
    (void)d;
    switch (u.kind) {
        case UnitKind::Page: return "p. " + (u.label.empty() ? std::to_string(u.index + 1) : u.label);
        case UnitKind::Slide: return "slide " + std::to_string(u.index + 1);
        case UnitKind::Segment: return u.time ? format_time(u.time->t0) : u.label;
        case UnitKind::Image: return "image";
        // "§3 Results": the section's number and heading. Pages of a DOCX, Markdown or HTML file
        // exist only once a program lays it out (fonts, paper, window width), so a page number
        // would be a guess that disagrees with what the reader sees; the heading is what Word's
        // navigation pane, a Markdown outline and an EPUB table of contents show, and the number
        // tells apart sections without a heading (text chunks, "§7") and repeated headings.
        case UnitKind::Section:
            return "§" + std::to_string(u.index + 1) + (u.label.empty() ? "" : " " + u.label);
    }
    return u.label;
}

std::string full_locator(const Document& d, const Unit& u) { return file_name(d) + " " + unit_locator(d, u); }

}  // namespace sl::doc
