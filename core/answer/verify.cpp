#include "core/answer/verify.h"

#include <cmath>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/context/lexical_rank.h"
#include "core/util/error.h"

namespace sl {

namespace {

// Folds plural endings so "models" matches "model" and "boxes" "box".
std::string fold(std::string w) {
    if (w.size() > 4 && w.compare(w.size() - 3, 3, "ies") == 0) return w.substr(0, w.size() - 3) + "y";
    if (w.size() > 4 && (w.compare(w.size() - 3, 3, "ses") == 0 || w.compare(w.size() - 3, 3, "xes") == 0))
        return w.substr(0, w.size() - 2);
    if (w.size() > 3 && w.back() == 's' && w[w.size() - 2] != 's') w.pop_back();
    return w;
}

}  // namespace

double lexical_support(std::string_view sentence, std::string_view source) {
    std::unordered_set<std::string> want;
    for (auto& w : LexicalIndex::words(sentence)) want.insert(fold(std::move(w)));
    if (want.empty()) return 0;
    std::unordered_map<std::string, int> have;
    for (auto& w : LexicalIndex::words(source)) ++have[fold(std::move(w))];
    // Weight of a word: longer words carry more meaning than short ones ("lm" vs "coefficients"
    // both count, numbers too); a gentle log weight, so one long word cannot decide alone.
    double total = 0, found = 0;
    for (const auto& w : want) {
        const double weight = std::log(2.0 + static_cast<double>(w.size()));
        total += weight;
        if (have.count(w)) found += weight;
    }
    return total > 0 ? found / total : 0;
}

double cosine(std::span<const float> a, std::span<const float> b) {
    if (a.size() != b.size())
        throw Error("cosine: embeddings of different sizes (" + std::to_string(a.size()) + " and " +
                    std::to_string(b.size()) + ")");
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0;
}

void verify(Answer& answer, Embedder* embedder, const VerifyOptions& o) {
    std::unordered_map<int, std::vector<float>> source_emb;
    for (auto& s : answer.sentences) {
        const std::string_view sentence = std::string_view(answer.text).substr(s.begin, s.end - s.begin);
        std::vector<float> sentence_emb;
        for (auto& sup : s.supports) {
            if (sup.citation < 0 || static_cast<size_t>(sup.citation) >= answer.citations.size()) continue;
            const Citation& c = answer.citations[static_cast<size_t>(sup.citation)];
            sup.lexical = lexical_support(sentence, c.text);
            if (embedder) {
                if (sentence_emb.empty()) sentence_emb = embedder->embed(sentence);
                auto it = source_emb.find(sup.citation);
                if (it == source_emb.end()) it = source_emb.emplace(sup.citation, embedder->embed(c.text)).first;
                sup.semantic = cosine(sentence_emb, it->second);
            }
            sup.weak = sup.lexical < o.lexical_strong && (!sup.semantic || *sup.semantic < o.semantic_strong);
            sup.verified = true;
        }
    }
}

}  // namespace sl
