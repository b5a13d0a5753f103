// Citations from the engine's own selections. Each generated token's selected KV blocks, weighted
// by the attention mass they received, are mapped through the stream's provenance to units (a
// block's mass is shared among the units whose tokens it holds, in proportion; tokens without a
// source, and unit markers, take their part with them: attending to "[Deck.pptx slide 4]" is not
// reading the slide). Per unit the masses over the whole answer rank the places the
// answer drew on (adjacent KV blocks of the same unit merge into one citation, whose region is the
// union of the boxes / time ranges of its most attended blocks). Then each sentence of the answer
// gets the citations that received the most mass while that sentence was generated.
//
// Attention mass has a positional part that does not depend on the question (small models look at
// the last pages before the question whatever they are asked); CiteOptions::baseline removes it.
//
// With CiteOptions::evidence, the ranking fuses attention with how well each unit's text supports
// each sentence (see there), so a supporting page the answer read outranks one it only looked at.
//
// Token i's evidence is the selection made by the query that produced it (the forward pass of
// token i-1), so the text streamed after step s is attributed to step s-1.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <string>

#include "core/answer/answer.h"
#include "core/answer/selection_collector.h"

namespace sl {

class Tokenizer;
class Embedder;

// What the answer could have read of one unit of the stream: its text and, when the library has
// them, its passages' sentence embeddings (core/ask/unit_embeddings.h). Indexed like
// TokenStream::units.
struct UnitEvidence {
    std::string text;
    std::vector<std::string> passage_texts;    // the text cut into passages (empty: the whole text is one)
    std::vector<std::vector<float>> passages;  // their embeddings (may be empty)
    double question = 0;                       // relevance to the question (unit_ranking.h's fused score; 0: none)
};

struct CiteOptions {
    int max_citations = 6;           // places ranked overall
    double min_share = 0.04;         // of the answer's document mass, to be ranked at all
    int max_per_sentence = 2;
    double sentence_min_share = 0.2; // of a sentence's document mass, to cite a place there
    double region_share = 0.5;       // KV blocks with >= this fraction of the unit's top block form the region
    int snippet_chars = 200;
    // Positional baseline per KV block (SelectionCollector::mean_block_mass of a content-free probe
    // decoded after the same prefix): subtracted from every step's mass (floored at 0) so that
    // blocks attended for being near the question or early in the context, whatever is asked, do
    // not outrank the blocks this answer read. Null: raw masses.
    const std::vector<float>* baseline = nullptr;

    // Fused source ranking (set `evidence`): every unit of the stream is a candidate, and a
    // sentence's sources are ranked by reciprocal rank fusion (1 / (rrf_k + rank), rrf_k = 60, not
    // tuned) of three signals: the attention mass the unit received while the sentence was
    // generated, the sentence's BM25 score against the unit's best passage (rare words count
    // more; lexical_rank.h) and the best cosine of their embeddings. The support shown and gated
    // on is verify.h's lexical_support of the best passage and that cosine. A unit backs a sentence when it is
    // among the best max_per_sentence and attention read it there (sentence_min_share) or its
    // text supports the sentence (lexical_strong / semantic_strong); supports are verified here
    // (weak when the text does not reach either threshold). The citations are numbered by a
    // fusion over the whole answer of four signals: mass overall, the sentences' BM25 (summed) and
    // cosine (best), and the unit's relevance to the question (UnitEvidence::question: a person
    // asking "where is X" wants the place about X, and a small model's answer may wander from
    // it). [1] is the best source; a source no sentence cites is listed when attention read it
    // (min_share) or it is among the 3 most relevant to the question ("read, not cited").
    // With by_question the places are numbered by their relevance to the question instead, the
    // fusion breaking ties and ordering the places without one: measured on tests/eval (77
    // questions, SmolLM2-135M), a 135M model's answer wanders from the place asked about more
    // often than the question ranking misses it, and the fusion put the right place first in 34%
    // where the question ranking alone did in 66% (the same on either half of the questions).
    // Without evidence: attention mass alone, as before (then run verify()).
    const std::vector<UnitEvidence>* evidence = nullptr;
    Embedder* embedder = nullptr;
    double rrf_k = 60;
    bool by_question = true;
    double lexical_strong = 0.35;
    double semantic_strong = 0.45;
};

// The answer in `c` (text, steps, marks) with citations over `c.stream()`; `tok` decodes snippets.
Answer cite(const SelectionCollector& c, const Tokenizer& tok, const CiteOptions& options = {});

// Byte ranges [begin, end) of the sentences of `text`: split after . ! ? followed by white space
// (not after "e.g."-like abbreviations or list numbers), and at line breaks that end a paragraph,
// follow closing punctuation or precede a list item; a line break inside a sentence (the model
// wrapping its text) does not split. White space trimmed; empty ones and Markdown code-fence lines
// alone ("```", "```r") skipped.
std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text);

}  // namespace sl
