// Answers as text: HTML for the chat transcript and the HTML report (citation markers as links
// "cite:<answer>:<n>", weak ones flagged), plain text with a sources list for the clipboard, and
// Markdown for the report. Everything is read off the core's sl::Answer (core/answer/answer.h):
// the inline markers sit where Answer::with_markers() puts them ("[1]", a weak support "[1?]"),
// each source says why it is flagged (a weak support, or read but cited by no sentence) and which
// sentences it backs with their word-overlap and meaning scores, and an answer cut short says so.
// Pure functions; thread-safe.
#pragma once

#include <QString>
#include <QStringList>

#include <string>
#include <vector>

#include "app/desktop/chat_answer.h"

namespace sl::desktop {

// The answer's text cut where Answer::with_markers() puts its markers: each piece is followed by
// the markers of `marks` (supports with a valid citation, strongest first); the last piece has
// none. Joining each piece with " [n]" / " [n?]" per mark gives with_markers().
struct MarkedPiece {
    std::string text;
    std::vector<Support> marks;
};
std::vector<MarkedPiece> marked_pieces(const Answer& a);

// Where a citation points, as the app labels it: the core's locator ("R-intro.pdf p. 66"), except
// that a video or audio citation names the start of the cited phrase (ref.time.t0), the second
// the viewer seeks to, rather than the start of its segment ("talk.mp4 00:00:45", not 00:00:30).
QString citation_place(const Citation& c);

// "[3]" or, for a weak support, "[3?]".
QString marker_text(const Answer& a, const Support& s);

// What the chat says of citation i besides its place: empty when some sentence is backed by it
// without a flag; "read, not cited by any sentence" when no sentence uses it; "its text backs the
// sentence poorly (word overlap 12%[, meaning 0.21])" when every sentence it backs flagged it.
QString citation_note(const Answer& a, size_t i);

// The citation's quoted words on one line: its snippet, else the start of its text; at most
// `max_chars` characters ("…" when shortened).
QString citation_excerpt(const Citation& c, int max_chars = 140);

// The sentences citation i backs, one line each, strongest support first:
// "“Fit it with lm().” — word overlap 62%, meaning 0.71" (+ ", weak" when flagged).
QStringList citation_supports(const Answer& a, size_t i);

// Why the answer ended, when that is worth saying: cut at its length budget, cut before a
// repetition, stopped by the user. Empty for a plain end.
QString stop_note(const Answer& a);

// The question, the answer with its markers as links to cite:<answer_index>:<n>, a note when it
// was cut, the numbered sources (excerpt, flag, attention share, the three sentences each backs
// best), "Read: ..." and the model and method. While the answer runs: the text so far, "…" and the
// latest status line.
QString answer_html(const ChatAnswer& answer, int answer_index, bool dark);

// "text [1].\n\nSources:\n[1] R-intro.pdf p. 66 — “excerpt”\n[2] ... (weak: reason) — “...”\n"
QString answer_plain_text(const ChatAnswer& answer);

// Markdown of one answer (question as a heading, sources as a numbered list with the sentences
// each backs).
QString answer_markdown(const ChatAnswer& answer);

// Parses "cite:<answer>:<n>"; false when `url` is not a citation link.
bool parse_citation_link(const QString& url, int* answer_index, int* number);

}  // namespace sl::desktop
