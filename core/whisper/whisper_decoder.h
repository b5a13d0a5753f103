// Whisper's text decoder, one token at a time, and greedy decoding as CTranslate2's
// Whisper.generate(beam_size=1) does it without timestamps (faster-whisper's
// without_timestamps=True path at temperature 0).
//
// State per audio window (owned by the WhisperDecoder):
//   cross_kv[L]  (n_audio_ctx, 2d)  K | V of the encoder output, computed once by set_audio()
//   self_k[L], self_v[L]  (beams, n_text_ctx, d)  the self-attention cache, filled by feed() /
//                         step() (one sequence) or step_beams()
// ~2 * n_layers * (n_audio_ctx * 2d + n_text_ctx * d) floats: 10 MB for tiny.
//
// Threading: a WhisperDecoder belongs to one caller at a time; its calls run on the calling thread
// and spread their loops over the caller's pool. The WhisperModel must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/whisper/whisper_model.h"

namespace sl::whisper {

class WhisperDecoder {
public:
    explicit WhisperDecoder(const WhisperModel& model);

    // Binds the encoder output (n_audio_ctx, d) of a window: computes every layer's
    // cross-attention keys and values, and empties the text cache.
    void set_audio(std::span<const float> encoder_out, ThreadPool& pool);
    // Empties the text cache (keeps the audio), back to a single sequence.
    void reset() {
        pos_ = 0;
        n_seq_ = 1;
    }
    // Tokens fed since the last reset.
    int position() const { return pos_; }
    const WhisperModel& model() const { return model_; }

    // Feeds `token` at the next position; logits (n_vocab) get the scores of the token after it.
    // Throws sl::Error when the token is outside the vocabulary, the cache is full (n_text_ctx
    // tokens) or set_audio() was not called.
    void step(int token, std::vector<float>& logits, ThreadPool& pool);
    // Feeds several tokens at once (a prompt): the same results as step() on each in turn, with
    // the linear layers run as one GEMM over all of them. logits gets (logit_rows.size(),
    // n_vocab): the scores after tokens[logit_rows[i]] (indices into `tokens`, each < size).
    void feed(std::span<const int> tokens, std::span<const int> logit_rows,
              std::vector<float>& logits, ThreadPool& pool);
    // Beam search: set_beams(n) copies the (single) sequence fed so far into n beams;
    // step_beams() feeds one token to each beam (all at the same position) in one batch, logits
    // (n, n_vocab); reorder_beams(origins) makes beam b a copy of beam origins[b]. feed() needs a
    // single sequence again: reset() returns to it.
    void set_beams(int n);
    void step_beams(std::span<const int> tokens, std::vector<float>& logits, ThreadPool& pool);
    void reorder_beams(std::span<const int> origins);
    int beams() const { return n_seq_; }

    // While set, feed() also keeps the cross-attention scores (scaled q.k, before the softmax) of
    // the model's alignment heads: cross_scores() is (n_alignment_heads, tokens fed, n_audio_ctx)
    // for the tokens of the last feed() call.
    void set_capture_alignment(bool on) { capture_ = on; }
    const std::vector<float>& cross_scores() const { return captured_; }

private:
    void forward(std::span<const int> tokens, std::span<const int> logit_rows,
                 std::vector<float>& logits, ThreadPool& pool, bool beams);

    const WhisperModel& model_;
    int pos_ = 0;
    int n_seq_ = 1;  // sequences in the self-attention cache (beams)
    bool have_audio_ = false;
    bool capture_ = false;
    std::vector<float> captured_;
    std::vector<std::vector<float>> cross_kv_, self_k_, self_v_;
    // Scratch of feed(), grown to the largest batch seen.
    std::vector<float> x_, h_, qkv_, ctx_, tmp_, ffn_;
};

struct GreedyOptions {
    int max_length = 448;         // prompt + generated tokens, as CTranslate2's max_length
    bool suppress_blank = true;   // suppress_ids_begin at the first generated token
    bool suppress_tokens = true;  // the model's suppress_ids at every step ([-1])
    // Timestamp mode (CTranslate2's ApplyTimestampRules, on when the prompt does not end in
    // <|notimestamps|>): the first token is a timestamp no later than
    // max_initial_timestamp_index (50: 1.00 s); timestamps come in pairs (except right before
    // <|endoftext|>) and never decrease; a timestamp is forced when the timestamps' total
    // probability beats every text token's; <|notimestamps|> is never generated.
    int max_initial_timestamp_index = 50;
    // Beam search (beam_search.h): beams, CTranslate2's patience (hypotheses to collect =
    // round(beam_size * patience)) and length penalty (score / length^penalty).
    int beam_size = 1;
    float patience = 1.0f;
    float length_penalty = 1.0f;
};

struct GreedyResult {
    std::vector<int> tokens;  // generated, without the prompt and without <|endoftext|>
    double sum_logprob = 0;   // of the generated tokens (end-of-text included when reached)
    bool reached_eot = false;
    float no_speech_prob = 0;  // softmax of the raw logits after <|startoftranscript|>, at
                               // the no-speech token (0 when the prompt has no sot)
};

// Greedy decoding after `prompt` (e.g. {sot, no_timestamps}); the decoder must hold the window's
// audio (set_audio). Generates at most min(max_length / 2, max_length - (prompt.size() - 1))
// tokens, as CTranslate2 does, stopping at <|endoftext|>. Timestamp rules apply when the prompt's
// last token is not <|notimestamps|>.
GreedyResult greedy_decode(WhisperDecoder& decoder, std::span<const int> prompt,
                           const GreedyOptions& options, ThreadPool& pool);

// The rules greedy and beam search apply to a step's logits before choosing, in CTranslate2's
// order: the suppression lists (suppress_ids; suppress_ids_begin when nothing is generated yet),
// then the timestamp rules when `timestamps`. `generated`: the tokens sampled so far after the
// prompt.
void apply_logit_rules(std::span<float> logits, std::span<const int> generated, bool timestamps,
                       const GreedyOptions& options, const WhisperModel& model);

// Feeds `prompt` in one batch after reset(): logits (n_vocab) of the token after it, and the
// no-speech probability (softmax of the raw logits after <|startoftranscript|>; 0 without it).
void feed_prompt(WhisperDecoder& decoder, std::span<const int> prompt, std::vector<float>& logits,
                 float& no_speech_prob, ThreadPool& pool);

// Language identification (multilingual models): the decoder fed <|startoftranscript|> alone, the
// softmax of its logits over the model's language tokens. Returns (token id, probability), most
// likely first; the decoder must hold the window's audio (set_audio) and is reset. Throws
// sl::Error when the model has no language tokens.
std::vector<std::pair<int, float>> detect_language(WhisperDecoder& decoder, ThreadPool& pool);

}  // namespace sl::whisper
