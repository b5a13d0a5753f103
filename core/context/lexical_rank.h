// Lexical relevance of passages to a query (Okapi BM25 over lowercase word tokens). The fast,
// model-free preselection of which parts of a library a question is about: it ranks pages, slides
// and video segments before (or while) the long context is prefilled.
// Immutable after construction; rank() is thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sl {

class LexicalIndex {
public:
    // Indexes `passages` (UTF-8). Word tokens: runs of letters/digits (ASCII case-folded; other
    // bytes >= 0x80 kept as part of words), stop words of English dropped.
    explicit LexicalIndex(const std::vector<std::string>& passages);

    struct Hit {
        size_t passage;
        double score;
    };
    // The best `k` passages for `query`, best first; passages sharing no word with it are left out.
    std::vector<Hit> rank(std::string_view query, size_t k) const;

    size_t size() const { return docs_.size(); }

    // The word tokens of `text` as the index sees them.
    static std::vector<std::string> words(std::string_view text);

private:
    struct Doc {
        std::unordered_map<std::string, int> tf;
        int length = 0;
    };
    std::vector<Doc> docs_;
    std::unordered_map<std::string, int> df_;
    double avg_length_ = 0;
};

}  // namespace sl
