#include "app/desktop/answer_format.h"

#include <QLocale>
#include <QObject>
#include <QRegularExpression>

#include <algorithm>
#include <filesystem>

#include "app/common/report.h"
#include "app/desktop/markdown_html.h"
#include "core/document/locator.h"

namespace sl::desktop {

namespace {

constexpr qsizetype kSupportLines = 3;  // sentences listed under a source in the transcript

QString one_line(const std::string& s) {
    return QString::fromStdString(s).simplified();
}

// At most `max` characters (not splitting a surrogate pair), "…" when shortened.
QString shortened(QString s, int max) {
    if (s.size() <= max) return s;
    qsizetype cut = max;
    if (cut > 0 && s.at(cut - 1).isHighSurrogate()) --cut;
    return s.left(cut).trimmed() + QStringLiteral("\u2026");
}

QString time_text(const Citation& c) {
    if (!c.ref.time) return {};
    return QString::fromStdString(doc::format_time(c.ref.time->t0));
}

bool valid(const Answer& a, const Support& s) {
    return s.citation >= 0 && static_cast<size_t>(s.citation) < a.citations.size();
}

QString percent(double x) {
    return QStringLiteral("%1%").arg(static_cast<int>(x * 100 + 0.5));
}

// An attention share: "42%", "<1%" for a small but non-zero one.
QString share_text(double x) {
    return x > 0 && x < 0.005 ? QStringLiteral("<1%") : percent(x);
}

// "word overlap 62%, meaning 0.71"
QString scores(const Support& s) {
    QString t = QObject::tr("word overlap %1").arg(percent(s.lexical));
    if (s.semantic) t += QObject::tr(", meaning %1").arg(*s.semantic, 0, 'f', 2);
    return t;
}

// The sentence of `a` with the given byte range, on one line, its Markdown marks (code ticks,
// bold, a list or heading mark in front) dropped: a quotation of what the chat shows.
QString sentence_text(const Answer& a, const AnswerSentence& s) {
    if (s.begin >= a.text.size() || s.end <= s.begin) return {};
    QString t = one_line(a.text.substr(s.begin, std::min(s.end, a.text.size()) - s.begin));
    static const QRegularExpression lead(QStringLiteral("^(#{1,6}\\s+|[-*+]\\s+|\\d+[.)]\\s+|>\\s*)"));
    t.remove(lead);
    t.remove(QLatin1Char('`'));
    t.remove(QStringLiteral("**"));
    t.remove(QStringLiteral("__"));
    return t;
}

}  // namespace

QString citation_place(const Citation& c) { return QString::fromStdString(app::citation_label(c)); }

std::vector<MarkedPiece> marked_pieces(const Answer& a) {
    // Mirrors Answer::with_markers(): the markers go before the sentence's closing punctuation
    // (and the quotes or brackets after it); tests check the two agree.
    std::vector<MarkedPiece> out;
    const std::string& text = a.text;
    size_t at = 0;
    for (const auto& s : a.sentences) {
        std::vector<Support> marks;
        for (const auto& sup : s.supports)
            if (valid(a, sup)) marks.push_back(sup);
        if (marks.empty() || s.end > text.size() || s.begin > s.end || s.end < at) continue;
        size_t end = s.end;
        while (end > s.begin &&
               (text[end - 1] == '"' || text[end - 1] == ')' || text[end - 1] == '\''))
            --end;
        if (end > s.begin && (text[end - 1] == '.' || text[end - 1] == '!' ||
                              text[end - 1] == '?' || text[end - 1] == ':' || text[end - 1] == ';'))
            --end;
        else
            end = s.end;
        out.push_back({text.substr(at, end - at), std::move(marks)});
        at = end;
    }
    out.push_back({text.substr(std::min(at, text.size())), {}});
    return out;
}

QString marker_text(const Answer& a, const Support& s) {
    const int n =
        valid(a, s) ? a.citations[static_cast<size_t>(s.citation)].number : s.citation + 1;
    return s.weak ? QStringLiteral("[%1?]").arg(n) : QStringLiteral("[%1]").arg(n);
}

QString citation_note(const Answer& a, size_t i) {
    if (!a.used(i)) return QObject::tr("read, not cited by any sentence");
    if (!a.weak(i)) return {};
    // Every support is weak: say how well the best of them matched.
    const Support* best = nullptr;
    for (const auto& s : a.sentences)
        for (const auto& sup : s.supports)
            if (sup.citation == static_cast<int>(i) && (!best || sup.lexical > best->lexical))
                best = &sup;
    if (!best) return {};
    QString reason = QObject::tr("its text backs the sentence poorly (word overlap %1")
                         .arg(percent(best->lexical));
    if (best->semantic) reason += QObject::tr(", meaning %1").arg(*best->semantic, 0, 'f', 2);
    return reason + QStringLiteral(")");
}

QString citation_excerpt(const Citation& c, int max_chars) {
    return shortened(one_line(!c.snippet.empty() ? c.snippet : c.text), max_chars);
}

QStringList citation_supports(const Answer& a, size_t i) {
    struct Line {
        const Support* support;
        QString sentence;
    };
    std::vector<Line> lines;
    for (const auto& s : a.sentences)
        for (const auto& sup : s.supports)
            if (sup.citation == static_cast<int>(i)) lines.push_back({&sup, sentence_text(a, s)});
    std::stable_sort(lines.begin(), lines.end(), [](const Line& x, const Line& y) {
        return x.support->weak != y.support->weak ? !x.support->weak
                                                  : x.support->lexical > y.support->lexical;
    });
    QStringList out;
    for (const auto& l : lines)
        out << QStringLiteral("\u201c%1\u201d \u2014 %2%3")
                   .arg(shortened(l.sentence, 80), scores(*l.support),
                        l.support->weak ? QObject::tr(", weak") : QString());
    return out;
}

QString stop_note(const Answer& a) {
    if (a.stop_reason == "repetition")
        return QObject::tr("The answer began to repeat itself; it is cut before the repetition.");
    if (a.stop_reason == "cancelled")
        return QObject::tr("Stopped before the end; citations come only with a complete answer.");
    if (a.cut || a.stop_reason == "max tokens" || a.stop_reason == "context full")
        return QObject::tr(
            "The answer reached its length budget and is cut at its last full sentence "
            "(a higher effort allows longer answers).");
    return {};
}

QString answer_html(const ChatAnswer& chat, int index, bool dark) {
    const Answer& a = chat.answer;
    // Chips and flags carry their own text colour so they read on either palette.
    const QString chip = dark ? QStringLiteral("#2c4a6e") : QStringLiteral("#dbe8f7");
    const QString chip_fg = dark ? QStringLiteral("#e6f0fb") : QStringLiteral("#10304f");
    const QString weak_bg = dark ? QStringLiteral("#6e5a1e") : QStringLiteral("#fbe7a6");
    const QString weak_fg = dark ? QStringLiteral("#fff4d6") : QStringLiteral("#3d2e00");
    const QString link = dark ? QStringLiteral("#8cb8ec") : QStringLiteral("#1f4e79");
    const QString muted = dark ? QStringLiteral("#a0a8b0") : QStringLiteral("#606870");
    QString html;
    html += QStringLiteral("<p style='margin-top:12px'><b>Q:</b> %1</p>")
                .arg(QString::fromStdString(a.question).toHtmlEscaped());

    // The text rendered as Markdown, with its markers as links where with_markers() writes them
    // (a weak support's "[n?]" on the warning colour; the tooltip names the place and how well it
    // backs the sentence). The markers and the running "…" go in as placeholders.
    QString md;
    QStringList inserts;
    const auto insert = [&inserts](const QString& h) {
        inserts << h;
        return markdown_placeholder(static_cast<int>(inserts.size()) - 1);
    };
    for (const auto& piece : marked_pieces(a)) {
        md += QString::fromStdString(piece.text);
        if (!piece.marks.empty()) md += QLatin1Char(' ');
        for (const auto& s : piece.marks) {
            const Citation& c = a.citations[static_cast<size_t>(s.citation)];
            const QString tip = citation_place(c) + QStringLiteral(" \u2014 ") +
                                scores(s) + (s.weak ? QObject::tr(" (weak)") : QString());
            md += insert(QStringLiteral(
                        "<a href='cite:%1:%2' title=\"%3\" style='text-decoration:none'>"
                        "<span style='background-color:%4;color:%5'>%6</span></a>")
                        .arg(index)
                        .arg(c.number)
                        .arg(tip.toHtmlEscaped(), s.weak ? weak_bg : chip,
                             s.weak ? weak_fg : chip_fg, marker_text(a, s)));
        }
    }
    while (!md.isEmpty() && md.back().isSpace()) md.chop(1);
    if (!chat.finished && chat.error.empty())
        md += QLatin1Char(' ') + insert(QStringLiteral("<span style='color:%1'>\u2026</span>").arg(muted));
    // "A:" leads the first paragraph, or stands above a list, heading, quote, table or code.
    static const QRegularExpression block_start(QStringLiteral("^\\s*([-*+]\\s|\\d+[.)]\\s|#|>|\\||```|~~~|    )"));
    const bool block = block_start.match(md).hasMatch();
    const QString label = insert(QStringLiteral("<b>A:</b> "));
    if (block) html += QStringLiteral("<p><b>A:</b></p>") + markdown_html(md, inserts);
    else if (md.isEmpty()) html += QStringLiteral("<p><b>A:</b></p>");
    else html += markdown_html(label + md, inserts);
    if (!chat.finished && !chat.status.empty())
        html += QStringLiteral("<p style='color:%1'><small>%2</small></p>")
                    .arg(muted, QString::fromStdString(chat.status).toHtmlEscaped());
    if (!chat.error.empty())
        html += QStringLiteral("<p style='color:#c0392b'><b>%1</b> %2</p>")
                    .arg(QObject::tr("Could not answer:"),
                         QString::fromStdString(chat.error).toHtmlEscaped());
    if (const QString note = stop_note(a); chat.finished && !note.isEmpty())
        html +=
            QStringLiteral("<p style='color:%1'><i>%2</i></p>").arg(muted, note.toHtmlEscaped());

    // The sources: place, flag, quoted words, the sentences each backs.
    if (!a.citations.empty() && chat.finished) {
        html += QStringLiteral("<table cellspacing='2' cellpadding='2'>");
        for (size_t i = 0; i < a.citations.size(); ++i) {
            const Citation& c = a.citations[i];
            const QString note = citation_note(a, i);
            QString flag;
            if (a.weak(i))
                flag = QStringLiteral(
                           " <span style='background-color:%1;color:%3'>&nbsp;\u26a0 %4 "
                           "%2&nbsp;</span>")
                           .arg(weak_bg, note.toHtmlEscaped(), weak_fg, QObject::tr("weak:"));
            else if (!note.isEmpty())
                flag = QStringLiteral(" <span style='color:%1'>(%2)</span>")
                           .arg(muted, note.toHtmlEscaped());
            QString detail = QStringLiteral("<span style='color:%1'>%2</span>")
                                 .arg(muted, citation_excerpt(c).toHtmlEscaped());
            QStringList lines;
            if (c.share > 0)
                lines << QObject::tr("%1 of the attention on documents").arg(share_text(c.share));
            // The strongest few; the chip's tooltip and the Markdown report list them all.
            const QStringList backs = citation_supports(a, i);
            for (qsizetype k = 0; k < std::min<qsizetype>(backs.size(), kSupportLines); ++k)
                lines << QObject::tr("backs %1").arg(backs[k]);
            if (const qsizetype more = backs.size() - kSupportLines; more > 0)
                lines << (more == 1 ? QObject::tr("and 1 more sentence")
                                    : QObject::tr("and %1 more sentences").arg(more));
            if (!lines.isEmpty())
                detail += QStringLiteral("<br/><small style='color:%1'>%2</small>")
                              .arg(muted, lines.join(QStringLiteral("\n"))
                                              .toHtmlEscaped()
                                              .replace(QLatin1Char('\n'), QStringLiteral("<br/>")));
            html +=
                QStringLiteral(
                    "<tr><td valign='top'><a style='color:%5' href='cite:%1:%2'>[%2]</a></td><td>"
                    "<a style='color:%5' href='cite:%1:%2'>%3</a>%4<br/>%6</td></tr>")
                    .arg(index)
                    .arg(c.number)
                    .arg(citation_place(c).toHtmlEscaped(), flag, link, detail);
        }
        html += QStringLiteral("</table>");
    } else if (chat.finished && chat.error.empty() && !a.text.empty() &&
               a.stop_reason != "cancelled") {
        html += QStringLiteral("<p style='color:%1'><small>%2</small></p>")
                    .arg(muted, QObject::tr("No source backs this answer."));
    }
    if (chat.finished && (!chat.read_summary.empty() || !chat.plan.empty())) {
        QString read = chat.read_summary.empty()
                           ? QString()
                           : QObject::tr("Read: %1").arg(QString::fromStdString(chat.read_summary)).toHtmlEscaped();
        if (!chat.plan.empty())
            read += (read.isEmpty() ? QString() : QStringLiteral(" \u00b7 ")) +
                    QStringLiteral("<a style='color:%1' href='plan:%2'>%3</a>")
                        .arg(muted)
                        .arg(index)
                        .arg(QObject::tr("the context plan"));
        html += QStringLiteral("<p style='color:%1'><small>%2</small></p>").arg(muted, read);
    }
    if (chat.finished && !chat.method.empty()) {
        QStringList parts;
        if (!chat.model.empty()) parts << QString::fromStdString(chat.model);
        parts << QString::fromStdString(chat.method);
        if (chat.context_tokens > 0)
            parts << QObject::tr("%1 context tokens")
                         .arg(QLocale().toString(static_cast<qlonglong>(chat.context_tokens)));
        html += QStringLiteral("<p style='color:%1'><small>%2</small></p>")
                    .arg(muted, parts.join(QStringLiteral(" \u00b7 ")).toHtmlEscaped());
    }
    return html;
}

QString answer_plain_text(const ChatAnswer& chat) {
    const Answer& a = chat.answer;
    QString s = QString::fromStdString(a.with_markers()).trimmed();
    if (const QString note = stop_note(a); chat.finished && !note.isEmpty())
        s += QStringLiteral("\n\n(") + note + QLatin1Char(')');
    if (!a.citations.empty()) {
        s += QStringLiteral("\n\nSources:\n");
        for (size_t i = 0; i < a.citations.size(); ++i) {
            const Citation& c = a.citations[i];
            const QString locator = citation_place(c);
            s += QStringLiteral("[%1] %2").arg(c.number).arg(locator);
            const QString t = time_text(c);
            if (!t.isEmpty() && !locator.contains(t)) s += QStringLiteral(" at ") + t;
            const QString note = citation_note(a, i);
            if (a.weak(i))
                s += QStringLiteral(" (weak: %1)").arg(note);
            else if (!note.isEmpty())
                s += QStringLiteral(" (%1)").arg(note);
            if (const QString e = citation_excerpt(c); !e.isEmpty())
                s += QStringLiteral(" \u2014 \u201c%1\u201d").arg(e);
            s += QLatin1Char('\n');
        }
    }
    return s;
}

QString answer_markdown(const ChatAnswer& chat) {
    const Answer& a = chat.answer;
    QString md = QStringLiteral("## %1\n\n").arg(QString::fromStdString(a.question));
    md += QString::fromStdString(a.with_markers()).trimmed() + QStringLiteral("\n\n");
    if (const QString note = stop_note(a); !note.isEmpty())
        md += QStringLiteral("_%1_\n\n").arg(note);
    if (!chat.error.empty())
        md += QStringLiteral("_Could not answer: %1_\n\n").arg(QString::fromStdString(chat.error));
    for (size_t i = 0; i < a.citations.size(); ++i) {
        const Citation& c = a.citations[i];
        md += QStringLiteral("%1. **%2**").arg(c.number).arg(citation_place(c));
        if (c.ref.bbox)
            md += QStringLiteral(" (region %1,%2–%3,%4)")
                      .arg(c.ref.bbox->x0, 0, 'f', 2)
                      .arg(c.ref.bbox->y0, 0, 'f', 2)
                      .arg(c.ref.bbox->x1, 0, 'f', 2)
                      .arg(c.ref.bbox->y1, 0, 'f', 2);
        if (c.ref.time)
            md += QStringLiteral(" (%1–%2)")
                      .arg(QString::fromStdString(doc::format_time(c.ref.time->t0)),
                           QString::fromStdString(doc::format_time(c.ref.time->t1)));
        const QString note = citation_note(a, i);
        if (a.weak(i))
            md += QStringLiteral(" — ⚠ weak: %1").arg(note);
        else if (!note.isEmpty())
            md += QStringLiteral(" — _%1_").arg(note);
        if (const QString e = citation_excerpt(c, 300); !e.isEmpty())
            md += QStringLiteral(" — %1").arg(e);
        md += QLatin1Char('\n');
        for (const QString& s : citation_supports(a, i))
            md += QStringLiteral("   - backs %1\n").arg(s);
    }
    if (!chat.read_summary.empty())
        md += QStringLiteral("\n_Read: %1._\n").arg(QString::fromStdString(chat.read_summary));
    if (!chat.method.empty())
        md += QStringLiteral("\n_%1; model %2._\n")
                  .arg(QString::fromStdString(chat.method), QString::fromStdString(chat.model));
    return md + QLatin1Char('\n');
}

bool parse_citation_link(const QString& url, int* answer_index, int* number) {
    if (!url.startsWith(QLatin1String("cite:"))) return false;
    const QStringList parts = url.mid(5).split(QLatin1Char(':'));
    if (parts.size() != 2) return false;
    bool ok1 = false, ok2 = false;
    const int a = parts[0].toInt(&ok1);
    const int n = parts[1].toInt(&ok2);
    if (!ok1 || !ok2) return false;
    *answer_index = a;
    *number = n;
    return true;
}

}  // namespace sl::desktop
