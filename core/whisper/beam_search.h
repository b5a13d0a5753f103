// Beam search as CTranslate2's BeamSearch runs it for Whisper.generate(beam_size > 1) (what
// faster-whisper does at temperature 0 by default, beam 5):
//   - the prompt is fed once; the first step expands only its one sequence; each step keeps
//     2 x beam_size candidates (best cumulative log-probability first; the rules of
//     apply_logit_rules applied per beam before its log-softmax);
//   - a candidate among the first beam_size that ends in <|endoftext|> (or reaches the last
//     step) becomes a finished hypothesis and its beam is refilled from the next candidates that
//     do not end; decoding stops once round(beam_size x patience) hypotheses are collected (or
//     at the last step; with length_penalty 0, as soon as the best beam finishes);
//   - hypotheses are ranked by cumulative log-probability / length^length_penalty.
// All beams step together through WhisperDecoder::step_beams (one GEMM per layer for all).
// Runs on the calling thread; the decoder must hold the window's audio and is left holding the
// beams (reset() before feeding another prompt).
#pragma once

#include <span>

#include "core/whisper/whisper_decoder.h"

namespace sl::whisper {

// options.beam_size >= 2 (1 runs greedy_decode). The result's sum_logprob is the best
// hypothesis' cumulative log-probability (its end token included when it has one).
GreedyResult beam_search(WhisperDecoder& decoder, std::span<const int> prompt,
                         const GreedyOptions& options, ThreadPool& pool);

// greedy_decode or beam_search, as options.beam_size says.
GreedyResult decode(WhisperDecoder& decoder, std::span<const int> prompt,
                    const GreedyOptions& options, ThreadPool& pool);

}  // namespace sl::whisper
