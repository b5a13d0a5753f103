// Minimal PPTX decks and zip archives written from scratch for the slide-reader tests, the bench
// and the fuzz seeds. Header-only, Qt Core only (deflate through qCompress), deterministic bytes.
//
// A deck has one slide master (title placeholder at kMasterTitle, body at kMasterBody) and one
// layout (title without a position: inherits the master's; body idx 1 at kLayoutBody).
#pragma once

#include <QByteArray>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sl::test::pptx {

// ---- zip ----------------------------------------------------------------------------------------

inline uint32_t crc32(const char* p, size_t n, uint32_t crc = 0) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    crc = ~crc;
    for (size_t i = 0; i < n; ++i)
        crc = table[(crc ^ static_cast<uint8_t>(p[i])) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

// Raw deflate (RFC 1951): qCompress gives a 4-byte length + zlib header (2) ... adler32 (4).
inline QByteArray raw_deflate(const QByteArray& data) {
    const QByteArray z = qCompress(data, 9);
    return z.mid(6, z.size() - 10);
}

struct ZipItem {
    ZipItem() = default;
    ZipItem(std::string n, QByteArray d, bool compress = true)
        : name(std::move(n)), data(std::move(d)), deflate(compress) {}

    std::string name;
    QByteArray data;  // the content (ignored when `raw` is set)
    bool deflate = true;
    // Hand-made entries (bombs, lying headers): compressed bytes and the header's claims.
    std::optional<QByteArray> raw;  // deflated bytes as stored
    uint32_t crc = 0;
    uint64_t size = 0;  // uncompressed size the headers claim
};

namespace detail {
inline void u16(QByteArray& b, uint32_t v) {
    b.append(static_cast<char>(v & 0xFF)).append(static_cast<char>((v >> 8) & 0xFF));
}
inline void u32(QByteArray& b, uint32_t v) {
    u16(b, v & 0xFFFF);
    u16(b, v >> 16);
}
}  // namespace detail

// A zip archive (no zip64) with the items in order.
inline QByteArray make_zip(const std::vector<ZipItem>& items) {
    using detail::u16;
    using detail::u32;
    QByteArray out, central;
    for (const ZipItem& it : items) {
        const bool raw = it.raw.has_value();
        const bool deflate = raw || it.deflate;
        const QByteArray stored = raw ? *it.raw : (deflate ? raw_deflate(it.data) : it.data);
        const uint32_t crc =
            raw ? it.crc : crc32(it.data.constData(), static_cast<size_t>(it.data.size()));
        const auto size =
            static_cast<uint32_t>(raw ? it.size : static_cast<uint64_t>(it.data.size()));
        const auto offset = static_cast<uint32_t>(out.size());
        auto header = [&](QByteArray& b, bool local) {
            u32(b, local ? 0x04034b50u : 0x02014b50u);
            if (!local) u16(b, 20);
            u16(b, 20);
            u16(b, 0x0800);  // UTF-8 names
            u16(b, deflate ? 8 : 0);
            u16(b, 0);
            u16(b, 0x21);
            u32(b, crc);
            u32(b, static_cast<uint32_t>(stored.size()));
            u32(b, size);
            u16(b, static_cast<uint32_t>(it.name.size()));
            u16(b, 0);
            if (!local) {
                u16(b, 0);
                u16(b, 0);
                u16(b, 0);
                u32(b, 0);
                u32(b, offset);
            }
            b.append(it.name.data(), static_cast<qsizetype>(it.name.size()));
        };
        header(out, true);
        out.append(stored);
        header(central, false);
    }
    const auto cd_offset = static_cast<uint32_t>(out.size());
    out.append(central);
    u32(out, 0x06054b50u);
    u16(out, 0);
    u16(out, 0);
    u16(out, static_cast<uint32_t>(items.size()));
    u16(out, static_cast<uint32_t>(items.size()));
    u32(out, static_cast<uint32_t>(central.size()));
    u32(out, cd_offset);
    u16(out, 0);
    return out;
}

// ---- PresentationML -----------------------------------------------------------------------------

constexpr int64_t kSlideCx = 12192000, kSlideCy = 6858000;  // 16:9, 960 x 540 pt
struct Emu {
    int64_t x, y, cx, cy;
};
constexpr Emu kMasterTitle{838200, 365125, 10515600, 1325563};
constexpr Emu kMasterBody{838200, 1825625, 10515600, 4351338};
constexpr Emu kLayoutBody{609600, 2000000, 5000000, 3000000};

inline const char* kNs =
    R"( xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main")"
    R"( xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships")"
    R"( xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main")";
