// Answers that end well: watches the answer as it streams and stops a repetition loop (small
// models fall into them at long budgets: the same phrase or line over and over), and, when the
// token budget ran out mid-sentence, says where the last sentence ended so the answer can be cut
// back to it (and say that it was cut).
//
// Loop rule (not tuned on the evaluation's questions): the last `ngram` words (8) already occurred
// twice before in the answer, i.e. a third repeat; or the same non-empty line (10+ bytes) a third
// time. The loop's text is cut back to the end of the sentence before the second occurrence.
//
// Threading: one guard per answer, on the thread that streams it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sl {

class AnswerGuard {
public:
    explicit AnswerGuard(int ngram = 8) : ngram_(ngram) {}

    // Appends a streamed piece; false when a loop was found (stop generating).
    bool on_text(std::string_view piece);

    bool looped() const { return looped_; }
    // Bytes of the streamed text to keep: all of it, or up to the end of the sentence before the
    // loop's second occurrence (never 0 when the text has a sentence before the loop).
    size_t keep() const { return keep_; }
    const std::string& text() const { return text_; }

    // Bytes of `text` up to and including its last sentence end (". ", "! ", "? ", a closing
    // punctuation at the end, or a paragraph break); text.size() when it ends a sentence already,
    // 0 when it has none.
    static size_t last_sentence_end(std::string_view text);

private:
    int ngram_;
    std::string text_;
    bool looped_ = false;
    size_t keep_ = 0;
};

}  // namespace sl
