#include "ingest/slides/pptx_reader.h"

#include <QXmlStreamReader>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/util/error.h"
#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/slides/ooxml_props.h"
#include "ingest/slides/ooxml_rels.h"
#include "ingest/slides/ooxml_xml.h"
#include "ingest/slides/pptx_shapes.h"
#include "ingest/slides/zip_archive.h"
#include "ingest/slides/zip_picture.h"

namespace sl::ingest {

namespace {

using ooxml::Relationships;
using pptx::EmuRect;
using pptx::Shape;
using L = QLatin1String;

constexpr double kEmuPerPoint = 12700.0;
constexpr int64_t kDefaultCx = 9144000, kDefaultCy = 6858000;  // 10 x 7.5 in, 4:3
constexpr int64_t kMaxSlideEmu = int64_t{51206400} * 8;        // 8x the largest PowerPoint allows
constexpr std::array<uint8_t, 8> kOleMagic = {0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1};

// ---- OLE compound files: encrypted OOXML, or a legacy binary file -------------------------------

bool has_ole_magic(std::span<const uint8_t> head) {
    return head.size() >= kOleMagic.size() &&
           std::equal(kOleMagic.begin(), kOleMagic.end(), head.begin());
}

// "EncryptionInfo" as the UTF-16LE directory entry name of an encrypted OOXML package.
const std::string& encryption_info_utf16() {
    static const std::string s = [] {
        std::string out;
        for (const char c : std::string_view("EncryptionInfo")) {
            out += c;
            out += '\0';
        }
        return out;
    }();
    return s;
}

[[noreturn]] void throw_ole(const std::string& path, bool encrypted) {
    if (encrypted)
        throw IngestError(IngestErrorKind::Encrypted, path,
                          "the deck is encrypted and needs a password");
    throw IngestError(IngestErrorKind::Unsupported, path,
                      "an OLE compound file (a PowerPoint 97-2003 .ppt?), not a PPTX deck; "
                      "save it as .pptx");
}

void check_ole_bytes(std::span<const uint8_t> bytes, const std::string& path) {
    if (!has_ole_magic(bytes)) return;
    const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    throw_ole(path, all.find(encryption_info_utf16()) != std::string_view::npos);
}

void check_ole_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw IngestError(IngestErrorKind::Io, path, "cannot open the file");
    std::array<uint8_t, 8> head{};
    f.read(reinterpret_cast<char*>(head.data()), head.size());
    if (f.gcount() != static_cast<std::streamsize>(head.size()) || !has_ole_magic(head)) return;
    // Scan the whole file in chunks, overlapping by the needle's length.
    const std::string& needle = encryption_info_utf16();
    std::string window;
    std::vector<char> chunk(1 << 20);
    for (;;) {
        f.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        const auto n = static_cast<size_t>(f.gcount());
        if (n == 0) break;
        window.append(chunk.data(), n);
        if (window.find(needle) != std::string::npos) throw_ole(path, true);
        window.erase(0, window.size() > needle.size() ? window.size() - needle.size() : 0);
    }
    throw_ole(path, false);
}

// ---- placeholders -----------------------------------------------------------------------------

// Placeholder types as a master knows them: titles, bodies (content, subtitle, objects) and the
// footer furniture.
std::string master_type(const std::string& type) {
    if (type == "title" || type == "ctrTitle") return "title";
    if (type == "dt" || type == "ftr" || type == "sldNum" || type == "hdr" || type == "sldImg")
        return type;
    return "body";
}

const Shape* match_layout(const std::vector<Shape>& phs, const Shape& s) {
    const int64_t idx = s.ph_idx.value_or(0);
    for (const Shape& p : phs)
        if (p.ph_idx.value_or(0) == idx && master_type(p.ph_type) == master_type(s.ph_type))
            return &p;
    for (const Shape& p : phs)
        if (p.ph_idx.value_or(0) == idx) return &p;
    for (const Shape& p : phs)
        if (!s.ph_type.empty() && p.ph_type == s.ph_type) return &p;
    return nullptr;
}

const Shape* match_master(const std::vector<Shape>& phs, const std::string& type) {
    const std::string want = master_type(type);
    for (const Shape& p : phs)
        if (master_type(p.ph_type) == want) return &p;
    return nullptr;
}

bool is_title(const Shape& s) {
    return s.placeholder && (s.ph_type == "title" || s.ph_type == "ctrTitle");
}

// ---- the deck ---------------------------------------------------------------------------------

// One read of one deck. Owns the per-read caches (relationships, layout and master
// placeholders, pictures); `zip` and `ctx` must outlive it. Single-threaded.
class DeckReader {
public:
    DeckReader(ZipArchive& zip, const std::string& path, IngestContext& ctx)
        : zip_(zip), path_(path), ctx_(ctx) {}

