#include "core/ask/answer_guard.h"

#include <cctype>
#include <map>
#include <vector>

namespace sl {

namespace {

bool ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

struct Word {
    size_t begin;
    std::string w;  // lower case
};

std::vector<Word> words(std::string_view t) {
    std::vector<Word> out;
    size_t i = 0;
    while (i < t.size()) {
        while (i < t.size() && ws(t[i])) ++i;
        const size_t b = i;
        std::string w;
        while (i < t.size() && !ws(t[i])) w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(t[i++]))));
        if (!w.empty()) out.push_back({b, std::move(w)});
    }
    return out;
}

}  // namespace

size_t AnswerGuard::last_sentence_end(std::string_view t) {
    size_t e = t.size();
    while (e > 0 && ws(t[e - 1])) --e;
    for (size_t i = e; i > 0; --i) {
        const char c = t[i - 1];
        const bool end_punct = c == '.' || c == '!' || c == '?';
        if (end_punct && (i == e || ws(t[i]))) {
            // Not "e.g." / "p." / a list number "3."
            const bool abbrev = i >= 2 && std::isalpha(static_cast<unsigned char>(t[i - 2])) &&
                                (i < 3 || !std::isalnum(static_cast<unsigned char>(t[i - 3])));
            const bool number = i >= 2 && std::isdigit(static_cast<unsigned char>(t[i - 2])) &&
                                (i < 3 || t[i - 3] == '\n');
            if (!abbrev && !number) return i == e ? t.size() : i;
        }
        if (c == '\n' && i >= 2 && t[i - 2] == '\n') return i;  // a paragraph break
        if ((c == ')' || c == '"' || c == '`') && i >= 2 && (t[i - 2] == '.' || t[i - 2] == '!' || t[i - 2] == '?') &&
            (i == e || ws(t[i])))
            return i == e ? t.size() : i;
    }
    return 0;
}

bool AnswerGuard::on_text(std::string_view piece) {
    text_.append(piece);
    keep_ = text_.size();
    if (looped_) return false;
    const std::vector<Word> w = words(text_);
    const size_t n = static_cast<size_t>(ngram_);
    size_t second = std::string::npos;  // where the loop's second occurrence begins
    if (w.size() >= 3 * n) {
        // Occurrences of the last n-gram.
        std::vector<size_t> at;
        for (size_t s = 0; s + n <= w.size(); ++s) {
            bool same = true;
            for (size_t k = 0; k < n && same; ++k) same = w[s + k].w == w[w.size() - n + k].w;
            if (same) at.push_back(s);
        }
        if (at.size() >= 3) second = w[at[1]].begin;
    }
    if (second == std::string::npos) {
        // The same line a third time.
        std::map<std::string, std::vector<size_t>> lines;
        size_t b = 0;
        for (size_t i = 0; i <= text_.size(); ++i) {
            if (i < text_.size() && text_[i] != '\n') continue;
            std::string line = text_.substr(b, i - b);
            while (!line.empty() && ws(line.back())) line.pop_back();
            if (i < text_.size() && line.size() >= 10) {  // complete lines only
                auto& v = lines[line];
                v.push_back(b);
                if (v.size() >= 3) {
                    second = v[1];
                    break;
                }
            }
            b = i + 1;
        }
    }
    if (second == std::string::npos) return true;
    looped_ = true;
    const size_t end = last_sentence_end(std::string_view(text_).substr(0, second));
    keep_ = end > 0 ? end : second;
    return false;
}

}  // namespace sl
