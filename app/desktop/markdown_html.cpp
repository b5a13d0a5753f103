#include "app/desktop/markdown_html.h"

#include <QRegularExpression>
#include <QTextDocument>

namespace sl::desktop {

QString markdown_placeholder(int k) {
    return QChar(0xE000) + QString::number(k) + QChar(0xE001);
}

QString markdown_html(const QString& markdown, const QStringList& inserts) {
    QTextDocument doc;
    doc.setMarkdown(markdown, QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub |
                                                              QTextDocument::MarkdownNoHTML));
    QString html = doc.toHtml();
    const qsizetype body = html.indexOf(QLatin1String("<body"));
    const qsizetype open = body < 0 ? -1 : html.indexOf(QLatin1Char('>'), body);
    const qsizetype close = html.lastIndexOf(QLatin1String("</body>"));
    if (open >= 0 && close > open) html = html.mid(open + 1, close - open - 1).trimmed();
    if (inserts.isEmpty()) return html;
    static const QRegularExpression placeholder(QStringLiteral("\\x{E000}(\\d+)\\x{E001}"));
    QString out;
    qsizetype at = 0;
    for (auto it = placeholder.globalMatch(html); it.hasNext();) {
        const QRegularExpressionMatch m = it.next();
        out += QStringView(html).mid(at, m.capturedStart() - at);
        const int k = m.captured(1).toInt();
        if (k >= 0 && k < inserts.size()) out += inserts[k];
        at = m.capturedEnd();
    }
    out += QStringView(html).mid(at);
    return out;
}

}  // namespace sl::desktop
