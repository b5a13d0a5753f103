#include "core/context/lexical_rank.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_set>

namespace sl {

namespace {

const std::unordered_set<std::string>& stop_words() {
    static const std::unordered_set<std::string> s = {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "in", "is",
        "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when", "where", "which",
        "who", "why", "will", "with", "you", "your", "i", "we", "they", "he", "she", "not", "there", "these",
        "those", "than", "then", "so", "if", "into", "about", "also", "has", "have", "had", "were", "been"};
    return s;
}

constexpr double kK1 = 1.2;
constexpr double kB = 0.75;

}  // namespace

std::vector<std::string> LexicalIndex::words(std::string_view text) {
    std::vector<std::string> out;
    std::string cur;
    auto flush = [&] {
        if (!cur.empty() && !stop_words().count(cur)) out.push_back(cur);
        cur.clear();
    };
    for (char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c >= 0x80) cur += static_cast<char>(std::tolower(c));
        else flush();
    }
    flush();
    return out;
}

LexicalIndex::LexicalIndex(const std::vector<std::string>& passages) {
    docs_.reserve(passages.size());
    double total = 0;
    for (const auto& p : passages) {
        Doc d;
        for (auto& w : words(p)) {
            if (d.tf[w]++ == 0) ++df_[w];
            ++d.length;
        }
        total += d.length;
        docs_.push_back(std::move(d));
    }
    avg_length_ = docs_.empty() ? 0 : total / static_cast<double>(docs_.size());
}

std::vector<LexicalIndex::Hit> LexicalIndex::rank(std::string_view query, size_t k) const {
    std::vector<std::string> q = words(query);
    std::sort(q.begin(), q.end());
    q.erase(std::unique(q.begin(), q.end()), q.end());
    const double n = static_cast<double>(docs_.size());
    std::vector<Hit> hits;
    for (size_t i = 0; i < docs_.size(); ++i) {
        const Doc& d = docs_[i];
        double score = 0;
        for (const auto& w : q) {
            const auto t = d.tf.find(w);
            if (t == d.tf.end()) continue;
            const double df = df_.at(w);
            const double idf = std::log(1.0 + (n - df + 0.5) / (df + 0.5));
            const double tf = t->second;
            score += idf * tf * (kK1 + 1) / (tf + kK1 * (1 - kB + kB * d.length / std::max(1.0, avg_length_)));
        }
        if (score > 0) hits.push_back({i, score});
    }
    std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.score > b.score || (a.score == b.score && a.passage < b.passage); });
    if (hits.size() > k) hits.resize(k);
    return hits;
}

}  // namespace sl
