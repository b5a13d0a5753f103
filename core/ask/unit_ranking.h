// Question-aware ranking of every unit (page, slide, transcript segment, frame) of a prepared
// library context: Okapi BM25 of the unit's text (lexical_rank.h) fused with the best cosine of the
// question's and the unit's passage embeddings (unit_embeddings.h, all-MiniLM-L6-v2) by reciprocal
// rank fusion, score = 1 / (k + rank by BM25) + 1 / (k + rank by cosine), k = 60 (the constant of
// Cormack et al.; not tuned here). A unit sharing no word with the question still ranks by meaning;
// without an embedder the score is BM25's alone.
//
// The ask flow fills its context budget by this rank over the whole library, not per document, and
// appends the best units a saved library prefix has not read (ask.h).
//
// Threading: runs on the calling thread (the embedder too).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sl {

class Tokenizer;
class UnitEmbeddings;
struct PreparedContext;

struct UnitRanking {
    std::vector<double> score;                          // per PreparedContext unit; 0: no signal
    std::vector<double> bm25;                           // raw BM25 (0: no shared word)
    std::vector<double> cosine;                         // best passage cosine (0 without embeddings)
    std::vector<std::string> texts;                     // each unit's text (markers and visuals left out)
    std::vector<std::vector<std::vector<float>>> passages;  // each unit's passage embeddings (may be empty)
    std::vector<size_t> order;                          // unit indices, best first
    bool semantic = false;
};

// `embeddings` null: lexical only. `progress(done, total)` reports passages embedded (first use of
// a library embeds every unit once; later questions read the cache).
UnitRanking rank_units(const PreparedContext& p, std::string_view question, const Tokenizer& tok,
                       UnitEmbeddings* embeddings, const std::function<void(size_t, size_t)>& progress = {},
                       double rrf_k = 60);

}  // namespace sl
