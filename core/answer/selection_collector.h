// Records, while an answer is generated, which KV blocks the MSA index branch selected for each
// generated token and the attention mass they received (summed over sparse layers and KV groups),
// and which answer text each token produced. citations.h turns the record into citations.
//
// Excluded at record time (they say nothing about sources): the local block of the query (always
// forced), block 0 when `exclude_block0` (the attention sink; ContextBuilder pads the opening so it
// holds no document text), and blocks lying wholly after the document prefix (question, answer).
//
// Use:
//   SelectionCollector c(stream, msa.config().block_size);
//   c.attach(msa);                       // sets msa's observer
//   session.prefill(question_tokens);    // not recorded (prefill calls have n_tokens > 1)
//   session.generate(opt, [&](std::string_view t) { c.on_text(t); ...; return true; });
//   c.detach(msa);
//
// Threading: observe() runs on the thread that drives the session (MSA calls the observer there),
// as does on_text(); the collector is not otherwise synchronized. The TokenStream must outlive it;
// detach before the collector dies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/attention/msa_attention.h"
#include "core/context/token_stream.h"

namespace sl {

class SelectionCollector {
public:
    SelectionCollector(const TokenStream& stream, int block_size, bool exclude_block0 = true);

    // Sets msa's observer and turns on its per-token mass (MsaConfig::token_mass); detach undoes both.
    void attach(MsaAttention& msa);
    static void detach(MsaAttention& msa);

    // One decode step's selections of one layer (the MsaAttention observer). Calls with
    // n_tokens != 1 (prefill) are ignored.
    void observe(int layer, const AttentionCall& call, const std::vector<Selection>& selections);

    // Generated text as the session streams it; marks how many steps had run when it came.
    void on_text(std::string_view piece);

    struct Step {
        int64_t pos = 0;                                // the query's position
        std::vector<std::pair<int32_t, float>> blocks;  // (KV block, mass), ascending block ids
        // Parallel to blocks: the mass per token of the block (block_size entries, summed like
        // the block's), or empty when the attention recorded none (Selection::token_mass).
        std::vector<std::vector<float>> tokens;
    };
    // Text up to byte text_end was streamed after steps_end steps.
    struct Mark {
        size_t text_end = 0;
        size_t steps_end = 0;
    };

    const std::vector<Step>& steps() const { return steps_; }
    const std::vector<Mark>& marks() const { return marks_; }
    const std::string& text() const { return text_; }
    const TokenStream& stream() const { return stream_; }
    int block_size() const { return block_size_; }

    // Mean mass per KV block over the recorded steps (blocks never selected: 0), indexed by block
    // id: a probe's record of it is the positional baseline citations can subtract (citations.h).
    std::vector<float> mean_block_mass() const;

    void clear();
    // Keeps the first `bytes` of the text (an answer cut back to a sentence end, or a repetition
    // loop removed); the marks past it are dropped. Steps are kept (citations read only the steps
    // of the text that remains).
    void truncate_text(size_t bytes);

private:
    const TokenStream& stream_;
    int block_size_;
    bool exclude_block0_;
    std::vector<Step> steps_;
    std::vector<Mark> marks_;
    std::string text_;
};

}  // namespace sl
