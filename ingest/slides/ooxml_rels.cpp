#include "ingest/slides/ooxml_rels.h"

#include <QUrl>
#include <QXmlStreamReader>

#include <vector>

#include "ingest/slides/ooxml_xml.h"

namespace sl::ingest::ooxml {

std::string rels_part_for(const std::string& part) {
    const size_t slash = part.rfind('/');
    if (slash == std::string::npos) return "_rels/" + part + ".rels";
    return part.substr(0, slash + 1) + "_rels/" + part.substr(slash + 1) + ".rels";
}

std::string resolve_target(const std::string& source_part, const std::string& target) {
    if (target.empty()) return {};
    const std::string decoded =
        QUrl::fromPercentEncoding(QByteArray::fromStdString(target)).toStdString();
    std::string joined;
    if (decoded.front() == '/') {
        joined = decoded.substr(1);
    } else {
        const size_t slash = source_part.rfind('/');
        joined = (slash == std::string::npos ? std::string() : source_part.substr(0, slash + 1)) +
                 decoded;
    }
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= joined.size()) {
        size_t next = joined.find('/', pos);
        if (next == std::string::npos) next = joined.size();
        const std::string seg = joined.substr(pos, next - pos);
        if (seg == "..") {
            if (parts.empty()) return {};  // leaves the package
            parts.pop_back();
        } else if (!seg.empty() && seg != ".") {
            parts.push_back(seg);
        }
        pos = next + 1;
    }
    std::string out;
    for (const auto& p : parts) {
        if (!out.empty()) out += '/';
        out += p;
    }
    return out;
}

Relationships parse_relationships(const QByteArray& xml, const std::string& source_part,
                                  const std::string& path) {
    Relationships rels;
    QXmlStreamReader x(xml);
    while (find_element(x, QLatin1String("Relationship"))) {
        if (attr(x, QLatin1String("TargetMode")) == QLatin1String("External")) continue;
        const std::string id = attr(x, QLatin1String("Id")).toString().toStdString();
        const QStringView type = attr(x, QLatin1String("Type"));
        const std::string target =
            resolve_target(source_part, attr(x, QLatin1String("Target")).toString().toStdString());
        if (id.empty() || target.empty()) continue;
        const qsizetype slash = type.lastIndexOf(QLatin1Char('/'));
        rels.emplace(id, Relationship{type.mid(slash + 1).toString().toStdString(), target});
    }
    check(x, path, rels_part_for(source_part));
    return rels;
}

const Relationship* first_of_type(const Relationships& rels, const std::string& type) {
    for (const auto& [id, rel] : rels)
        if (rel.type == type) return &rel;
    return nullptr;
}

}  // namespace sl::ingest::ooxml
