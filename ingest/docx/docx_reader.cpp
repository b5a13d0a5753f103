#include "ingest/docx/docx_reader.h"

#include <QXmlStreamReader>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "core/util/error.h"
#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/slides/ooxml_props.h"
#include "ingest/slides/ooxml_rels.h"
#include "ingest/slides/ooxml_xml.h"
#include "ingest/slides/zip_archive.h"
#include "ingest/text/text_sections.h"

namespace sl::ingest {

namespace {

using L = QLatin1String;
constexpr std::array<uint8_t, 8> kOleMagic = {0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1};

// An OLE compound file where a DOCX should be: an encrypted DOCX (it holds "EncryptionInfo" in
// UTF-16) or a Word 97-2003 .doc.
void check_ole(std::string_view head_or_all, const std::string& path, bool whole) {
    if (head_or_all.size() < kOleMagic.size() ||
        !std::equal(kOleMagic.begin(), kOleMagic.end(), reinterpret_cast<const uint8_t*>(head_or_all.data())))
        return;
    static const std::string needle = [] {
        std::string s;
        for (const char c : std::string_view("EncryptionInfo")) s += c, s += '\0';
        return s;
    }();
    if (whole && head_or_all.find(needle) != std::string_view::npos)
        throw IngestError(IngestErrorKind::Encrypted, path, "the document is encrypted and needs a password");
    throw IngestError(IngestErrorKind::Unsupported, path,
                      "an OLE compound file (an encrypted DOCX, or a Word 97-2003 .doc), not a DOCX document; "
                      "save it as .docx without a password");
}

void check_ole_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw IngestError(IngestErrorKind::Io, path, "cannot open the file");
    std::string head(8, '\0');
    f.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(f.gcount()));
    if (head.size() < 8 || !std::equal(kOleMagic.begin(), kOleMagic.end(), reinterpret_cast<const uint8_t*>(head.data())))
        return;
    // Small files are scanned whole for the encryption stream; an OLE file is never a DOCX anyway.
    std::string all = head;
    std::vector<char> chunk(1 << 20);
    while (all.size() < (size_t{64} << 20) && f.read(chunk.data(), static_cast<std::streamsize>(chunk.size())).gcount() > 0)
        all.append(chunk.data(), static_cast<size_t>(f.gcount()));
    check_ole(all, path, true);
}

struct Style {
    std::string name;     // w:name, lowercase
    std::string based_on; // w:basedOn
    int outline = -1;     // w:outlineLvl (0-based), -1 when none
};

// The heading level (1-based) a paragraph style gives, 0 for none; follows w:basedOn (bounded).
int style_level(const std::map<std::string, Style>& styles, std::string id) {
    for (int hop = 0; hop < 8 && !id.empty(); ++hop) {
        const auto it = styles.find(id);
        if (it == styles.end()) break;
        const Style& s = it->second;
        if (s.name == "title") return 1;
        if (s.name.rfind("heading ", 0) == 0 && s.name.size() == 9 && s.name[8] >= '1' && s.name[8] <= '9')
            return s.name[8] - '0';
        if (s.outline >= 0 && s.outline < 9) return s.outline + 1;
        id = s.based_on;
    }
    // Documents without styles.xml still name their styles "Heading1", "Title".
    if (id == "Title") return 1;
    if (id.size() == 8 && id.rfind("Heading", 0) == 0 && id[7] >= '1' && id[7] <= '9') return id[7] - '0';
    return 0;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
}

// One read of one document; `zip` and `ctx` must outlive it. Single-threaded.
class WordReader {
public:
    WordReader(ZipArchive& zip, const std::string& path, IngestContext& ctx) : zip_(zip), path_(path), ctx_(ctx) {}

    doc::Document read() {
        ctx_.progress(0.0, "reading the document");
        const std::string main = main_part();
        if (!zip_.contains(main))
            throw IngestError(IngestErrorKind::Corrupt, path_, "not a Word document: " + main + " is missing");
        ooxml::Relationships rels;
        if (zip_.contains(ooxml::rels_part_for(main)))
            rels = ooxml::parse_relationships(part(ooxml::rels_part_for(main)), main, path_);
        if (const auto* s = ooxml::first_of_type(rels, "styles"); s && zip_.contains(s->target)) read_styles(s->target);
        else if (zip_.contains("word/styles.xml")) read_styles("word/styles.xml");
        if (const auto* f = ooxml::first_of_type(rels, "footnotes"); f && zip_.contains(f->target))
            read_notes(f->target, L("footnote"), footnotes_);
        if (const auto* e = ooxml::first_of_type(rels, "endnotes"); e && zip_.contains(e->target))
            read_notes(e->target, L("endnote"), endnotes_);

        doc::Document d;
        d.kind = doc::DocumentKind::Text;
        d.path = path_;
        const ooxml::DocumentProperties props = ooxml::read_document_properties(zip_);
        d.metadata = props.metadata;
        d.metadata["format"] = "docx";
        body(main);
        if (static_cast<int64_t>(sections_.count()) > ctx_.options().max_pages)
            throw IngestError(IngestErrorKind::TooLarge, path_,
                              "more than " + std::to_string(ctx_.options().max_pages) + " sections (the cap)");
        d.title = props.title;
        if (d.title.empty()) d.title = sections_.first_heading();
        if (d.title.empty()) d.title = std::filesystem::path(path_).filename().string();
        d.units = sections_.take();
        if (d.units.empty()) d.add_note("no text");
        ctx_.progress(1.0, text::sections_done(d.units.size()));
        return d;
    }

private:
    QByteArray part(const std::string& name) {
        if (!zip_.contains(name)) throw IngestError(IngestErrorKind::Corrupt, path_, name + " is missing");
        return zip_.read(name, ooxml::kMaxXmlPartBytes);
    }

