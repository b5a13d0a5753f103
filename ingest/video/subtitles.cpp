#include "ingest/video/subtitles.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace sl::ingest {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Splits into lines, accepting \n, \r\n and \r.
std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n' || text[i] == '\r') {
            lines.push_back(text.substr(start, i - start));
            if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
            start = i + 1;
        }
    }
    if (start < text.size()) lines.push_back(text.substr(start));
    return lines;
}

// Groups lines into blank-line separated blocks.
std::vector<std::vector<std::string_view>> split_blocks(std::string_view text) {
    std::vector<std::vector<std::string_view>> blocks(1);
    for (std::string_view line : split_lines(text)) {
        if (trim(line).empty()) {
            if (!blocks.back().empty()) blocks.emplace_back();
        } else {
            blocks.back().push_back(line);
        }
    }
    if (blocks.back().empty()) blocks.pop_back();
    return blocks;
}

std::string_view skip_bom(std::string_view text) {
    if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
        static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF)
        text.remove_prefix(3);
    return text;
}

// "00:00:01,000 --> 00:00:04,000 align:start" -> times; false when the line is not a timing line.
bool parse_timing(std::string_view line, double& t0, double& t1) {
    const size_t arrow = line.find("-->");
    if (arrow == std::string_view::npos) return false;
    std::string_view left = trim(line.substr(0, arrow));
    std::string_view right = trim(line.substr(arrow + 3));
    const size_t sp = right.find_first_of(" \t");
    if (sp != std::string_view::npos) right = right.substr(0, sp);  // cue settings follow
    t0 = parse_timestamp(left);
    t1 = parse_timestamp(right);
    return t0 >= 0 && t1 >= 0;
}

doc::Block make_block(double t0, double t1, std::string text) {
    doc::Block b;
    b.role = doc::BlockRole::Subtitle;
    b.text = std::move(text);
    b.time = doc::TimeRange{t0, std::max(t0, t1)};
    return b;
}

// Cues shared by SRT and VTT: a timing line, then text lines, in one blank-line separated block.
void add_cue(const std::vector<std::string_view>& block, std::vector<doc::Block>& out) {
    for (size_t i = 0; i < block.size() && i < 2; ++i) {
        double t0 = 0, t1 = 0;
        if (!parse_timing(block[i], t0, t1)) continue;
        std::string raw;
        for (size_t j = i + 1; j < block.size(); ++j) {
            if (!raw.empty()) raw += '\n';
            raw.append(block[j]);
        }
        std::string text = strip_markup(raw);
        if (!text.empty()) out.push_back(make_block(t0, t1, std::move(text)));
        return;
    }
}

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n = 0;
        if (c < 0x80)
            n = 0;
        else if ((c & 0xE0) == 0xC0 && c >= 0xC2)
            n = 1;
        else if ((c & 0xF0) == 0xE0)
            n = 2;
        else if ((c & 0xF8) == 0xF0 && c <= 0xF4)
            n = 3;
        else
            return false;
        if (n > 0 && i + static_cast<size_t>(n) >= s.size()) return false;
        for (int k = 1; k <= n; ++k)
            if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xC0) != 0x80)
                return false;
        i += static_cast<size_t>(n) + 1;
    }
    return true;
}

}  // namespace

double parse_timestamp(std::string_view s) {
    s = trim(s);
    double parts[3] = {0, 0, 0};
    int n = 0;
    size_t i = 0;
    while (true) {
        if (n >= 3) return -1;
        double v = 0;
        size_t digits = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
            v = v * 10 + (s[i] - '0');
            ++i;
            if (++digits > 9) return -1;
        }
        if (digits == 0) return -1;
        parts[n++] = v;
        if (i < s.size() && s[i] == ':') {
            ++i;
            continue;
        }
        break;
    }
    if (n < 2) return -1;
    double frac = 0;
    if (i < s.size() && (s[i] == ',' || s[i] == '.')) {
        ++i;
        double scale = 0.1;
        size_t digits = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
            if (digits++ < 9) frac += (s[i] - '0') * scale;
            scale /= 10;
            ++i;
        }
        if (digits == 0) return -1;
    }
    if (i != s.size()) return -1;
    const double h = n == 3 ? parts[0] : 0, m = parts[n - 2], sec = parts[n - 1];
    if (m >= 60 || sec >= 60) return -1;
    return h * 3600 + m * 60 + sec + frac;
}

std::vector<doc::Block> parse_srt(std::string_view text) {
    std::vector<doc::Block> out;
    for (const auto& block : split_blocks(skip_bom(text))) add_cue(block, out);
    return out;
}

