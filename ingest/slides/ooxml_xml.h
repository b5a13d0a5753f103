// Small helpers over QXmlStreamReader for the XML parts of OOXML packages (PPTX). Elements are
// matched by local name in any namespace, so both Transitional and Strict OOXML read the same;
// relationship attributes (r:id, r:embed) are matched as attributes in a namespace that names
// relationships.
//
// Threading: plain functions over a reader the caller owns; no shared state.
#pragma once

#include <QByteArray>
#include <QLatin1String>
#include <QStringView>
#include <QXmlStreamReader>

#include <cstdint>
#include <optional>
#include <string>

namespace sl::ingest::ooxml {

// Largest XML part we inflate into memory (a slide, layout, master, rels, docProps...).
constexpr int64_t kMaxXmlPartBytes = int64_t{32} << 20;

inline bool is(const QXmlStreamReader& x, QLatin1String local) {
    return x.name() == local;
}

// An attribute without a namespace (`x="..."`), empty when absent.
QStringView attr(const QXmlStreamReader& x, QLatin1String local);

// A relationship-id attribute such as r:id or r:embed, empty when absent.
QStringView rel_attr(const QXmlStreamReader& x, QLatin1String local);

// An integer attribute, nullopt when absent or not an integer.
std::optional<int64_t> attr_int(const QXmlStreamReader& x, QLatin1String local);

// Moves to the first start element named `local` anywhere in the document; false at the end.
bool find_element(QXmlStreamReader& x, QLatin1String local);

// The text of the current element, child elements skipped, as UTF-8.
std::string element_text(QXmlStreamReader& x);

// Throws IngestError(Corrupt) naming the file, the part and the line when `x` has an error.
void check(const QXmlStreamReader& x, const std::string& path, const std::string& part);

}  // namespace sl::ingest::ooxml