    std::string main_part() {
        if (zip_.contains("_rels/.rels")) {
            const ooxml::Relationships r = ooxml::parse_relationships(part("_rels/.rels"), "", path_);
            if (const auto* rel = ooxml::first_of_type(r, "officeDocument"))
                if (zip_.contains(rel->target)) return rel->target;
        }
        return "word/document.xml";
    }

    void read_styles(const std::string& name) {
        QXmlStreamReader x(part(name));
        std::string id;
        while (!x.atEnd()) {
            if (x.readNext() != QXmlStreamReader::StartElement) continue;
            if (ooxml::is(x, L("style"))) {
                id = ooxml::attr(x, L("styleId")).toString().toStdString();
                if (id.empty()) id = w_val(x, L("styleId"));
                if (!id.empty()) styles_[id];
            } else if (!id.empty() && ooxml::is(x, L("name"))) {
                styles_[id].name = lower(w_val(x, L("val")));
            } else if (!id.empty() && ooxml::is(x, L("basedOn"))) {
                styles_[id].based_on = w_val(x, L("val"));
            } else if (!id.empty() && ooxml::is(x, L("outlineLvl"))) {
                styles_[id].outline = std::atoi(w_val(x, L("val")).c_str());
            }
        }
        // A malformed styles part costs the headings, not the document.
        if (x.hasError()) ctx_note_ = name + ": malformed XML; headings by style name only";
    }

    // w:val and friends: WordprocessingML attributes live in the w: namespace.
    static std::string w_val(const QXmlStreamReader& x, QLatin1String local) {
        for (const QXmlStreamAttribute& a : x.attributes())
            if (a.name() == local) return a.value().toString().toStdString();
        return {};
    }

    void read_notes(const std::string& name, QLatin1String element, std::map<std::string, std::string>& out) {
        QXmlStreamReader x(part(name));
        std::string id, text;
        bool in_note = false;
        while (!x.atEnd()) {
            const auto t = x.readNext();
            if (t == QXmlStreamReader::StartElement) {
                if (ooxml::is(x, element)) {
                    const std::string type = w_val(x, L("type"));
                    in_note = type.empty() || type == "normal";
                    id = w_val(x, L("id"));
                    text.clear();
                } else if (in_note && ooxml::is(x, L("t"))) {
                    text += ooxml::element_text(x);
                } else if (in_note && ooxml::is(x, L("tab"))) {
                    text += ' ';
                } else if (in_note && ooxml::is(x, L("p")) && !text.empty()) {
                    text += ' ';
                }
            } else if (t == QXmlStreamReader::EndElement && ooxml::is(x, element)) {
                if (in_note && !id.empty()) out[id] = text::collapse_spaces(text);
                in_note = false;
            }
        }
        ooxml::check(x, path_, name);
    }

