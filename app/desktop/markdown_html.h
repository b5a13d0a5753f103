// Markdown (as models write it: `code`, **bold**, lists, fenced blocks, tables) to an HTML
// fragment for the chat and the HTML report, through QTextDocument's CommonMark/GitHub importer.
// Raw HTML in the text is shown as text, not interpreted. Pieces of HTML the caller makes
// itself (citation links) go in as placeholders, markdown_placeholder(k), written into the
// Markdown where they belong and replaced by inserts[k] in the result.
// Reentrant: usable on a worker thread (QTextDocument, no widgets).
#pragma once

#include <QString>
#include <QStringList>

namespace sl::desktop {

// A run of private-use characters that Markdown leaves alone.
QString markdown_placeholder(int k);

// The body of the HTML QTextDocument makes of `markdown` (block elements: <p>, <ul>, <pre>...),
// with each placeholder replaced by its insert.
QString markdown_html(const QString& markdown, const QStringList& inserts = {});

}  // namespace sl::desktop
