#include "ingest/epub/epub_reader.h"

#include <QXmlStreamReader>

#include <filesystem>
#include <map>
#include <vector>

#include "core/util/error.h"
#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/slides/ooxml_rels.h"
#include "ingest/slides/ooxml_xml.h"
#include "ingest/slides/zip_archive.h"
#include "ingest/text/html_text.h"
#include "ingest/text/text_sections.h"

namespace sl::ingest {

namespace {

using L = QLatin1String;

struct Item {
    std::string href;  // resolved part name
    std::string media_type;
};

bool ends_with(const std::string& s, std::string_view end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

bool is_font(const std::string& uri) {
    std::string u = uri;
    for (char& c : u) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return ends_with(u, ".otf") || ends_with(u, ".ttf") || ends_with(u, ".woff") || ends_with(u, ".woff2");
}

// One read of one book; `zip` and `ctx` must outlive it. Single-threaded.
class BookReader {
public:
    BookReader(ZipArchive& zip, const std::string& path, IngestContext& ctx) : zip_(zip), path_(path), ctx_(ctx) {}

    doc::Document read() {
        ctx_.progress(0.0, "reading the book");
        check_encryption();
        const std::string opf = package_part();
        doc::Document d;
        d.kind = doc::DocumentKind::Text;
        d.path = path_;
        d.metadata["format"] = "epub";
        const std::vector<Item> spine = read_package(opf, d);

        text::SectionBuilder sections;
        size_t skipped = 0;
        const auto n = spine.size();
        for (size_t i = 0; i < n; ++i) {
            ctx_.check_cancelled(path_);
            const Item& it = spine[i];
            const bool markup = it.media_type.find("html") != std::string::npos || ends_with(it.href, ".xhtml") ||
                                ends_with(it.href, ".html") || ends_with(it.href, ".htm");
            if (it.href.empty() || !markup || !zip_.contains(it.href)) {
                ++skipped;
                continue;
            }
            const QByteArray xhtml = zip_.read(it.href, ooxml::kMaxXmlPartBytes);
            const std::string s = text::repair_utf8(std::string_view(xhtml.constData(), static_cast<size_t>(xhtml.size())));
            sections.break_section();  // every chapter starts a section
            text::html_to_sections(s, sections);
            if (static_cast<int64_t>(sections.count()) > ctx_.options().max_pages)
                throw IngestError(IngestErrorKind::TooLarge, path_,
                                  "more than " + std::to_string(ctx_.options().max_pages) + " sections (the cap)");
            ctx_.progress(static_cast<double>(i + 1) / static_cast<double>(n),
                          "chapter " + std::to_string(i + 1) + " of " + std::to_string(n));
        }
        if (d.title.empty()) d.title = sections.first_heading();
        if (d.title.empty()) d.title = std::filesystem::path(path_).filename().string();
        d.units = sections.take();
        if (skipped > 0)
            d.add_note(std::to_string(skipped) + " spine item" + (skipped == 1 ? "" : "s") +
                       " skipped (missing, outside the book, or not XHTML)");
        if (d.units.empty()) d.add_note("no text");
        ctx_.progress(1.0, text::sections_done(d.units.size()));
        return d;
    }

private:
    QByteArray part(const std::string& name) {
        if (!zip_.contains(name)) throw IngestError(IngestErrorKind::Corrupt, path_, name + " is missing");
        return zip_.read(name, ooxml::kMaxXmlPartBytes);
    }

    // DRM: encryption.xml naming anything but fonts (fonts are obfuscated by the standard itself).
    void check_encryption() {
        if (!zip_.contains("META-INF/encryption.xml")) return;
        QXmlStreamReader x(part("META-INF/encryption.xml"));
        while (!x.atEnd()) {
            if (x.readNext() != QXmlStreamReader::StartElement || !ooxml::is(x, L("CipherReference"))) continue;
            const std::string uri = ooxml::attr(x, L("URI")).toString().toStdString();
            if (!is_font(uri))
                throw IngestError(IngestErrorKind::Encrypted, path_,
                                  "the book is DRM-protected (" + uri + " is encrypted)");
        }
    }

    std::string package_part() {
        const std::string container = "META-INF/container.xml";
        if (!zip_.contains(container))
            throw IngestError(IngestErrorKind::Corrupt, path_, "not an EPUB book: " + container + " is missing");
        QXmlStreamReader x(part(container));
        std::string opf;
        while (!x.atEnd() && opf.empty()) {
            if (x.readNext() == QXmlStreamReader::StartElement && ooxml::is(x, L("rootfile")))
                opf = ooxml::resolve_target("", ooxml::attr(x, L("full-path")).toString().toStdString());
        }
        ooxml::check(x, path_, container);
        if (opf.empty() || !zip_.contains(opf))
            throw IngestError(IngestErrorKind::Corrupt, path_,
                              "the package document " + (opf.empty() ? std::string("(none named)") : opf) +
                                  " named by " + container + " is missing");
        return opf;
    }

    // Manifest and spine of the OPF; dc:title etc. into `d`.
    std::vector<Item> read_package(const std::string& opf, doc::Document& d) {
        QXmlStreamReader x(part(opf));
        std::map<std::string, Item> manifest;
        std::vector<std::string> order;
        const int64_t cap = ctx_.options().max_pages;
        bool in_metadata = false;
        while (!x.atEnd()) {
            const auto t = x.readNext();
            if (t == QXmlStreamReader::EndElement && ooxml::is(x, L("metadata"))) in_metadata = false;
            if (t != QXmlStreamReader::StartElement) continue;
            if (ooxml::is(x, L("metadata"))) {
                in_metadata = true;
            } else if (in_metadata && (ooxml::is(x, L("title")) || ooxml::is(x, L("creator")) ||
                                       ooxml::is(x, L("language")))) {
                const std::string key = x.name().toString().toStdString();
                const std::string value = text::collapse_spaces(ooxml::element_text(x));
                if (key == "title" && d.title.empty()) d.title = value;
                else if (key != "title" && !value.empty() && !d.metadata.count(key)) d.metadata[key] = value;
            } else if (ooxml::is(x, L("item"))) {
                Item it;
                it.href = ooxml::resolve_target(opf, ooxml::attr(x, L("href")).toString().toStdString());
                it.media_type = ooxml::attr(x, L("media-type")).toString().toStdString();
                manifest[ooxml::attr(x, L("id")).toString().toStdString()] = std::move(it);
            } else if (ooxml::is(x, L("itemref"))) {
                if (static_cast<int64_t>(order.size()) >= cap)
                    throw IngestError(IngestErrorKind::TooLarge, path_,
                                      "the spine has more than " + std::to_string(cap) + " chapters (the cap)");
                order.push_back(ooxml::attr(x, L("idref")).toString().toStdString());
            }
        }
        ooxml::check(x, path_, opf);
        std::vector<Item> spine;
        spine.reserve(order.size());
        for (const std::string& id : order) {
            const auto it = manifest.find(id);
            spine.push_back(it == manifest.end() ? Item{} : it->second);
        }
        return spine;
    }

    ZipArchive& zip_;
    const std::string& path_;
    IngestContext& ctx_;
};

bool sniff_epub(const std::string& head) {
    // The OCF rule: the first entry is "mimetype", stored, holding "application/epub+zip".
    return head.size() >= 58 && head.compare(0, 4, "PK\x03\x04") == 0 && head.compare(30, 8, "mimetype") == 0 &&
           head.compare(38, 20, "application/epub+zip") == 0;
}

class EpubReader final : public Reader {
public:
    const char* name() const override { return "epub"; }
    std::vector<std::string> extensions() const override { return {"epub"}; }
    bool sniff(const std::string& head) const override { return sniff_epub(head); }

    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        ZipArchive zip = ZipArchive::open_file(path, ZipLimits::from(ctx.options()));
        doc::Document d = BookReader(zip, path, ctx).read();
        try {
            d.id = sha256_file_hex(path);
        } catch (const IoError& e) {
            throw IngestError(IngestErrorKind::Io, path, e.what());
        }
        return d;
    }
};

}  // namespace

std::unique_ptr<Reader> make_epub_reader() { return std::make_unique<EpubReader>(); }

doc::Document read_epub_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx) {
    ZipArchive zip = ZipArchive::open_memory(bytes, name, ZipLimits::from(ctx.options()));
    doc::Document d = BookReader(zip, name, ctx).read();
    d.id = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    return d;
}

}  // namespace sl::ingest