    void body(const std::string& main) {
        const QByteArray xml = part(main);
        QXmlStreamReader x(xml);
        int p_depth = 0, cell_depth = 0, level = 0, paragraphs = 0;
        std::string para, cell;
        std::vector<std::string> notes;  // referenced in the current paragraph or cell
        auto note_ref = [&](const std::map<std::string, std::string>& from, const std::string& id) {
            const auto it = from.find(id);
            if (it == from.end()) return;
            // (appends, not "literal" + std::string&&: GCC 12 warns falsely about that, -Wrestrict)
            std::string mark = "[";
            mark += std::to_string(++note_number_);
            mark += ']';
            para += mark;
            if (!it->second.empty()) notes.push_back(mark + " " + it->second);
        };
        auto emit_notes = [&] {
            for (const std::string& n : notes) sections_.note(n);
            notes.clear();
        };
        while (!x.atEnd()) {
            const auto t = x.readNext();
            if (t == QXmlStreamReader::StartElement) {
                const auto n = x.name();
                if (n == L("Fallback")) {  // mc:Fallback repeats mc:Choice's content
                    x.skipCurrentElement();
                } else if (n == L("p")) {
                    if (p_depth++ == 0) {
                        para.clear();
                        level = 0;
                    } else if (!para.empty()) {
                        para += '\n';  // a paragraph of a text box inside this one
                    }
                } else if (n == L("pStyle") && p_depth == 1) {
                    level = style_level(styles_, w_val(x, L("val")));
                } else if (n == L("outlineLvl") && p_depth == 1) {
                    const int o = std::atoi(w_val(x, L("val")).c_str());
                    if (o >= 0 && o < 9) level = o + 1;
                } else if (n == L("t") && p_depth > 0) {
                    para += ooxml::element_text(x);
                } else if ((n == L("tab") || n == L("ptab")) && p_depth > 0) {
                    para += '\t';
                } else if ((n == L("br") || n == L("cr")) && p_depth > 0) {
                    para += '\n';
                } else if (n == L("noBreakHyphen") && p_depth > 0) {
                    para += '-';
                } else if (n == L("footnoteReference")) {
                    note_ref(footnotes_, w_val(x, L("id")));
                } else if (n == L("endnoteReference")) {
                    note_ref(endnotes_, w_val(x, L("id")));
                } else if (n == L("tc")) {
                    if (cell_depth++ == 0) cell.clear();
                }
            } else if (t == QXmlStreamReader::EndElement) {
                const auto n = x.name();
                if (n == L("p") && p_depth > 0 && --p_depth == 0) {
                    if ((++paragraphs & 0xFF) == 0) {
                        ctx_.check_cancelled(path_);
                        ctx_.progress(0.05 + 0.9 * static_cast<double>(x.characterOffset()) / (xml.size() + 1.0),
                                      "paragraph " + std::to_string(paragraphs));
                    }
                    std::string text = para;
                    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t'))
                        text.pop_back();
                    if (cell_depth > 0) {
                        if (!text.empty()) cell += (cell.empty() ? "" : "\n") + text;
                    } else if (level > 0) {
                        sections_.heading(text, level);
                        emit_notes();
                    } else {
                        sections_.block(doc::BlockRole::Body, text);
                        emit_notes();
                    }
                } else if (n == L("tc") && cell_depth > 0 && --cell_depth == 0) {
                    sections_.block(doc::BlockRole::TableCell, cell);
                    cell.clear();
                    emit_notes();
                }
            }
        }
        ooxml::check(x, path_, main);
        emit_notes();
    }

    ZipArchive& zip_;
    const std::string& path_;
    IngestContext& ctx_;
    std::map<std::string, Style> styles_;
    std::map<std::string, std::string> footnotes_, endnotes_;
    int note_number_ = 0;
    std::string ctx_note_;
    text::SectionBuilder sections_;

public:
    const std::string& note() const { return ctx_note_; }
};

doc::Document read_zip(ZipArchive& zip, const std::string& path, IngestContext& ctx) {
    WordReader r(zip, path, ctx);
    doc::Document d = r.read();
    if (!r.note().empty()) d.add_note(r.note());
    return d;
}

bool sniff_docx(const std::string& head) {
    // A zip whose first local entry lives under word/; documents that start with
    // [Content_Types].xml are found by their extension.
    if (head.size() < 35 || head.compare(0, 4, "PK\x03\x04") != 0) return false;
    const auto name_len =
        static_cast<size_t>(static_cast<uint8_t>(head[26]) | (static_cast<uint8_t>(head[27]) << 8));
    return name_len >= 5 && head.compare(30, 5, "word/") == 0;
}

class DocxReader final : public Reader {
public:
    const char* name() const override { return "docx"; }
    std::vector<std::string> extensions() const override { return {"docx", "docm", "dotx", "dotm"}; }
    bool sniff(const std::string& head) const override { return sniff_docx(head); }

    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        check_ole_file(path);
        ZipArchive zip = ZipArchive::open_file(path, ZipLimits::from(ctx.options()));
        doc::Document d = read_zip(zip, path, ctx);
        try {
            d.id = sha256_file_hex(path);
        } catch (const IoError& e) {
            throw IngestError(IngestErrorKind::Io, path, e.what());
        }
        return d;
    }
};

}  // namespace

std::unique_ptr<Reader> make_docx_reader() { return std::make_unique<DocxReader>(); }

doc::Document read_docx_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx) {
    const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    check_ole(all, name, true);
    ZipArchive zip = ZipArchive::open_memory(bytes, name, ZipLimits::from(ctx.options()));
    doc::Document d = read_zip(zip, name, ctx);
    d.id = sha256_hex(all);
    return d;
}

}  // namespace sl::ingest
