// Hand-made EPUB books for the tests and the fuzz seeds: the OCF layout (an uncompressed
// "mimetype" first, META-INF/container.xml, an OPF package with manifest and spine) and XHTML
// chapters.
#pragma once

#include <QByteArray>

#include <string>
#include <utility>
#include <vector>

#include "tests/ingest/slides/pptx_fixture.h"

namespace sl::test::epub {

using pptx::ZipItem;

inline QByteArray q(const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); }

inline std::string xhtml(const std::string& title, const std::string& body) {
    return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\">"
           "<head><title>" + title + "</title><style>p { color: red; }</style></head><body>" + body +
           "</body></html>";
}

// chapters: (file name under OEBPS/, xhtml); spine: indexes into chapters, in reading order.
inline QByteArray make_epub(const std::string& title, const std::vector<std::pair<std::string, std::string>>& chapters,
                            const std::vector<size_t>& spine, std::vector<ZipItem> extra = {}) {
    std::string opf =
        "<?xml version=\"1.0\"?><package xmlns=\"http://www.idpf.org/2007/opf\" version=\"3.0\" "
        "unique-identifier=\"id\"><metadata xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:identifier "
        "id=\"id\">x</dc:identifier><dc:title>" + title + "</dc:title><dc:creator>A. Writer</dc:creator>"
        "<dc:language>en</dc:language></metadata><manifest>";
    for (size_t i = 0; i < chapters.size(); ++i)
        opf += "<item id=\"c" + std::to_string(i) + "\" href=\"text/" + chapters[i].first +
               "\" media-type=\"application/xhtml+xml\"/>";
    opf += "</manifest><spine>";
    for (const size_t i : spine) opf += "<itemref idref=\"c" + std::to_string(i) + "\"/>";
    opf += "</spine></package>";
    std::vector<ZipItem> items;
    items.emplace_back("mimetype", QByteArray("application/epub+zip"), false);
    items.emplace_back("META-INF/container.xml",
                       q("<?xml version=\"1.0\"?><container version=\"1.0\" "
                         "xmlns=\"urn:oasis:names:tc:opendocument:xmlns:container\"><rootfiles><rootfile "
                         "full-path=\"OEBPS/content.opf\" media-type=\"application/oebps-package+xml\"/>"
                         "</rootfiles></container>"));
    items.emplace_back("OEBPS/content.opf", q(opf));
    for (const auto& [name, body] : chapters) items.emplace_back("OEBPS/text/" + name, q(body));
    for (auto& e : extra) items.push_back(std::move(e));
    return pptx::make_zip(items);
}

}  // namespace sl::test::epub
