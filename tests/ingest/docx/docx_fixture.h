// Hand-made DOCX packages for the tests and the fuzz seeds: a body of paragraphs (with a style),
// tables and footnote references, wrapped in the parts Word writes (content types, package and
// document relationships, optional styles and footnotes).
#pragma once

#include <QByteArray>

#include <map>
#include <string>
#include <vector>

#include "tests/ingest/slides/pptx_fixture.h"

namespace sl::test::docx {

using pptx::ZipItem;

inline const char* kW = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
inline const char* kR = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

// <w:p> with an optional style and runs; "\t" in text becomes <w:tab/>.
inline std::string para(const std::string& text, const std::string& style = {}) {
    std::string p = "<w:p>";
    if (!style.empty()) p += "<w:pPr><w:pStyle w:val=\"" + style + "\"/></w:pPr>";
    p += "<w:r><w:t xml:space=\"preserve\">" + text + "</w:t></w:r></w:p>";
    return p;
}

inline std::string table(const std::vector<std::vector<std::string>>& rows) {
    std::string t = "<w:tbl><w:tblPr/>";
    for (const auto& row : rows) {
        t += "<w:tr>";
        for (const auto& cell : row) t += "<w:tc><w:tcPr/>" + para(cell) + "</w:tc>";
        t += "</w:tr>";
    }
    return t + "</w:tbl>";
}

inline std::string document_xml(const std::string& body) {
    return std::string("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document xmlns:w=\"") + kW +
           "\" xmlns:r=\"" + kR +
           "\" xmlns:mc=\"http://schemas.openxmlformats.org/markup-compatibility/2006\"><w:body>" + body +
           "<w:sectPr/></w:body></w:document>";
}

inline std::string styles_xml() {
    auto style = [](const char* id, const char* name, int outline) {
        std::string s = std::string("<w:style w:type=\"paragraph\" w:styleId=\"") + id + "\"><w:name w:val=\"" +
                        name + "\"/>";
        if (outline >= 0) s += "<w:pPr><w:outlineLvl w:val=\"" + std::to_string(outline) + "\"/></w:pPr>";
        return s + "</w:style>";
    };
    return std::string("<?xml version=\"1.0\"?><w:styles xmlns:w=\"") + kW + "\">" + style("Titel", "Title", -1) +
           style("berschrift1", "heading 1", 0) + style("berschrift2", "heading 2", 1) +
           style("Kapitel", "Chapter", 0) +
           "<w:style w:type=\"paragraph\" w:styleId=\"Mine\"><w:name w:val=\"Mine\"/><w:basedOn "
           "w:val=\"berschrift2\"/></w:style></w:styles>";
}

inline std::string footnotes_xml(const std::map<int, std::string>& notes) {
    std::string s = std::string("<?xml version=\"1.0\"?><w:footnotes xmlns:w=\"") + kW +
                    "\"><w:footnote w:type=\"separator\" w:id=\"-1\"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>";
    for (const auto& [id, text] : notes)
        s += "<w:footnote w:id=\"" + std::to_string(id) + "\">" + para(text) + "</w:footnote>";
    return s + "</w:footnotes>";
}

inline std::string footnote_ref(int id) {
    return "<w:r><w:footnoteReference w:id=\"" + std::to_string(id) + "\"/></w:r>";
}

inline QByteArray q(const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); }

// A whole package. `footnotes` empty: no footnotes part. `first` = name of the first entry
// ("[Content_Types].xml" as Word writes it; "word/document.xml" to be sniffed).
inline QByteArray make_docx(const std::string& body, const std::map<int, std::string>& footnotes = {},
                            bool with_styles = true, bool document_first = false) {
    const std::string types =
        "<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">"
        "<Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>"
        "<Default Extension=\"xml\" ContentType=\"application/xml\"/>"
        "<Override PartName=\"/word/document.xml\" "
        "ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>";
    const std::string pkg_rels =
        std::string("<?xml version=\"1.0\"?><Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/"
                    "relationships\"><Relationship Id=\"rId1\" Type=\"") +
        kR + "/officeDocument\" Target=\"word/document.xml\"/></Relationships>";
    std::string doc_rels = "<?xml version=\"1.0\"?><Relationships "
                           "xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">";
    if (with_styles) doc_rels += std::string("<Relationship Id=\"rId1\" Type=\"") + kR + "/styles\" Target=\"styles.xml\"/>";
    if (!footnotes.empty())
        doc_rels += std::string("<Relationship Id=\"rId2\" Type=\"") + kR + "/footnotes\" Target=\"footnotes.xml\"/>";
    doc_rels += "</Relationships>";
    std::vector<ZipItem> items;
    if (document_first) items.emplace_back("word/document.xml", q(document_xml(body)));
    items.emplace_back("[Content_Types].xml", q(types));
    items.emplace_back("_rels/.rels", q(pkg_rels));
    if (!document_first) items.emplace_back("word/document.xml", q(document_xml(body)));
    items.emplace_back("word/_rels/document.xml.rels", q(doc_rels));
    if (with_styles) items.emplace_back("word/styles.xml", q(styles_xml()));
    if (!footnotes.empty()) items.emplace_back("word/footnotes.xml", q(footnotes_xml(footnotes)));
    return pptx::make_zip(items);
}

}  // namespace sl::test::docx