inline const char* kRelNs = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/";

inline std::string xfrm(const Emu& e, const char* prefix = "a") {
    return std::string("<") + prefix + ":xfrm><a:off x=\"" + std::to_string(e.x) + "\" y=\"" +
           std::to_string(e.y) + "\"/><a:ext cx=\"" + std::to_string(e.cx) + "\" cy=\"" +
           std::to_string(e.cy) + "\"/></" + prefix + ":xfrm>";
}

// A text body from paragraphs: each paragraph is one run (use <a:br/> inside via br_para).
inline std::string paragraphs(const std::vector<std::string>& paras) {
    std::string s;
    for (const auto& p : paras)
        s += "<a:p><a:r><a:rPr lang=\"en-US\"/><a:t>" + p + "</a:t></a:r></a:p>";
    return s;
}

// p:sp with an optional placeholder (`ph` is the p:ph element or ""), an optional position and a
// text body made of `body` (a:p elements).
inline std::string sp(int id, const std::string& ph, const std::optional<Emu>& pos,
                      const std::string& body) {
    return "<p:sp><p:nvSpPr><p:cNvPr id=\"" + std::to_string(id) + "\" name=\"Shape " +
           std::to_string(id) + "\"/><p:cNvSpPr/><p:nvPr>" + ph + "</p:nvPr></p:nvSpPr><p:spPr>" +
           (pos ? xfrm(*pos) : std::string()) + "</p:spPr><p:txBody><a:bodyPr/><a:lstStyle/>" +
           body + "</p:txBody></p:sp>";
}

inline std::string pic(int id, const std::string& rid, const Emu& pos) {
    return "<p:pic><p:nvPicPr><p:cNvPr id=\"" + std::to_string(id) +
           "\" name=\"Picture\"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed=\"" +
           rid + "\"/><a:stretch><a:fillRect/></a:stretch></p:blipFill><p:spPr>" + xfrm(pos) +
           "<a:prstGeom prst=\"rect\"><a:avLst/></a:prstGeom></p:spPr></p:pic>";
}

// p:grpSp with its transform (off/ext in the parent, chOff/chExt for the children).
inline std::string group(const Emu& off_ext, const Emu& ch, const std::string& children) {
    return "<p:grpSp><p:nvGrpSpPr><p:cNvPr id=\"90\" name=\"Group\"/><p:cNvGrpSpPr/><p:nvPr/>"
           "</p:nvGrpSpPr><p:grpSpPr><a:xfrm><a:off x=\"" +
           std::to_string(off_ext.x) + "\" y=\"" + std::to_string(off_ext.y) + "\"/><a:ext cx=\"" +
           std::to_string(off_ext.cx) + "\" cy=\"" + std::to_string(off_ext.cy) +
           "\"/><a:chOff x=\"" + std::to_string(ch.x) + "\" y=\"" + std::to_string(ch.y) +
           "\"/><a:chExt cx=\"" + std::to_string(ch.cx) + "\" cy=\"" + std::to_string(ch.cy) +
           "\"/></a:xfrm></p:grpSpPr>" + children + "</p:grpSp>";
}

// A table frame: `rows` of cell texts, column widths and row heights in EMU.
inline std::string table(const Emu& pos, const std::vector<int64_t>& widths,
                         const std::vector<int64_t>& heights,
                         const std::vector<std::vector<std::string>>& rows) {
    std::string s =
        "<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id=\"50\" name=\"Table\"/>"
        "<p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr>" +
        xfrm(pos, "p") +
        "<a:graphic><a:graphicData uri=\"http://schemas.openxmlformats.org/drawingml/"
        "2006/table\"><a:tbl><a:tblPr/><a:tblGrid>";
    for (const auto w : widths) s += "<a:gridCol w=\"" + std::to_string(w) + "\"/>";
    s += "</a:tblGrid>";
    for (size_t r = 0; r < rows.size(); ++r) {
        s += "<a:tr h=\"" + std::to_string(heights[r]) + "\">";
        for (const auto& cell : rows[r])
            s += "<a:tc><a:txBody><a:bodyPr/><a:lstStyle/>" + paragraphs({cell}) +
                 "</a:txBody><a:tcPr/></a:tc>";
        s += "</a:tr>";
    }
    return s + "</a:tbl></a:graphicData></a:graphic></p:graphicFrame>";
}

