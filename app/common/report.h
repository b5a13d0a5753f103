// Reports of chats with their citations: Markdown, self-contained HTML (thumbnails of the cited
// pages and frames embedded as data: URIs) and PDF (report_pdf.h). Every citation keeps its
// locator (file, page / slide, time) and its quoted snippet; weak citations stay, marked.
//
// Thread-safety: the functions are reentrant; a ThumbnailFn is called on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/answer/answer.h"

namespace sl::app {

struct ReportChat {
    std::string question;
    Answer answer;           // text, sentences, citations, verification
    std::string model;       // "SmolLM2-135M-Instruct (Q4_1)"
    std::string settings;    // "MSA top-k 16, effort medium"
    std::string when;        // ISO 8601 UTC
};

struct Report {
    std::string title = "Sightline report";
    std::string library;     // where the documents came from (a directory, a list of files)
    std::vector<ReportChat> chats;
};

// An encoded picture of a cited place (PNG or JPEG), with the cited region drawn on it.
struct Thumbnail {
    std::string mime;              // "image/png", "image/jpeg"
    std::vector<uint8_t> bytes;
    int width = 0, height = 0;
};
using ThumbnailFn = std::function<std::optional<Thumbnail>(const Citation&)>;

// Where a citation points, as the viewer opens it: "R-intro.pdf p. 34"; for video and audio the
// cited phrase's start replaces the segment's time in the locator ("Lecture.mp4 00:41:25": the
// second the player seeks to). The desktop's chips and the reports use this one label.
std::string citation_label(const Citation& c);

// citation_label with the phrase's end for media ("Lecture.mp4 00:41:25-00:41:32").
std::string citation_place(const Citation& c);

std::string report_markdown(const Report& r);

// A standalone HTML page; thumbnails (when `thumbs` gives them) embedded as data: URIs.
std::string report_html(const Report& r, const ThumbnailFn& thumbs = {});

// The HTML body with <img src="image_src(chat, citation)"> for each thumbnail that `thumbs` gives
// (empty image_src result: no image). Shared by the HTML and PDF writers.
std::string report_html_with(const Report& r, const ThumbnailFn& thumbs,
                             const std::function<std::string(size_t chat, size_t citation, const Thumbnail&)>& image_src);

// Writes `text` to `path`; throws sl::IoError naming the file when it cannot.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace sl::app
