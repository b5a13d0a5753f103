#include "ingest/text/text_reader.h"

#include <QString>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/util/error.h"
#include "core/util/sha256.h"
#include "ingest/ingest_error.h"
#include "ingest/text/html_text.h"
#include "ingest/text/text_sections.h"

namespace sl::ingest {

namespace {

enum class Flavor { Plain, Markdown, Html };

std::string lower_ext(const std::string& name) {
    std::string ext = std::filesystem::path(name).extension().string();
    if (!ext.empty()) ext.erase(0, 1);
    for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return ext;
}

Flavor flavor_of(const std::string& name) {
    const std::string ext = lower_ext(name);
    if (ext == "html" || ext == "htm" || ext == "xhtml") return Flavor::Html;
    if (ext == "md" || ext == "markdown") return Flavor::Markdown;
    return Flavor::Plain;
}

// The bytes as UTF-8: BOMs dropped, UTF-16 (with a BOM) converted, invalid sequences replaced.
std::string to_utf8(std::string_view bytes, size_t* replaced) {
    *replaced = 0;
    if (bytes.size() >= 2 && ((bytes[0] == '\xFF' && bytes[1] == '\xFE') || (bytes[0] == '\xFE' && bytes[1] == '\xFF'))) {
        const bool le = bytes[0] == '\xFF';
        std::u16string units;
        units.reserve(bytes.size() / 2);
        for (size_t i = 2; i + 1 < bytes.size(); i += 2) {
            const auto a = static_cast<unsigned char>(bytes[i]), b = static_cast<unsigned char>(bytes[i + 1]);
            units += static_cast<char16_t>(le ? (a | (b << 8)) : ((a << 8) | b));
        }
        // QString replaces unpaired surrogates with U+FFFD; the repair drops NULs as for UTF-8.
        return text::repair_utf8(QString::fromUtf16(units.data(), static_cast<qsizetype>(units.size())).toStdString());
    }
    if (bytes.size() >= 3 && bytes.substr(0, 3) == "\xEF\xBB\xBF") bytes.remove_prefix(3);
    return text::repair_utf8(bytes, replaced);
}

std::string trim(std::string_view s) {
    size_t a = 0, b = s.size();
    while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
    return std::string(s.substr(a, b - a));
}

// "## Results ##" -> level 2, "Results"; 0 when the line is no ATX heading.
int atx_heading(std::string_view line, std::string* text) {
    size_t indent = 0;
    while (indent < line.size() && indent < 4 && line[indent] == ' ') ++indent;
    if (indent >= 4) return 0;
    size_t n = 0;
    while (indent + n < line.size() && line[indent + n] == '#') ++n;
    if (n == 0 || n > 6) return 0;
    const size_t after = indent + n;
    if (after < line.size() && line[after] != ' ' && line[after] != '\t') return 0;
    std::string t = trim(line.substr(after));
    while (!t.empty() && t.back() == '#') t.pop_back();  // closing hashes
    *text = trim(t);
    return static_cast<int>(n);
}

bool setext_underline(std::string_view line, char c) {
    const std::string t = trim(line);
    return !t.empty() && std::all_of(t.begin(), t.end(), [c](char x) { return x == c; });
}

// Paragraphs of plain text or Markdown into sections. Paragraphs longer than a section are cut at
// line ends (and within a line at a character boundary), so that no block outgrows a section.
void text_to_sections(const std::string& s, bool markdown, text::SectionBuilder& out, IngestContext& ctx,
                      const std::string& path) {
    std::string para;
    auto flush = [&] {
        const std::string t = trim(para);
        para.clear();
        if (!t.empty()) out.block(doc::BlockRole::Body, t);
    };
    auto add_line = [&](std::string_view line) {
        if (!para.empty()) para += '\n';
        while (line.size() > text::kSectionChars) {  // one enormous line
            size_t cut = text::kSectionChars;
            while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
            if (cut == 0) cut = text::kSectionChars;  // not UTF-8 after all: cut anywhere, still progress
            para.append(line.substr(0, cut));
            flush();
            line.remove_prefix(cut);
        }
        para.append(line);
        if (para.size() >= text::kSectionChars) flush();
    };
    bool fenced = false;
    std::string fence;
    size_t lines = 0;
    for (size_t pos = 0; pos <= s.size();) {
        size_t nl = s.find('\n', pos);
        if (nl == std::string::npos) nl = s.size();
        std::string_view line(s.data() + pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        pos = nl + 1;
        if ((++lines & 0xFFF) == 0) {
            ctx.check_cancelled(path);
            ctx.progress(static_cast<double>(pos) / static_cast<double>(s.size() + 1), "reading the text");
        }
        if (markdown) {
            const std::string t = trim(line);
            if (t.rfind("```", 0) == 0 || t.rfind("~~~", 0) == 0) {
                if (!fenced) {
                    fenced = true;
                    fence = t.substr(0, 3);
                } else if (t.rfind(fence, 0) == 0) {
                    fenced = false;
                }
                add_line(line);
                continue;
            }
            if (!fenced) {
                std::string heading;
                if (const int level = atx_heading(line, &heading); level > 0) {
                    flush();
                    out.heading(heading, level);
                    continue;
                }
                // Setext: a one-line paragraph underlined by === (level 1) or --- (level 2).
                if (!para.empty() && para.find('\n') == std::string::npos &&
                    (setext_underline(line, '=') || setext_underline(line, '-'))) {
                    const int level = setext_underline(line, '=') ? 1 : 2;
                    const std::string h = trim(para);
                    para.clear();
                    out.heading(h, level);
                    continue;
                }
            } else {
                add_line(line);
                continue;
            }
        }
        if (trim(line).empty()) flush();
        else add_line(line);
    }
    flush();
}

doc::Document read_text(std::string_view bytes, const std::string& path, Flavor flavor, IngestContext& ctx) {
    ctx.progress(0.0, "reading the text");
    size_t replaced = 0;
    const std::string s = to_utf8(bytes, &replaced);
    text::SectionBuilder sections;
    doc::Document d;
    d.kind = doc::DocumentKind::Text;
    d.path = path;
    if (flavor == Flavor::Html) {
        const text::HtmlText h = text::html_to_sections(s, sections);
        d.title = h.title;
        d.metadata["format"] = "html";
    } else {
        text_to_sections(s, flavor == Flavor::Markdown, sections, ctx, path);
        d.metadata["format"] = flavor == Flavor::Markdown ? "markdown" : "text";
    }
    if (static_cast<int64_t>(sections.count()) > ctx.options().max_pages)
        throw IngestError(IngestErrorKind::TooLarge, path,
                          "more than " + std::to_string(ctx.options().max_pages) + " sections (the cap)");
    if (d.title.empty() && flavor != Flavor::Plain) d.title = sections.first_heading();
    if (d.title.empty()) d.title = std::filesystem::path(path).filename().string();
    d.units = sections.take();
    if (replaced > 0)
        d.add_note(std::to_string(replaced) + " invalid UTF-8 sequence" + (replaced == 1 ? "" : "s") +
                   " replaced by U+FFFD");
    if (d.units.empty()) d.add_note("no text");
    ctx.progress(1.0, text::sections_done(d.units.size()));
    return d;
}

std::string read_capped(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw IngestError(IngestErrorKind::Io, path, "cannot open the file");
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > static_cast<uintmax_t>(kMaxTextBytes))
        throw IngestError(IngestErrorKind::TooLarge, path,
                          std::to_string(size >> 20) + " MiB of text, over the " +
                              std::to_string(kMaxTextBytes >> 20) + " MiB cap");
    std::string s(static_cast<size_t>(ec ? 0 : size), '\0');
    f.read(s.data(), static_cast<std::streamsize>(s.size()));
    s.resize(static_cast<size_t>(f.gcount()));
    if (f.bad()) throw IngestError(IngestErrorKind::Io, path, "read error");
    return s;
}

doc::Document read_file(const std::string& path, Flavor flavor, IngestContext& ctx) {
    const std::string bytes = read_capped(path);
    doc::Document d = read_text(bytes, path, flavor, ctx);
    d.id = sha256_hex(bytes);
    return d;
}

bool starts_like_html(const std::string& head) {
    size_t i = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
    while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) ++i;
    std::string h = head.substr(i, 15);
    for (char& c : h) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return h.rfind("<!doctype html", 0) == 0 || h.rfind("<html", 0) == 0;
}

class TextReader final : public Reader {
public:
    const char* name() const override { return "text"; }
    std::vector<std::string> extensions() const override { return {"txt", "text", "md", "markdown"}; }
    bool sniff(const std::string&) const override { return false; }  // text has no magic number
    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        return read_file(path, flavor_of(path) == Flavor::Markdown ? Flavor::Markdown : Flavor::Plain, ctx);
    }
};

class HtmlReader final : public Reader {
public:
    const char* name() const override { return "html"; }
    std::vector<std::string> extensions() const override { return {"html", "htm", "xhtml"}; }
    bool sniff(const std::string& head) const override { return starts_like_html(head); }
    doc::Document read(const std::string& path, IngestContext& ctx) const override {
        return read_file(path, Flavor::Html, ctx);
    }
};

}  // namespace

std::unique_ptr<Reader> make_text_reader() { return std::make_unique<TextReader>(); }
std::unique_ptr<Reader> make_html_reader() { return std::make_unique<HtmlReader>(); }

doc::Document read_text_bytes(std::span<const uint8_t> bytes, const std::string& name, IngestContext& ctx) {
    const std::string_view s(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (static_cast<int64_t>(s.size()) > kMaxTextBytes)
        throw IngestError(IngestErrorKind::TooLarge, name, "over the text size cap");
    doc::Document d = read_text(s, name, flavor_of(name), ctx);
    d.id = sha256_hex(s);
    return d;
}

}  // namespace sl::ingest
