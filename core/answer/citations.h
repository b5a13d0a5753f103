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
};

// The answer in `c` (text, steps, marks) with citations over `c.stream()`; `tok` decodes snippets.
Answer cite(const SelectionCollector& c, const Tokenizer& tok, const CiteOptions& options = {});

// Byte ranges [begin, end) of the sentences of `text`: split after . ! ? followed by white space
// (not after "e.g."-like abbreviations or list numbers), and at line breaks that end a paragraph,
// follow closing punctuation or precede a list item; a line break inside a sentence (the model
// wrapping its text) does not split. White space trimmed; empty ones skipped.
std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text);

}  // namespace sl
