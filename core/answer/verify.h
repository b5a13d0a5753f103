// Verification of citations: each (sentence, citation) pair is checked against the text of the
// cited region. Lexical support always: the share of the sentence's content words (stop words
// dropped, case folded, plural -s and -es folded) that occur in the source, weighted by how rare
// each word is in the source-side vocabulary (rare words count more). Semantic support when an
// Embedder is given: cosine similarity of the two embeddings. A pair is weak when neither reaches
// its threshold; weak citations are flagged (Support::weak, "[2?]" markers), never dropped.
//
// Threading: verify() calls the embedder on the calling thread; the Embedder need not be
// thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/answer/answer.h"

namespace sl {

// A sentence-embedding model (all-MiniLM-L6-v2 in core/embed plugs in here).
class Embedder {
public:
    virtual ~Embedder() = default;
    // A fixed-size embedding of `text` (any length; the model truncates). Same size every call.
    virtual std::vector<float> embed(std::string_view text) = 0;
    // One embedding per text, in order; equal to embed() of each (models batch them for speed).
    virtual std::vector<std::vector<float>> embed_many(std::span<const std::string> texts) {
        std::vector<std::vector<float>> out;
        out.reserve(texts.size());
        for (const auto& t : texts) out.push_back(embed(t));
        return out;
    }
    // Names the model (file caches of embeddings are kept per model).
    virtual std::string name() const { return "embedder"; }
};

struct VerifyOptions {
    double lexical_strong = 0.35;   // lexical support at or above: not weak
    double semantic_strong = 0.45;  // cosine at or above: not weak
};

// Lexical support of `sentence` by `source` in [0, 1]; 0 when the sentence has no content words.
double lexical_support(std::string_view sentence, std::string_view source);

// Cosine similarity; 0 when either vector is zero. Throws sl::Error when the sizes differ.
double cosine(std::span<const float> a, std::span<const float> b);

// Fills lexical / semantic / weak / verified of every support of `answer`.
void verify(Answer& answer, Embedder* embedder = nullptr, const VerifyOptions& options = {});

}  // namespace sl
