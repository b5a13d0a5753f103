#include "core/answer/answer.h"

namespace sl {

std::string Answer::with_markers() const {
    std::string out;
    size_t at = 0;
    for (const auto& s : sentences) {
        if (s.supports.empty()) continue;
        std::string marks;
        for (const auto& sup : s.supports) {
            if (sup.citation < 0 || static_cast<size_t>(sup.citation) >= citations.size()) continue;
            marks += '[';
            marks += std::to_string(citations[static_cast<size_t>(sup.citation)].number);
            if (sup.weak) marks += '?';
            marks += ']';
        }
        if (marks.empty()) continue;
        // Before the sentence's closing punctuation (and closing quotes/brackets after it).
        size_t end = s.end;
        while (end > s.begin && (text[end - 1] == '"' || text[end - 1] == ')' || text[end - 1] == '\'')) --end;
        if (end > s.begin && (text[end - 1] == '.' || text[end - 1] == '!' || text[end - 1] == '?' ||
                              text[end - 1] == ':' || text[end - 1] == ';'))
            --end;
        else end = s.end;
        out.append(text, at, end - at);
        out += ' ';
        out += marks;
        at = end;
    }
    out.append(text, at, std::string::npos);
    return out;
}

bool Answer::used(size_t i) const {
    for (const auto& s : sentences)
        for (const auto& sup : s.supports)
            if (sup.citation == static_cast<int>(i)) return true;
    return false;
}

bool Answer::weak(size_t i) const {
    bool any = false;
    for (const auto& s : sentences)
        for (const auto& sup : s.supports) {
            if (sup.citation != static_cast<int>(i)) continue;
            if (!sup.weak) return false;
            any = true;
        }
    return any;
}

std::string Answer::sources_text() const {
    std::string out;
    for (size_t i = 0; i < citations.size(); ++i) {
        const Citation& c = citations[i];
        out += '[';
        out += std::to_string(c.number);
        out += "] " + c.locator;
        if (!c.snippet.empty()) out += " \xE2\x80\x94 \xE2\x80\x9C" + c.snippet + "\xE2\x80\x9D";
        if (weak(i)) out += " (weak support)";
        else if (!used(i)) out += " (read, not cited)";
        out += '\n';
    }
    return out;
}

}  // namespace sl
