#include "app/desktop/answer_format.h"

#include <QObject>
#include <QRegularExpression>
#include <QStringList>

#include "core/document/locator.h"

namespace sl::desktop {

namespace {

QString one_line(const std::string& s) {
    QString q = QString::fromStdString(s).simplified();
    return q;
}

QString time_text(const Citation& c) {
    if (!c.ref.time) return {};
    return QString::fromStdString(doc::format_time(c.ref.time->t0));
}

}  // namespace

QString answer_html(const Answer& a, int index, bool dark) {
    // Chips and flags carry their own text colour so they read on either palette.
    const QString chip = dark ? QStringLiteral("#2c4a6e") : QStringLiteral("#dbe8f7");
    const QString chip_fg = dark ? QStringLiteral("#e6f0fb") : QStringLiteral("#10304f");
    const QString weak_bg = dark ? QStringLiteral("#6e5a1e") : QStringLiteral("#fbe7a6");
    const QString weak_fg = dark ? QStringLiteral("#fff4d6") : QStringLiteral("#3d2e00");
    const QString link = dark ? QStringLiteral("#8cb8ec") : QStringLiteral("#1f4e79");
    const QString muted = dark ? QStringLiteral("#a0a8b0") : QStringLiteral("#606870");
    QString html;
    html += QStringLiteral("<p style='margin-top:12px'><b>Q:</b> %1</p>").arg(QString::fromStdString(a.question).toHtmlEscaped());
    QString body = QString::fromStdString(a.text).toHtmlEscaped();
    static const QRegularExpression marker(QStringLiteral("\\[(\\d+)\\??\\]"));
    QString linked;
    qsizetype last = 0;
    for (auto it = marker.globalMatch(body); it.hasNext();) {
        const auto m = it.next();
        linked += body.mid(last, m.capturedStart() - last);
        const int n = m.captured(1).toInt();
        const Citation* c = find_citation(a, n);
        if (!c) {
            linked += m.captured(0);
        } else {
            linked += QStringLiteral("<a href='cite:%1:%2' style='text-decoration:none'><span style='background-color:%3;color:%6'>"
                                     "&nbsp;%4%5&nbsp;</span></a>")
                          .arg(index)
                          .arg(n)
                          .arg(c->weak ? weak_bg : chip)
                          .arg(c->weak ? QStringLiteral("\u26a0 ") : QString())
                          .arg(n)
                          .arg(c->weak ? weak_fg : chip_fg);
        }
        last = m.capturedEnd();
    }
    linked += body.mid(last);
    linked.replace(QLatin1Char('\n'), QStringLiteral("<br/>"));
    if (!a.finished && a.error.empty()) linked += QStringLiteral(" <span style='color:%1'>\u2026</span>").arg(muted);
    html += QStringLiteral("<p><b>A:</b> %1</p>").arg(linked);
    if (!a.error.empty())
        html += QStringLiteral("<p style='color:#c0392b'><b>Could not answer:</b> %1</p>")
                    .arg(QString::fromStdString(a.error).toHtmlEscaped());
    if (!a.citations.empty() && (a.finished || !a.text.empty())) {
        html += QStringLiteral("<table cellspacing='2' cellpadding='2'>");
        for (const auto& c : a.citations) {
            QString flag;
            if (c.weak)
                flag = QStringLiteral(" <span style='background-color:%1;color:%3'>&nbsp;\u26a0 weak: %2&nbsp;</span>")
                           .arg(weak_bg, QString::fromStdString(c.weak_reason).toHtmlEscaped(), weak_fg);
            else if (!c.weak_reason.empty())
                flag = QStringLiteral(" <span style='color:%1'>(%2)</span>")
                           .arg(muted, QString::fromStdString(c.weak_reason).toHtmlEscaped());
            QString excerpt = one_line(c.excerpt);
            if (excerpt.size() > 140) excerpt = excerpt.left(140) + QStringLiteral("\u2026");
            html += QStringLiteral("<tr><td valign='top'><a style='color:%7' href='cite:%1:%2'>[%2]</a></td><td>"
                                   "<a style='color:%7' href='cite:%1:%2'>%3</a>%4<br/><span style='color:%5'>%6</span></td></tr>")
                        .arg(index)
                        .arg(c.number)
                        .arg(QString::fromStdString(c.locator).toHtmlEscaped(), flag, muted, excerpt.toHtmlEscaped(), link);
        }
        html += QStringLiteral("</table>");
    }
    if (a.finished && !a.read_summary.empty())
        html += QStringLiteral("<p style='color:%1'><small>%2</small></p>")
                    .arg(muted, QObject::tr("Read: %1").arg(QString::fromStdString(a.read_summary)).toHtmlEscaped());
    if (a.finished && !a.method.empty())
        html += QStringLiteral("<p style='color:%1'><small>%2 · %3 · %4 context tokens</small></p>")
                    .arg(muted, QString::fromStdString(a.model).toHtmlEscaped(),
                         QString::fromStdString(a.method).toHtmlEscaped())
                    .arg(a.context_tokens);
    return html;
}

QString answer_plain_text(const Answer& a) {
    QString s = QString::fromStdString(a.text).trimmed();
    if (!a.citations.empty()) {
        s += QStringLiteral("\n\nSources:\n");
        for (const auto& c : a.citations) {
            s += QStringLiteral("[%1] %2").arg(c.number).arg(QString::fromStdString(c.locator));
            const QString t = time_text(c);
            if (!t.isEmpty() && !QString::fromStdString(c.locator).contains(t)) s += QStringLiteral(" at ") + t;
            if (c.weak) s += QStringLiteral(" (weak: %1)").arg(QString::fromStdString(c.weak_reason));
            s += QLatin1Char('\n');
        }
    }
    return s;
}

QString answer_markdown(const Answer& a) {
    QString md = QStringLiteral("## %1\n\n").arg(QString::fromStdString(a.question));
    md += QString::fromStdString(a.text).trimmed() + QStringLiteral("\n\n");
    if (!a.error.empty()) md += QStringLiteral("_Could not answer: %1_\n\n").arg(QString::fromStdString(a.error));
    for (const auto& c : a.citations) {
        md += QStringLiteral("%1. **%2**").arg(c.number).arg(QString::fromStdString(c.locator));
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
        if (c.weak) md += QStringLiteral(" — ⚠ weak: %1").arg(QString::fromStdString(c.weak_reason));
        QString excerpt = one_line(c.excerpt);
        if (excerpt.size() > 300) excerpt = excerpt.left(300) + QStringLiteral("…");
        md += QStringLiteral(" — %1\n").arg(excerpt);
    }
    if (!a.read_summary.empty()) md += QStringLiteral("\n_Read: %1._\n").arg(QString::fromStdString(a.read_summary));
    if (!a.method.empty()) md += QStringLiteral("\n_%1; model %2._\n").arg(QString::fromStdString(a.method), QString::fromStdString(a.model));
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
