// Audio -> timed transcript segments with a Whisper model: faster-whisper's sequential long-form
// algorithm (WhisperModel.generate_segments with its temperature fallback, no VAD, optional word
// timestamps),
// on core/whisper's encoder and greedy or beam-search decoder.
//
//   features = log-mel of the audio + 160 zeros (faster-whisper's padding); content = n / 160
//   frames seek = 0; while seek < content:
//     window = features[seek : seek + 3000], zero-padded to 3000 frames; encode
//     prompt = [<|startofprev|> + the last 223 tokens of earlier segments] + <|startoftranscript|>
//              (+ <|lang|><|transcribe|> for multilingual models) (+ <|notimestamps|>)
//     decode (greedy or beam search) with timestamp rules, again at higher temperatures while the
//     result fails the fallback's checks (compression ratio, log-probability); skip the window (seek += its size) when
//     the no-speech probability > no_speech_threshold and the average log-probability <
//     log_prob_threshold cut the tokens at each pair of consecutive timestamps into segments [t0,
//     t1) (window time + 0.02 s per timestamp step); seek to the last complete pair, or past the
//     window when it ends on a single timestamp or holds none
//
// Features come in two passes over the audio (log_mel_max, then log_mel_window per window), so
// with an AudioSource memory is bounded by one window (~1 MB of samples, ~1 MB of features) plus
// the model's per-window scratch (~30 MB for tiny), whatever the length. Runs on the calling
// thread, loops spread over the caller's pool; `progress` is called on that thread after each
// window.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/whisper/whisper_model.h"
#include "core/whisper/whisper_tokenizer.h"
#include "core/whisper/word_timing.h"

namespace sl::whisper {

struct TranscribeOptions {
    // Multilingual models: the language code ("en", "de", ...); empty: detected on the first
    // window (faster-whisper's default). English-only models ignore it.
    std::string language;
    bool timestamps = true;
    // 1: greedy; more: beam search (beam_search.h; faster-whisper's default is 5, patience 1,
    // length penalty 1).
    int beam_size = 1;
    float patience = 1.0f;
    float length_penalty = 1.0f;
    bool condition_on_previous_text = true;
    float no_speech_threshold = 0.6f;
    float log_prob_threshold = -1.0f;
    // faster-whisper's fallback (generate_with_fallback): a window is decoded at each temperature
    // in turn until the result passes: its compression ratio (sampling.h) at most
    // compression_ratio_threshold (<= 0: not checked) and its average log-probability at least
    // log_prob_threshold, or the window looks silent (no-speech probability above the threshold
    // with a low log-probability). 0 decodes greedily or by beam search; above 0, best_of
    // sampled hypotheses (sampling.h, draws seeded by `seed`). When none passes, the best average
    // log-probability among those under the compression threshold (else among all) is kept.
    // Above prompt_reset_on_temperature the next window is not conditioned on the earlier text.
    // {0} alone: no fallback.
    std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    float compression_ratio_threshold = 2.4f;
    int best_of = 5;
    float prompt_reset_on_temperature = 0.5f;
    uint64_t seed = 0;
    float max_initial_timestamp = 1.0f;  // seconds
    // Word times from cross-attention (word_timing.h); as in faster-whisper, the segments' bounds
    // then follow their words and a window resumes after its last word.
    bool word_timestamps = false;
    // Text the first window is conditioned on, as if it had been said before (names, terms):
    // faster-whisper's initial_prompt, encoded as " " + the trimmed text.
    std::string initial_prompt;
    // After each window: (seconds of audio done, total seconds). Return false to stop early
    // (the segments so far are returned, with Transcript::canceled set).
    std::function<bool(double, double)> progress;
};

struct TranscriptSegment {
    double start = 0, end = 0;  // seconds from the start of the audio
    std::string text;           // as decoded, with its leading space
    std::vector<int> tokens;    // text and timestamp tokens of the segment
    double avg_logprob = 0;     // of the window's decoding
    float no_speech_prob = 0;   // of the window
    float temperature = 0;      // of the decoding kept (above 0: the fallback sampled it)
    double compression_ratio = 0;  // of the window's text
    std::vector<Word> words;    // with TranscribeOptions::word_timestamps
};

struct Transcript {
    std::vector<TranscriptSegment> segments;
    double duration = 0;             // seconds of audio
    int windows = 0;                 // 30 s windows decoded (skipped ones included)
    int fallbacks = 0;               // windows decoded again at a higher temperature
    std::string language = "en";     // the language transcribed
    float language_probability = 1;  // when detected
    bool canceled = false;
};

// `audio`: 16 kHz mono samples. English-only models transcribe in English; multilingual ones get
// the prompt <|startoftranscript|><|lang|><|transcribe|>, the language given or detected on the
// first window. Throws sl::Error for a language code the model does not know.
Transcript transcribe(const WhisperModel& model, const WhisperTokenizer& tokenizer,
                      std::span<const float> audio, const TranscribeOptions& options,
                      ThreadPool& pool);
// The same from a source read window by window (audio_source.h's access pattern): memory stays
// bounded by one window's samples and features, whatever the length.
Transcript transcribe(const WhisperModel& model, const WhisperTokenizer& tokenizer,
                      AudioSource& source, const TranscribeOptions& options, ThreadPool& pool);

}  // namespace sl::whisper
