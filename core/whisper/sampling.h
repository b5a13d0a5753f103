// Temperature sampling for faster-whisper's fallback (WhisperModel.generate_with_fallback at a
// temperature above 0), as CTranslate2's generate(beam_size=1, num_hypotheses=best_of,
// sampling_topk=0, sampling_temperature=T) runs it: `best_of` sequences decoded side by side (the
// decoder's beams: one batch per step), each next token drawn from softmax(logits / T) after the
// logit rules (whisper_decoder.h: suppression and timestamp rules); a hypothesis's score is the
// sum of its tokens' log-probabilities under the unscaled distribution (<|endoftext|> included
// when reached); the best score divided by length^length_penalty wins. The draws come from `rng`,
// so a seed gives the same result every time (CTranslate2's own random stream is not reproduced).
//
// And the compression ratio faster-whisper's fallback checks (get_compression_ratio): the UTF-8
// text's length over its zlib-compressed length (level 6, zlib.compress's default); repeated
// text (a decoding loop) compresses well and scores high.
//
// Threading: as the decoder (the caller's thread, loops over the caller's pool).
#pragma once

#include <random>
#include <span>
#include <string_view>

#include "core/whisper/whisper_decoder.h"

namespace sl::whisper {

// options.beam_size is ignored; best_of >= 1; temperature > 0. Throws sl::Error otherwise.
GreedyResult sample_decode(WhisperDecoder& decoder, std::span<const int> prompt,
                           const GreedyOptions& options, float temperature, int best_of,
                           std::mt19937_64& rng, ThreadPool& pool);

// len(text) / len(zlib.compress(text)); 0 for empty text.
double compression_ratio(std::string_view text);

}  // namespace sl::whisper
