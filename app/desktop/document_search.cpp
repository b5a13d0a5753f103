#include "app/desktop/document_search.h"

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
