#include "ingest/slides/ooxml_xml.h"

#include "ingest/ingest_error.h"

namespace sl::ingest::ooxml {

QStringView attr(const QXmlStreamReader& x, QLatin1String local) {
    for (const QXmlStreamAttribute& a : x.attributes())
        if (a.namespaceUri().isEmpty() && a.name() == local) return a.value();
    return {};
}

QStringView rel_attr(const QXmlStreamReader& x, QLatin1String local) {
    for (const QXmlStreamAttribute& a : x.attributes())
        if (a.name() == local && a.namespaceUri().contains(QLatin1String("relationships")))
            return a.value();
    return {};
}

std::optional<int64_t> attr_int(const QXmlStreamReader& x, QLatin1String local) {
    const QStringView v = attr(x, local);
    if (v.isEmpty()) return std::nullopt;
    bool ok = false;
    const qlonglong n = v.trimmed().toLongLong(&ok);
    if (!ok) return std::nullopt;
    return static_cast<int64_t>(n);
}

bool find_element(QXmlStreamReader& x, QLatin1String local) {
    while (!x.atEnd()) {
        if (x.readNext() == QXmlStreamReader::StartElement && x.name() == local) return true;
    }
    return false;
}

std::string element_text(QXmlStreamReader& x) {
    return x.readElementText(QXmlStreamReader::SkipChildElements).toStdString();
}

void check(const QXmlStreamReader& x, const std::string& path, const std::string& part) {
    if (!x.hasError()) return;
    throw IngestError(IngestErrorKind::Corrupt, path,
                      part + ": malformed XML at line " + std::to_string(x.lineNumber()) +
                          ", column " + std::to_string(x.columnNumber()) + ": " +
                          x.errorString().toStdString());
}

}  // namespace sl::ingest::ooxml