    doc::Document read() {
        ctx_.progress(0.0, "reading the deck");
        const std::string presentation = presentation_part();
        if (!zip_.contains(presentation))
            throw IngestError(IngestErrorKind::Corrupt, path_,
                              "not a PowerPoint deck: " + presentation + " is missing");
        const std::vector<std::string> slides = slide_parts(presentation);

        doc::Document d;
        d.kind = doc::DocumentKind::Slides;
        d.path = path_;
        const ooxml::DocumentProperties props = ooxml::read_document_properties(zip_);
        d.metadata = props.metadata;

        const auto n = static_cast<int>(slides.size());
        d.units.reserve(slides.size());
        for (int i = 0; i < n; ++i) {
            ctx_.check_cancelled(path_);
            d.units.push_back(slide(i, slides[static_cast<size_t>(i)]));
            ctx_.progress(static_cast<double>(i + 1) / n,
                          "slide " + std::to_string(i + 1) + " of " + std::to_string(n));
        }
        if (n == 0) ctx_.progress(1.0, "no slides");

        d.title = props.title;
        if (d.title.empty() && !d.units.empty()) {
            for (const auto& b : d.units.front().blocks) {
                if (b.role != doc::BlockRole::Title) continue;
                d.title = b.text;
                std::replace(d.title.begin(), d.title.end(), '\n', ' ');
                break;
            }
        }
        if (d.title.empty()) d.title = std::filesystem::path(path_).filename().string();
        return d;
    }

private:
    // An XML part, inflated under the caps; Corrupt when missing.
    QByteArray part(const std::string& name) {
        if (!zip_.contains(name))
            throw IngestError(IngestErrorKind::Corrupt, path_, name + " is missing");
        return zip_.read(name, ooxml::kMaxXmlPartBytes);
    }

    // The relationships of `source` (cached); empty when it has none.
    const Relationships& rels(const std::string& source) {
        const auto it = rels_.find(source);
        if (it != rels_.end()) return it->second;
        Relationships r;
        const std::string rp = ooxml::rels_part_for(source);
        if (zip_.contains(rp)) r = ooxml::parse_relationships(part(rp), source, path_);
        return rels_.emplace(source, std::move(r)).first->second;
    }

    // The placeholders of a layout or master part (cached); empty when the part is missing.
    const std::vector<Shape>& placeholders(const std::string& source) {
        const auto it = placeholders_.find(source);
        if (it != placeholders_.end()) return it->second;
        std::vector<Shape> phs;
        if (zip_.contains(source)) {
            for (Shape& s : pptx::parse_shape_tree(part(source), path_, source))
                if (s.placeholder) phs.push_back(std::move(s));
        }
        return placeholders_.emplace(source, std::move(phs)).first->second;
    }

    // The package's main part: _rels/.rels officeDocument, else ppt/presentation.xml.
    std::string presentation_part() {
        if (zip_.contains("_rels/.rels")) {
            const Relationships& r = rels("");
            if (const auto* rel = ooxml::first_of_type(r, "officeDocument"))
                if (zip_.contains(rel->target)) return rel->target;
        }
        return "ppt/presentation.xml";
    }