inline std::string shape_tree_part(const char* root, const std::string& shapes,
                                   const std::string& tail = "") {
    return std::string("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<p:") +
           root + kNs +
           "><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id=\"1\" name=\"\"/>"
           "<p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>" +
           shapes + "</p:spTree></p:cSld>" + tail + "</p:" + root + ">";
}

inline std::string rels(const std::vector<std::array<std::string, 3>>& id_type_target) {
    std::string s =
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships "
        "xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">";
    for (const auto& [id, type, target] : id_type_target)
        s += "<Relationship Id=\"" + id + "\" Type=\"" + kRelNs + type + "\" Target=\"" + target +
             "\"/>";
    return s + "</Relationships>";
}

struct TestSlide {
    std::string shapes;                             // p:spTree children
    std::string notes;                              // notes text ("" for none)
    std::string file;                               // "slideN.xml" (default: by position)
    std::vector<std::array<std::string, 2>> media;  // (rId, target relative to the slide)
};

struct TestDeck {
    std::vector<TestSlide> slides;
    std::vector<int> order;           // sldIdLst order as indices into slides (default: as is)
    std::string title = "Test deck";  // dc:title ("" for none)
    bool core_props = true;
    std::string sld_sz = "<p:sldSz cx=\"12192000\" cy=\"6858000\"/>";
    std::vector<ZipItem> extra;  // more entries (media, hostile names)
    bool presentation = true;    // write ppt/presentation.xml
};

inline QByteArray q(const std::string& s) {
    return QByteArray::fromStdString(s);
}

