// Fast preselection of the parts of a long context that the prefill has not reached yet: when a
// question is asked before the library's progressive prefill finishes, the answer reads the
// prefilled prefix plus the units this picks for the question, placed after it (app::ask).
//
// Ranking: Okapi BM25 of each unit's text against the question (lexical_rank.h); with an
// Embedder (all-MiniLM-L6-v2), the cosine of the question's and the unit's embeddings is added
// (score = BM25 / best BM25 + cosine), computed for the best `semantic_pool` units by BM25 plus an
// even spread of the rest, so a unit sharing no word with the question can still be picked.
// Units are then taken best first while they fit `budget` tokens, and returned in context order.
//
// Pure functions of their inputs (the Embedder is called on the calling thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/context/context_builder.h"
#include "core/context/token_stream.h"

namespace sl {

class Tokenizer;
class Embedder;

struct Preselection {
    std::vector<size_t> units;       // indices into PreparedContext::units, in context order
    std::vector<double> scores;      // per picked unit, same order
    int64_t tokens = 0;              // their tokens
    size_t candidates = 0;           // units the prefix had not read (fully)
    bool semantic = false;           // an embedder took part
};

struct PreselectOptions {
    size_t semantic_pool = 96;       // units embedded (best by BM25, then spread over the rest)
    size_t embed_chars = 1200;       // text per unit given to the embedder
};

// The text blocks of a prepared unit, decoded (the marker and visuals left out).
std::string unit_text(const PreparedUnit& u, const Tokenizer& tok);

// Picks units of `p` not fully inside `prefix` (a stream of p clipped to what is prefilled:
// TokenStream::clipped) for `question` within `budget` tokens.
Preselection preselect_units(const PreparedContext& p, const TokenStream& prefix, std::string_view question,
                             int64_t budget, const Tokenizer& tok, Embedder* embedder = nullptr,
                             const PreselectOptions& options = {});

// What an answer read, for people: "31,744 of 78,379 prefilled library tokens (R-intro.pdf p. 1 -
// p. 40) and 5 units preselected for the question (R-intro.pdf p. 65, p. 88, ...); not read yet:
// 68 units". `ts` is the prefix followed by the preselected units; `n` tokens were prefilled of
// `total`.
std::string describe_reading(const TokenStream& ts, int64_t n, int64_t total, const Preselection& pre);

// 78379 -> "78,379".
std::string thousands(int64_t v);

}  // namespace sl
