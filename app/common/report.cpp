#include "app/common/report.h"

#include <QByteArray>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/document/locator.h"
#include "core/util/error.h"

namespace sl::app {

namespace {

std::string html_escape(std::string_view s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

// Markdown: characters that would start markup inside running text. Document and answer text is
// never markup: no emphasis, code, HTML, headings, tables, links or images ("[x](javascript:…)"
// from a PDF stays text). Citation markers ("[1]", "[3?]") are left readable unless a link could
// follow them.
std::string md_escape(std::string_view s) {
    std::string o;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '[') {
            size_t j = i + 1;
            while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
            if (j < s.size() && s[j] == '?') ++j;
            const bool marker = j > i + 1 && j < s.size() && s[j] == ']' &&
                                (j + 1 == s.size() || (s[j + 1] != '(' && s[j + 1] != '[' && s[j + 1] != ':'));
            if (marker) {
                o.append(s.substr(i, j + 1 - i));
                i = j;
                continue;
            }
        }
        if (c == '*' || c == '_' || c == '`' || c == '<' || c == '>' || c == '#' || c == '|' || c == '\\' || c == '[' ||
            c == ']' || c == '~')
            o += '\\';
        o += c;
    }
    return o;
}

std::string percent(double x) {
    char b[16];
    std::snprintf(b, sizeof b, "%.0f%%", 100 * x);
    return b;
}

std::string support_note(const Answer& a, size_t i) {
    double best_lex = -1;
    std::optional<double> best_sem;
    bool verified = false;
    for (const auto& s : a.sentences)
        for (const auto& sup : s.supports) {
            if (sup.citation != static_cast<int>(i) || !sup.verified) continue;
            verified = true;
            best_lex = std::max(best_lex, sup.lexical);
            if (sup.semantic) best_sem = std::max(best_sem.value_or(-1.0), *sup.semantic);
        }
    std::string n = "attention " + percent(a.citations[i].share);
    if (verified) {
        n += ", word overlap " + percent(best_lex);
        if (best_sem) {
            char b[32];
            std::snprintf(b, sizeof b, ", similarity %.2f", *best_sem);
            n += b;
        }
    }
    if (a.weak(i)) n += "; WEAK: the cited text does not clearly support the sentence";
    else if (!a.used(i)) n += "; read, not cited in the text";
    return n;
}

}  // namespace

namespace {

bool timed(const Citation& c) {
    return c.ref.time && (c.kind == doc::DocumentKind::Video || c.kind == doc::DocumentKind::Audio);
}

// Whether `s` ends with " HH:MM:SS" (two or more digits of hours): a segment's time in a locator.
size_t trailing_time(const std::string& s) {
    const size_t sp = s.rfind(' ');
    if (sp == std::string::npos) return std::string::npos;
    const std::string t = s.substr(sp + 1);
    if (t.size() < 8) return std::string::npos;
    const size_t h = t.size() - 6;
    for (size_t i = 0; i < t.size(); ++i) {
        const bool colon = i == h || i == h + 3;
        if (colon ? t[i] != ':' : !std::isdigit(static_cast<unsigned char>(t[i]))) return std::string::npos;
    }
    return sp;
}

}  // namespace

std::string citation_label(const Citation& c) {
    if (!timed(c)) return c.locator;
    std::string place = c.locator;
    if (const size_t at = trailing_time(place); at != std::string::npos) place.resize(at);
    if (place.empty()) place = std::filesystem::path(c.path).filename().string();
    if (!place.empty()) place.push_back(' ');
    place.append(doc::format_time(c.ref.time->t0));
    return place;
}

std::string citation_place(const Citation& c) {
    std::string s = citation_label(c);
    if (timed(c) && c.ref.time->t1 > c.ref.time->t0) {
        s.push_back('-');
        s.append(doc::format_time(c.ref.time->t1));
    }
    return s;
}

std::string report_markdown(const Report& r) {
    std::string md = "# " + md_escape(r.title) + "\n\n";
    if (!r.library.empty()) md += "_Library: " + md_escape(r.library) + "_\n\n";
    for (size_t ci = 0; ci < r.chats.size(); ++ci) {
        const ReportChat& c = r.chats[ci];
        const Answer& a = c.answer;
        md += "## " + std::to_string(ci + 1) + ". " + md_escape(c.question) + "\n\n";
        std::string meta;
        for (const auto* part : {&c.model, &c.settings, &c.when})
            if (!part->empty()) meta += (meta.empty() ? "" : " · ") + *part;
        if (!meta.empty()) md += "_" + md_escape(meta) + "_\n\n";
        md += md_escape(a.with_markers()) + "\n\n";
        if (a.citations.empty()) {
            md += "_No sources: the answer attended to no document block._\n\n";
            continue;
        }
        md += "**Sources**\n\n";
        for (size_t i = 0; i < a.citations.size(); ++i) {
            const Citation& cit = a.citations[i];
            md += std::to_string(cit.number) + ". **" + md_escape(citation_place(cit)) + "**";
            if (a.weak(i)) md += " ⚠ weak";
            if (!cit.snippet.empty()) md += " — “" + md_escape(cit.snippet) + "”";
            md += " _(" + md_escape(support_note(a, i)) + ")_\n";
        }
        md += "\n";
    }
    return md;
}

