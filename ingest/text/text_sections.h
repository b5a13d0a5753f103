// Sections of a text document (DOCX, plain text, Markdown, HTML, EPUB), the unit of documents whose
// pages only exist once a program lays them out. Readers feed paragraphs in reading order; a new
// section starts at every heading up to kSectionHeadingLevel, at every chapter (EPUB), and when the
// current one holds more than about a printed page of text (kSectionChars), so that a citation
// points at a place a person can find: "report.docx §3 Results".
//
// Also: UTF-8 repair for text read from files that claim to be UTF-8 and are not.
//
// Threading: plain data; one SectionBuilder per read, on the reader's thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/document/document.h"

namespace sl::ingest::text {

// About one printed page: a section past this many bytes of text continues in a new one.
constexpr size_t kSectionChars = 3000;
// Headings of this level or higher (1 = top) start a section; deeper ones stay titles inside it.
constexpr int kSectionHeadingLevel = 3;
// The longest label kept from a heading (UTF-8 bytes, cut at a character boundary, "…" added).
constexpr size_t kLabelBytes = 60;

// `s` with every invalid UTF-8 sequence (bad lead or continuation bytes, overlong forms,
// surrogates, code points past U+10FFFF, a sequence cut by the end) replaced by U+FFFD, and NUL
// dropped; `replaced` (optional) counts the replacements.
std::string repair_utf8(std::string_view s, size_t* replaced = nullptr);

// `s` with runs of white space (space, tab, CR, LF, NBSP kept) folded to one space and trimmed.
std::string collapse_spaces(std::string_view s);

// At most `max_bytes` of `s`, cut at a character boundary, "…" appended when cut.
std::string truncate_utf8(std::string_view s, size_t max_bytes);

// "1 section", "12 sections": the last progress message of a reader.
std::string sections_done(size_t n);

class SectionBuilder {
public:
    // Headings: role Title with level >= 1. A heading at level <= kSectionHeadingLevel starts a
    // section labelled with its text. Other blocks go into the current section (one is opened,
    // unlabelled, when none is), which is continued in a new one past kSectionChars.
    void heading(const std::string& text, int level);
    void block(doc::BlockRole role, const std::string& text);
    // Closes the current section: the next block opens a new one (a chapter boundary).
    void break_section();
    // Appends a note (footnote) to the current section.
    void note(const std::string& text) { block(doc::BlockRole::Note, text); }

    // The sections so far, indexed 0..n-1 (empty sections are dropped).
    std::vector<doc::Unit> take();
    size_t count() const { return units_.size(); }
    // The text of the first heading seen, for a document title; empty when none.
    const std::string& first_heading() const { return first_heading_; }

private:
    void open(const std::string& label);
    std::vector<doc::Unit> units_;
    bool open_ = false;
    size_t chars_ = 0;  // text bytes in the current section
    std::string label_; // of the current section, for its continuations
    std::string first_heading_;
};

}  // namespace sl::ingest::text
