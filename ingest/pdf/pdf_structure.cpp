#include "ingest/pdf/pdf_structure.h"

#include <QDateTime>

#include <algorithm>
#include <cmath>

#include "ingest/qt_file_path.h"

namespace sl::ingest {

namespace {

std::string key_for(const QString& info_key) {
    if (info_key == QLatin1String("CreationDate")) return "created";
    if (info_key == QLatin1String("ModDate")) return "modified";
    return info_key.toLower().toStdString();
}

void walk_outline(const QVector<Poppler::OutlineItem>& items, int level, int page_count,
                  std::vector<doc::OutlineEntry>& out) {
    if (level >= kMaxOutlineDepth) return;
    for (const Poppler::OutlineItem& item : items) {
        if (out.size() >= kMaxOutlineEntries) return;
        if (item.isNull()) continue;
        doc::OutlineEntry e;
        e.title = item.name().simplified().toStdString();
        e.level = level;
        if (item.externalFileName().isEmpty()) {
            if (const auto dest = item.destination()) {
                const int p = dest->pageNumber() - 1;  // Poppler counts from 1
                if (p >= 0 && p < page_count) e.unit = p;
            }
        }
        out.push_back(std::move(e));
        if (item.hasChildren()) walk_outline(item.children(), level + 1, page_count, out);
    }
}

doc::BBox clamp_area(const QRectF& r) {
    auto c = [](double v) {
        return static_cast<float>(std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0);
    };
    const QRectF n = r.normalized();
    return {c(n.left()), c(n.top()), c(n.right()), c(n.bottom())};
}

}  // namespace

void read_pdf_metadata(const Poppler::Document& pdf, const std::string& path, doc::Document& d) {
    const QStringList keys = pdf.infoKeys();
    for (const QString& k : keys) {
        std::string value;
        if (k == QLatin1String("CreationDate") || k == QLatin1String("ModDate")) {
            const QDateTime t = pdf.date(k);
            if (t.isValid()) value = t.toUTC().toString(Qt::ISODate).toStdString();
        } else {
            value = pdf.info(k).simplified().toStdString();
        }
        if (!value.empty()) d.metadata[key_for(k)] = std::move(value);
    }
    const Poppler::Document::PdfVersion v = pdf.getPdfVersion();
    d.metadata["pdf_version"] = std::to_string(v.major) + "." + std::to_string(v.minor);
    d.metadata["pages"] = std::to_string(pdf.numPages());
    const auto title = d.metadata.find("title");
    d.title = title != d.metadata.end()
                  ? title->second
                  : file_name_of(path);
}

std::vector<doc::OutlineEntry> read_pdf_outline(const Poppler::Document& pdf) {
    std::vector<doc::OutlineEntry> out;
    walk_outline(pdf.outline(), 0, pdf.numPages(), out);
    return out;
}

void append_page_links(const Poppler::Page& page, int unit, int page_count,
                       std::vector<doc::Link>& out) {
    for (const std::unique_ptr<Poppler::Link>& link : page.links()) {
        if (!link) continue;
        doc::Link l;
        l.unit = unit;
        l.bbox = clamp_area(link->linkArea());
        if (link->linkType() == Poppler::Link::Goto) {
            const auto& go = static_cast<const Poppler::LinkGoto&>(*link);
            if (go.isExternal()) continue;
            const int p = go.destination().pageNumber() - 1;
            if (p < 0 || p >= page_count) continue;
            l.target_unit = p;
        } else if (link->linkType() == Poppler::Link::Browse) {
            l.uri = static_cast<const Poppler::LinkBrowse&>(*link).url().toStdString();
            if (l.uri.empty()) continue;
        } else {
            continue;
        }
        out.push_back(std::move(l));
    }
}

}  // namespace sl::ingest