std::string report_html_with(const Report& r, const ThumbnailFn& thumbs,
                             const std::function<std::string(size_t, size_t, const Thumbnail&)>& image_src) {
    std::string h = "<h1>" + html_escape(r.title) + "</h1>\n";
    if (!r.library.empty()) h += "<p class=\"meta\">Library: " + html_escape(r.library) + "</p>\n";
    for (size_t ci = 0; ci < r.chats.size(); ++ci) {
        const ReportChat& c = r.chats[ci];
        const Answer& a = c.answer;
        h += "<h2>" + std::to_string(ci + 1) + ". " + html_escape(c.question) + "</h2>\n";
        std::string meta;
        for (const auto* part : {&c.model, &c.settings, &c.when})
            if (!part->empty()) meta += (meta.empty() ? "" : " &middot; ") + html_escape(*part);
        if (!meta.empty()) h += "<p class=\"meta\">" + meta + "</p>\n";
        // The answer, with markers linking to the sources below.
        std::string body = html_escape(a.with_markers());
        for (size_t i = a.citations.size(); i-- > 0;) {
            const std::string n = std::to_string(a.citations[i].number);
            for (const std::string& mark : {"[" + n + "]", "[" + n + "?]"}) {
                const std::string link = "<a href=\"#c" + std::to_string(ci + 1) + "-" + n + "\"" +
                                         (mark.size() > n.size() + 2 ? " class=\"weak\"" : "") + ">" + mark + "</a>";
                for (size_t at = body.find(mark); at != std::string::npos; at = body.find(mark, at + link.size()))
                    body.replace(at, mark.size(), link);
            }
        }
        h += "<p class=\"answer\">" + body + "</p>\n";
        if (a.citations.empty()) {
            h += "<p class=\"meta\">No sources: the answer attended to no document block.</p>\n";
            continue;
        }
        h += "<h3>Sources</h3>\n<table class=\"sources\">\n";
        for (size_t i = 0; i < a.citations.size(); ++i) {
            const Citation& cit = a.citations[i];
            h += "<tr id=\"c" + std::to_string(ci + 1) + "-" + std::to_string(cit.number) + "\"><td class=\"num\">[" +
                 std::to_string(cit.number) + "]</td><td>";
            if (thumbs) {
                if (auto t = thumbs(cit)) {
                    const std::string src = image_src(ci, i, *t);
                    if (!src.empty())
                        h += "<img src=\"" + src + "\" width=\"" + std::to_string(t->width) + "\" height=\"" +
                             std::to_string(t->height) + "\" alt=\"" + html_escape(cit.locator) + "\">";
                }
            }
            h += "</td><td><b>" + html_escape(citation_place(cit)) + "</b>";
            if (a.weak(i)) h += " <span class=\"weak\">&#9888; weak</span>";
            if (!cit.snippet.empty()) h += "<br><q>" + html_escape(cit.snippet) + "</q>";
            h += "<br><small>" + html_escape(support_note(a, i)) + "</small>";
            h += "<br><small class=\"path\">" + html_escape(cit.path) + "</small></td></tr>\n";
        }
        h += "</table>\n";
    }
    return h;
}

std::string report_html(const Report& r, const ThumbnailFn& thumbs) {
    const std::string body = report_html_with(r, thumbs, [](size_t, size_t, const Thumbnail& t) {
        const QByteArray b64 = QByteArray(reinterpret_cast<const char*>(t.bytes.data()), static_cast<qsizetype>(t.bytes.size()))
                                   .toBase64();
        return "data:" + t.mime + ";base64," + b64.toStdString();
    });
    return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(r.title) +
           "</title>\n<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.45}"
           ".meta{color:#666}.answer{font-size:1.1em}table.sources td{vertical-align:top;padding:.4em}"
           "td.num{font-weight:bold}.weak{color:#b36b00}img{border:1px solid #ccc}q{color:#333}"
           ".path{color:#888}</style></head>\n<body>\n" +
           body + "</body></html>\n";
}

void write_text_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    f.close();
    if (!f) throw IoError(path + ": cannot write the report");
}

}  // namespace sl::app
