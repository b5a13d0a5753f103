#include "ingest/slides/ooxml_props.h"

#include <QXmlStreamReader>

#include "ingest/ingest_error.h"
#include "ingest/slides/ooxml_xml.h"

namespace sl::ingest::ooxml {

namespace {

// Reads `part` when present; nullopt-like empty array when absent or damaged (not a bomb).
QByteArray optional_part(ZipArchive& zip, const std::string& part) {
    if (!zip.contains(part)) return {};
    try {
        return zip.read(part, kMaxXmlPartBytes);
    } catch (const IngestError& e) {
        if (e.kind() == IngestErrorKind::Corrupt) return {};
        throw;
    }
}

std::string trimmed(const QString& s) {
    return s.trimmed().toStdString();
}

}  // namespace

DocumentProperties read_document_properties(ZipArchive& zip) {
    DocumentProperties props;
    static const char* const kCore[][2] = {
        {"creator", "creator"},        {"lastModifiedBy", "lastModifiedBy"},
        {"created", "created"},        {"modified", "modified"},
        {"subject", "subject"},        {"keywords", "keywords"},
        {"description", "description"}};
    std::map<std::string, std::string> found;
    const QByteArray core = optional_part(zip, "docProps/core.xml");
    if (!core.isEmpty()) {
        QXmlStreamReader x(core);
        std::string title;
        while (!x.atEnd()) {
            if (x.readNext() != QXmlStreamReader::StartElement) continue;
            if (is(x, QLatin1String("title"))) {
                title = trimmed(x.readElementText(QXmlStreamReader::SkipChildElements));
                continue;
            }
            for (const auto& [element, key] : kCore) {
                if (x.name() != QLatin1String(element)) continue;
                std::string v = trimmed(x.readElementText(QXmlStreamReader::SkipChildElements));
                if (!v.empty()) found[key] = std::move(v);
                break;
            }
        }
        if (!x.hasError()) {
            props.title = std::move(title);
            props.metadata = std::move(found);
        }
    }
    const QByteArray app = optional_part(zip, "docProps/app.xml");
    if (!app.isEmpty()) {
        QXmlStreamReader x(app);
        std::string application;
        if (find_element(x, QLatin1String("Application")))
            application = trimmed(x.readElementText(QXmlStreamReader::SkipChildElements));
        while (!x.atEnd()) x.readNext();
        if (!x.hasError() && !application.empty()) props.metadata["application"] = application;
    }
    return props;
}

}  // namespace sl::ingest::ooxml
