// Answers as text: HTML for the chat transcript and the HTML report (citations as links
// "cite:<answer>:<n>", weak ones flagged), and plain text with a sources list for the clipboard
// and the Markdown report. Pure functions; thread-safe.
#pragma once

#include <QString>

#include "app/desktop/answer_types.h"

namespace sl::desktop {

// The answer's text as HTML with each [n] marker turned into a link to cite:<answer_index>:<n>
// (flagged with a warning sign when weak), followed by the numbered sources.
QString answer_html(const Answer& answer, int answer_index, bool dark);

// "text\n\nSources:\n[1] R-intro.pdf p. 66 — excerpt\n[2] ... (weak: reason)\n"
QString answer_plain_text(const Answer& answer);

// Markdown of one answer (question as a heading, sources as a numbered list).
QString answer_markdown(const Answer& answer);

// Parses "cite:<answer>:<n>"; false when `url` is not a citation link.
bool parse_citation_link(const QString& url, int* answer_index, int* number);

}  // namespace sl::desktop