inline std::vector<ZipItem> deck_items(const TestDeck& deck) {
    std::vector<ZipItem> z;
    z.push_back({"[Content_Types].xml",
                 q("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Types xmlns="
                   "\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default "
                   "Extension=\"xml\" ContentType=\"application/xml\"/></Types>")});
    z.push_back({"_rels/.rels", q(rels({{"rId1", "officeDocument", "ppt/presentation.xml"},
                                        {"rId2", "metadata/core-properties", "docProps/core.xml"},
                                        {"rId3", "extended-properties", "docProps/app.xml"}}))});
    if (deck.core_props) {
        z.push_back(
            {"docProps/core.xml",
             q("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<cp:coreProperties "
               "xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/"
               "core-properties\" "
               "xmlns:dc=\"http://purl.org/dc/elements/1.1/\" "
               "xmlns:dcterms=\"http://purl.org/dc/terms/\">"
               "<dc:title>" +
               deck.title +
               "</dc:title><dc:creator>Ada Lovelace</dc:creator>"
               "<cp:lastModifiedBy>Charles Babbage</cp:lastModifiedBy>"
               "<dcterms:created>2024-01-02T03:04:05Z</dcterms:created>"
               "<dcterms:modified>2024-02-03T04:05:06Z</dcterms:modified></cp:coreProperties>")});
        z.push_back(
            {"docProps/app.xml",
             q("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Properties xmlns="
               "\"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties\">"
               "<Application>Sightline tests</Application></Properties>")});
    }
    std::vector<int> order = deck.order;
    if (order.empty())
        for (int i = 0; i < static_cast<int>(deck.slides.size()); ++i) order.push_back(i);
    auto file_of = [&](int i) {
        const auto& f = deck.slides[static_cast<size_t>(i)].file;
        return f.empty() ? "slide" + std::to_string(i + 1) + ".xml" : f;
    };
    std::string ids;
    std::vector<std::array<std::string, 3>> prels = {
        {"rId1", "slideMaster", "slideMasters/slideMaster1.xml"}};
    for (size_t k = 0; k < order.size(); ++k) {
        // rIds deliberately not in slide order: rId(100 - k).
        const std::string rid = "rId" + std::to_string(100 - k);
        ids += "<p:sldId id=\"" + std::to_string(256 + k) + "\" r:id=\"" + rid + "\"/>";
        prels.push_back({rid, "slide", "slides/" + file_of(order[k])});
    }
    if (deck.presentation)
        z.push_back({"ppt/presentation.xml",
                     q(std::string("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n"
                                   "<p:presentation") +
                       kNs +
                       "><p:sldMasterIdLst><p:sldMasterId id=\"2147483648\" r:id=\"rId1\"/>"
                       "</p:sldMasterIdLst><p:sldIdLst>" +
                       ids + "</p:sldIdLst>" + deck.sld_sz +
                       "<p:notesSz cx=\"6858000\" cy=\"9144000\"/></p:presentation>")});
    z.push_back({"ppt/_rels/presentation.xml.rels", q(rels(prels))});
    z.push_back(
        {"ppt/slideMasters/slideMaster1.xml",
         q(shape_tree_part("sldMaster", sp(2, "<p:ph type=\"title\"/>", kMasterTitle,
                                           paragraphs({"Click to edit Master title style"})) +
                                            sp(3, "<p:ph type=\"body\" idx=\"1\"/>", kMasterBody,
                                               paragraphs({"Master text"}))))});
    z.push_back({"ppt/slideMasters/_rels/slideMaster1.xml.rels",
                 q(rels({{"rId1", "slideLayout", "../slideLayouts/slideLayout1.xml"}}))});
    z.push_back({"ppt/slideLayouts/slideLayout1.xml",
                 q(shape_tree_part(
                     "sldLayout",
                     sp(2, "<p:ph type=\"title\"/>", std::nullopt, paragraphs({"Layout title"})) +
                         sp(3, "<p:ph idx=\"1\"/>", kLayoutBody, paragraphs({"Layout body"}))))});
    z.push_back({"ppt/slideLayouts/_rels/slideLayout1.xml.rels",
                 q(rels({{"rId1", "slideMaster", "../slideMasters/slideMaster1.xml"}}))});
    for (size_t i = 0; i < deck.slides.size(); ++i) {
        const TestSlide& s = deck.slides[i];
        const std::string file = file_of(static_cast<int>(i));
        std::vector<std::array<std::string, 3>> srels = {
            {"rId1", "slideLayout", "../slideLayouts/slideLayout1.xml"}};
        for (const auto& [rid, target] : s.media) srels.push_back({rid, "image", target});
        if (!s.notes.empty()) {
            const std::string notes = "notesSlide" + std::to_string(i + 1) + ".xml";
            srels.push_back({"rId9", "notesSlide", "../notesSlides/" + notes});
            z.push_back(
                {"ppt/notesSlides/" + notes,
                 q(shape_tree_part("notes",
                                   sp(2, "<p:ph type=\"sldImg\"/>", std::nullopt, "") +
                                       sp(3, "<p:ph type=\"body\" idx=\"1\"/>", std::nullopt,
                                          paragraphs({s.notes})) +
                                       sp(4, "<p:ph type=\"sldNum\" idx=\"10\"/>", std::nullopt,
                                          "<a:p><a:fld id=\"{1}\" type=\"slidenum\"><a:t>" +
                                              std::to_string(i + 1) + "</a:t></a:fld></a:p>")))});
        }
        z.push_back({"ppt/slides/" + file, q(shape_tree_part("sld", s.shapes))});
        z.push_back({"ppt/slides/_rels/" + file + ".rels", q(rels(srels))});
    }
    for (const auto& e : deck.extra) z.push_back(e);
    return z;
}

inline QByteArray make_deck(const TestDeck& deck) {
    return make_zip(deck_items(deck));
}

// A title + body slide.
inline TestSlide title_body_slide(const std::string& title, const std::vector<std::string>& body,
                                  const std::string& notes = "") {
    TestSlide s;
    s.shapes = sp(2, "<p:ph type=\"title\"/>", std::nullopt, paragraphs({title})) +
               sp(3, "<p:ph idx=\"1\"/>", std::nullopt, paragraphs(body));
    s.notes = notes;
    return s;
}

}  // namespace sl::test::pptx