    // Slide parts in p:sldIdLst order; also reads p:sldSz into cx_/cy_.
    std::vector<std::string> slide_parts(const std::string& presentation) {
        std::vector<std::string> ids;
        const int64_t cap = ctx_.options().max_pages;
        QXmlStreamReader x(part(presentation));
        bool in_list = false;
        while (!x.atEnd()) {
            const auto token = x.readNext();
            if (token == QXmlStreamReader::EndElement && ooxml::is(x, L("sldIdLst"))) {
                in_list = false;
            } else if (token != QXmlStreamReader::StartElement) {
                continue;
            } else if (ooxml::is(x, L("sldIdLst"))) {
                in_list = true;
            } else if (in_list && ooxml::is(x, L("sldId"))) {
                if (static_cast<int64_t>(ids.size()) >= cap)
                    throw IngestError(
                        IngestErrorKind::TooLarge, path_,
                        "the deck has more than " + std::to_string(cap) + " slides (the cap)");
                ids.push_back(ooxml::rel_attr(x, L("id")).toString().toStdString());
            } else if (ooxml::is(x, L("sldSz"))) {
                const auto cx = ooxml::attr_int(x, L("cx"));
                const auto cy = ooxml::attr_int(x, L("cy"));
                if (cx && cy && *cx > 0 && *cy > 0 && *cx <= kMaxSlideEmu && *cy <= kMaxSlideEmu) {
                    cx_ = static_cast<double>(*cx);
                    cy_ = static_cast<double>(*cy);
                }
            }
        }
        ooxml::check(x, path_, presentation);
        const Relationships& r = rels(presentation);
        std::vector<std::string> parts;
        parts.reserve(ids.size());
        for (const auto& id : ids) {
            const auto it = r.find(id);
            // Dangling ids and missing parts are skipped: PowerPoint repairs such decks the same
            // way.
            if (it == r.end() || !zip_.contains(it->second.target)) continue;
            parts.push_back(it->second.target);
        }
        return parts;
    }