std::vector<doc::Block> parse_vtt(std::string_view text) {
    std::vector<doc::Block> out;
    const auto blocks = split_blocks(skip_bom(text));
    for (size_t b = 0; b < blocks.size(); ++b) {
        const auto& block = blocks[b];
        const std::string_view first = trim(block.front());
        if (b == 0 && first.substr(0, 6) == "WEBVTT") continue;
        if (first.substr(0, 4) == "NOTE" || first.substr(0, 5) == "STYLE" ||
            first.substr(0, 6) == "REGION")
            continue;
        add_cue(block, out);
    }
    return out;
}

std::string ass_event_text(std::string_view event) {
    int fields = 8;  // ReadOrder,Layer,Style,Name,MarginL,MarginR,MarginV,Effect
    if (event.substr(0, 9) == "Dialogue:") {
        event.remove_prefix(9);
        fields = 9;  // Layer,Start,End,Style,Name,MarginL,MarginR,MarginV,Effect
    }
    for (int f = 0; f < fields; ++f) {
        const size_t comma = event.find(',');
        if (comma == std::string_view::npos) return {};
        event.remove_prefix(comma + 1);
    }
    std::string out;
    out.reserve(event.size());
    for (size_t i = 0; i < event.size(); ++i) {
        const char c = event[i];
        if (c == '{') {  // override block: {\i1\b1}
            const size_t close = event.find('}', i);
            if (close == std::string_view::npos) break;
            i = close;
        } else if (c == '\\' && i + 1 < event.size() &&
                   (event[i + 1] == 'N' || event[i + 1] == 'n')) {
            out += '\n';
            ++i;
        } else if (c == '\\' && i + 1 < event.size() && event[i + 1] == 'h') {
            out += ' ';
            ++i;
        } else {
            out += c;
        }
    }
    return strip_markup(out);
}

std::string strip_markup(std::string_view text) {
    std::string plain;
    plain.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '<') {
            const size_t close = text.find('>', i);
            if (close != std::string_view::npos && close - i < 256) {
                i = close;
                continue;
            }
        } else if (c == '{' && i + 1 < text.size() && text[i + 1] == '\\') {
            const size_t close = text.find('}', i);
            if (close != std::string_view::npos) {
                i = close;
                continue;
            }
        } else if (c == '&') {
            static const std::pair<std::string_view, std::string_view> kEntities[] = {
                {"&amp;", "&"},   {"&lt;", "<"},   {"&gt;", ">"}, {"&nbsp;", " "},
                {"&quot;", "\""}, {"&apos;", "'"}, {"&lrm;", ""}, {"&rlm;", ""}};
            bool done = false;
            for (const auto& [name, value] : kEntities) {
                if (text.substr(i, name.size()) == name) {
                    plain.append(value);
                    i += name.size() - 1;
                    done = true;
                    break;
                }
            }
            if (done) continue;
        }
        plain += c;
    }
    std::string out;
    for (std::string_view line : split_lines(plain)) {
        line = trim(line);
        if (line.empty()) continue;
        if (!out.empty()) out += '\n';
        out.append(line);
    }
    return out;
}

std::string to_utf8(std::string_view bytes) {
    bytes = skip_bom(bytes);
    if (valid_utf8(bytes)) return std::string(bytes);
    std::string out;
    out.reserve(bytes.size() + bytes.size() / 4);
    for (const char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x80) {
            out += ch;
        } else {
            out += static_cast<char>(0xC0 | (c >> 6));
            out += static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    return out;
}

std::vector<std::string> find_sidecar_subtitles(const std::string& media_path) {
    namespace fs = std::filesystem;
    std::vector<std::string> found;
    const fs::path media(media_path);
    const std::string stem = media.stem().string();
    if (stem.empty()) return found;
    fs::path dir = media.parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    int scanned = 0;
    for (; !ec && it != end && scanned < 100000; it.increment(ec), ++scanned) {
        const fs::path& p = it->path();
        const std::string ext = lower(p.extension().string());
        if (ext != ".srt" && ext != ".vtt") continue;
        const std::string name = p.filename().string();
        if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0 ||
            name[stem.size()] != '.')
            continue;
        std::error_code ec2;
        if (fs::is_regular_file(p, ec2)) found.push_back(p.string());
    }
    std::sort(found.begin(), found.end());
    return found;
}

std::vector<doc::Block> read_sidecar_subtitles(const std::string& path, size_t max_bytes) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size > max_bytes) return {};
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::string bytes(static_cast<size_t>(size), '\0');
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<size_t>(f.gcount()));
    const std::string text = to_utf8(bytes);
    const std::string ext = lower(std::filesystem::path(path).extension().string());
    const std::string_view body = trim(text);
    if (ext == ".vtt" || body.substr(0, 6) == "WEBVTT") return parse_vtt(text);
    return parse_srt(text);
}

}  // namespace sl::ingest
