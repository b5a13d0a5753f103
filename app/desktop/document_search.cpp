#include "app/desktop/document_search.h"

#include <QStringList>

#include <algorithm>

namespace sl::desktop {

std::vector<SearchHit> find_in_document(const doc::Document& d, const QString& query, size_t max_hits) {
    std::vector<SearchHit> hits;
    const QString q = query.trimmed();
    if (q.isEmpty()) return hits;
    auto scan = [&](int unit, const std::string& text, const doc::BBox& box) {
        const QString t = QString::fromStdString(text);
        for (qsizetype at = t.indexOf(q, 0, Qt::CaseInsensitive); at >= 0 && hits.size() < max_hits;
             at = t.indexOf(q, at + q.size(), Qt::CaseInsensitive))
            hits.push_back({unit, box, t});
    };
    for (const auto& u : d.units) {
        for (const auto& b : u.blocks) {
            if (hits.size() >= max_hits) return hits;
            if (!b.lines.empty()) {
                for (const auto& l : b.lines) scan(u.index, l.text, l.bbox);
            } else if (b.bbox) {
                scan(u.index, b.text, *b.bbox);
            } else {
                scan(u.index, b.text, doc::BBox{0, 0, 1, 1});
            }
        }
    }
    return hits;
}

}  // namespace sl::desktop

namespace sl::desktop {

namespace {

// Lower-case words (letters and digits) of `s`.
QStringList words_of(const QString& s) {
    QStringList out;
    QString cur;
    for (const QChar ch : s) {
        if (ch.isLetterOrNumber()) {
            cur += ch.toLower();
        } else if (!cur.isEmpty()) {
            out << cur;
            cur.clear();
        }
    }
    if (!cur.isEmpty()) out << cur;
    return out;
}

bool overlaps(const doc::BBox& a, const doc::BBox& b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// Whether the words of `line` appear, in order and adjacent, in `quote` (at least min(3, all)).
bool quoted(const QStringList& line, const QStringList& quote) {
    const int need = std::min<int>(3, static_cast<int>(line.size()));
    if (need == 0) return false;
    // The longest run of the line's words found consecutively in the quote.
    for (int start = 0; start + need <= line.size(); ++start) {
        for (int q = 0; q + need <= quote.size(); ++q) {
            int k = 0;
            while (k < need && line[start + k] == quote[q + k]) ++k;
            if (k == need) return true;
        }
    }
    return false;
}

}  // namespace

std::optional<doc::BBox> cited_lines(const doc::Unit& u, const doc::BBox& region, const std::string& snippet) {
    const QStringList quote = words_of(QString::fromStdString(snippet));
    if (quote.size() < 3) return std::nullopt;
    std::optional<doc::BBox> box;
    for (const auto& b : u.blocks) {
        if (b.bbox && !overlaps(*b.bbox, region)) continue;
        for (const auto& l : b.lines) {
            if (!overlaps(l.bbox, region) || !quoted(words_of(QString::fromStdString(l.text)), quote)) continue;
            if (!box) {
                box = l.bbox;
            } else {
                box->x0 = std::min(box->x0, l.bbox.x0);
                box->y0 = std::min(box->y0, l.bbox.y0);
                box->x1 = std::max(box->x1, l.bbox.x1);
                box->y1 = std::max(box->y1, l.bbox.y1);
            }
        }
    }
    return box;
}

}  // namespace sl::desktop