    // EMU rect -> the slide's normalized box, clamped; nullopt when absent, not finite or
    // off-slide.
    std::optional<doc::BBox> normalize(const std::optional<EmuRect>& r) const {
        if (!r) return std::nullopt;
        const double x0 = r->x / cx_, y0 = r->y / cy_;
        const double x1 = (r->x + r->cx) / cx_, y1 = (r->y + r->cy) / cy_;
        if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1))
            return std::nullopt;
        if (x1 < x0 || y1 < y0 || x1 <= 0 || y1 <= 0 || x0 >= 1 || y0 >= 1) return std::nullopt;
        doc::BBox b;
        b.x0 = static_cast<float>(std::clamp(x0, 0.0, 1.0));
        b.y0 = static_cast<float>(std::clamp(y0, 0.0, 1.0));
        b.x1 = static_cast<float>(std::clamp(x1, 0.0, 1.0));
        b.y1 = static_cast<float>(std::clamp(y1, 0.0, 1.0));
        if (!b.valid()) return std::nullopt;
        return b;
    }

    // A placeholder's position from the slide layout, else from the layout's master.
    std::optional<EmuRect> inherited(const Shape& s, const std::string& layout) {
        if (!s.placeholder || layout.empty()) return std::nullopt;
        const Shape* m = match_layout(placeholders(layout), s);
        if (m && m->rect) return m->rect;
        const std::string type = m ? m->ph_type : s.ph_type;
        const auto* master = ooxml::first_of_type(rels(layout), "slideMaster");
        if (!master) return std::nullopt;
        const Shape* mm = match_master(placeholders(master->target), type);
        return mm ? mm->rect : std::nullopt;
    }

    doc::Visual picture(const std::string& entry, const std::optional<doc::BBox>& bbox) {
        auto it = pictures_.find(entry);
        if (it == pictures_.end())
            it = pictures_.emplace(entry, picture_visual(zip_, entry, std::nullopt, ctx_.options()))
                     .first;
        doc::Visual v = it->second;
        v.bbox = bbox;
        return v;
    }

    doc::Unit slide(int index, const std::string& slide_part) {
        doc::Unit u;
        u.kind = doc::UnitKind::Slide;
        u.index = index;
        u.label = std::to_string(index + 1);
        u.width = static_cast<float>(cx_ / kEmuPerPoint);
        u.height = static_cast<float>(cy_ / kEmuPerPoint);

        const std::vector<Shape> shapes =
            pptx::parse_shape_tree(part(slide_part), path_, slide_part);
        const Relationships& r = rels(slide_part);
        const auto* layout_rel = ooxml::first_of_type(r, "slideLayout");
        const std::string layout = layout_rel ? layout_rel->target : std::string();

        for (const Shape& s : shapes) {
            std::optional<EmuRect> rect = s.rect;
            if (!rect && s.placeholder) rect = inherited(s, layout);
            if (s.kind == Shape::Kind::Picture) {
                const auto it = r.find(s.embed);
                if (s.embed.empty() || it == r.end()) continue;
                u.visuals.push_back(picture(it->second.target, normalize(rect)));
                continue;
            }
            if (s.text.empty()) continue;
            doc::Block b;
            b.role = s.kind == Shape::Kind::TableCell ? doc::BlockRole::TableCell
                     : is_title(s)                    ? doc::BlockRole::Title
                                                      : doc::BlockRole::Body;
            b.text = s.text;
            b.bbox = normalize(rect);
            u.blocks.push_back(std::move(b));
        }

        // Speaker notes: the body placeholder(s) of the notes slide.
        if (const auto* notes = ooxml::first_of_type(r, "notesSlide");
            notes && zip_.contains(notes->target)) {
            for (const Shape& s :
                 pptx::parse_shape_tree(part(notes->target), path_, notes->target)) {
                if (!s.placeholder || s.ph_type != "body" || s.text.empty()) continue;
                doc::Block b;
                b.role = doc::BlockRole::Note;
                b.text = s.text;
                u.blocks.push_back(std::move(b));
            }
        }
        return u;
    }

    ZipArchive& zip_;
    const std::string& path_;
    IngestContext& ctx_;
    double cx_ = kDefaultCx, cy_ = kDefaultCy;
    std::map<std::string, Relationships> rels_;
    std::map<std::string, std::vector<Shape>> placeholders_;
    std::map<std::string, doc::Visual> pictures_;
};

bool sniff_pptx(const std::string& head) {
    // A zip whose first local entry lives under ppt/ (decks written by some tools); decks that
    // start with [Content_Types].xml are found by their extension.
    if (head.size() < 34 || head.compare(0, 4, "PK\x03\x04") != 0) return false;
    const auto name_len =
        static_cast<size_t>(static_cast<uint8_t>(head[26]) | (static_cast<uint8_t>(head[27]) << 8));
    return name_len >= 4 && head.compare(30, 4, "ppt/") == 0;
}

class PptxReader final : public Reader {
public:
    const char* name() const override { return "pptx"; }
    std::vector<std::string> extensions() const override {
        return {"pptx", "pptm", "ppsx", "ppsm", "potx", "potm"};
    }
    bool sniff(const std::string& head) const override { return sniff_pptx(head); }

    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        check_ole_file(path);
        ZipArchive zip = ZipArchive::open_file(path, ZipLimits::from(ctx.options()));
        doc::Document d = DeckReader(zip, path, ctx).read();
        try {
            d.id = sha256_file_hex(path);
        } catch (const IoError& e) {
            throw IngestError(IngestErrorKind::Io, path, e.what());
        }
        return d;
    }
};

}  // namespace

std::unique_ptr<Reader> make_pptx_reader() {
    return std::make_unique<PptxReader>();
}

doc::Document read_pptx_bytes(std::span<const uint8_t> bytes, const std::string& name,
                              IngestContext& ctx) {
    check_ole_bytes(bytes, name);
    ZipArchive zip = ZipArchive::open_memory(bytes, name, ZipLimits::from(ctx.options()));
    doc::Document d = DeckReader(zip, name, ctx).read();
    d.id = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    return d;
}

}  // namespace sl::ingest
