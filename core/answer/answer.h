// An answer with its citations: what citations.h makes from the engine's block selections and
// verify.h checks. Plain data, free of Qt; copyable; reports (app/common/report_*) and the chat
// store read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/document/document.h"

namespace sl {

// A place the answer drew on: one unit (page, slide, segment) of one document, and the region in
// it that received the attention.
struct Citation {
    int number = 0;              // 1-based: order of first use in the answer, unused ones last
    int unit = -1;               // TokenStream::units index
    std::string locator;         // "R-intro.pdf p. 12", "Deck.pptx slide 4", "Lecture.mp4 00:41:23"
    std::string path;            // the document's file
    doc::DocumentKind kind = doc::DocumentKind::Pdf;
    doc::SourceRef ref;          // document id, unit index, union bbox of the region / time range
    double mass = 0;             // attention mass over the whole answer (Σ steps, layers, groups)
    double share = 0;            // mass / mass on all documents over the answer
    int64_t begin = 0, end = 0;  // token range of the region in the stream
    std::string snippet;         // quoted words from the most attended part (short)
    std::string text;            // the region's text, one KV block wider each side (what verification reads)
    // How well the unit supports the answer (verify.h: the best over the answer's sentences of
    // the unit's whole text), and the fused rank score the citations are ordered by
    // (citations.h: attention mass fused with support).
    double lexical = 0;
    std::optional<double> semantic;
    double score = 0;
};

// One citation backing one sentence, and how well its text supports the sentence.
struct Support {
    int citation = -1;               // index into Answer::citations
    double mass = 0;                 // attention mass while the sentence was generated
    double lexical = 0;              // content words of the sentence found in the source, 0..1
    std::optional<double> semantic;  // cosine of sentence and source embeddings, when available
    bool verified = false;           // verify() ran on it
    bool weak = false;               // flagged: the text does not back the sentence well
};

// One unit the citation ranking considered, with its signals (for evaluation: how often each
// signal alone would have put the right place first).
struct RankedSource {
    std::string path;
    int unit_index = 0;                     // doc::Unit::index
    std::optional<doc::TimeRange> time;
    double mass = 0;                        // attention mass over the answer
    double lexical = 0;                     // best lexical support of a sentence
    double bm25 = 0;                        // Σ over sentences of the best passage's BM25 (the lexical signal)
    std::optional<double> semantic;         // best cosine with a sentence
    double question = 0;                    // relevance to the question (the ranking's fused score)
    double score = 0;                       // fused
};

struct AnswerSentence {
    size_t begin = 0, end = 0;       // bytes of Answer::text (trailing white space excluded)
    std::vector<Support> supports;   // strongest first
};

struct Answer {
    std::string question;
    std::string text;                       // as generated
    std::vector<AnswerSentence> sentences;  // cover the text's sentences in order
    std::vector<Citation> citations;        // by number (citations[i].number == i + 1)
    double document_mass = 0;               // Σ mass on document tokens over the answer
    int steps = 0;                          // decode steps observed
    // Why generation ended: "eos", "stop string", "max tokens" (then the text was cut back to its
    // last sentence end: `cut`), "repetition" (a repeating loop was stopped), "cancelled".
    std::string stop_reason;
    bool cut = false;
    std::vector<RankedSource> ranking;      // the considered units, best fused first (may be empty)

    // The text with inline markers before each supported sentence's final punctuation:
    // "Fit it with lm() [1]." -- weak supports as "[2?]".
    std::string with_markers() const;
    // The numbered sources, one per line: "[1] R-intro.pdf p. 12 — “...snippet...”" (+ "(weak)"
    // when every sentence it supports flagged it).
    std::string sources_text() const;
    // Whether citation i supports any sentence, and whether all its supports are weak.
    bool used(size_t i) const;
    bool weak(size_t i) const;
};

}  // namespace sl
