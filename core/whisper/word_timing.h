// Word times from cross-attention (the alignment of openai-whisper's timing.py, as CTranslate2's
// Whisper.align and faster-whisper's find_alignment / add_word_timestamps compute it):
//
//   1. the decoder reads <|startoftranscript|>.. <|notimestamps|> text <|endoftext|> in one batch,
//      keeping the scaled q.k scores of the alignment heads over the window's audio positions;
//   2. per head: scores cut to the window's content (num_frames / 2 positions), softmax over
//      them, standardized over the token axis (mean 0, variance 1, no epsilon), median filter of
//      width 7 along time (reflecting at the ends); then the mean over heads;
//   3. dynamic time warping over -(those rows: <|notimestamps|> and each text token) gives a
//      monotonic (token, time) path; a token starts where the path first reaches it, at 0.02 s
//      per audio position;
//   4. tokens grouped into words (a new word at a leading space, a punctuation mark, or a special
//      token; byte-level pieces joined until they decode to whole UTF-8 characters); a word's
//      probability is the mean of its tokens' (softmax over the text vocabulary).
// Then faster-whisper's heuristics: words longer than twice the median word duration (at most
// 0.7 s) are cut at sentence ends and after pauses, punctuation merges into the neighbouring
// word, and a segment's bounds and its words' bounds are reconciled.
//
// Runs on the calling thread, loops over the caller's pool; the decoder must hold the window's
// audio (set_audio) and is left reset.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/whisper/whisper_decoder.h"
#include "core/whisper/whisper_tokenizer.h"

namespace sl::whisper {

struct WordTiming {
    std::string word;           // with its leading space, punctuation merged in
    std::vector<int> tokens;    // empty for a mark merged into its neighbour (word empty too)
    double start = 0, end = 0;  // seconds from the window's start
    float probability = 0;
};

// Steps 1 to 4 for `text_tokens` (ids < eot) decoded after `sot_sequence` ({sot} or {sot, lang,
// transcribe}) in a window of `num_frames` mel frames (<= 3000).
std::vector<WordTiming> find_alignment(WhisperDecoder& decoder, const WhisperTokenizer& tokenizer,
                                       std::span<const int> sot_sequence,
                                       std::span<const int> text_tokens, int num_frames,
                                       ThreadPool& pool, int median_filter_width = 7);

// One timed word of a transcript segment (seconds from the start of the audio).
struct Word {
    std::string text;
    double start = 0, end = 0;
    float probability = 0;
};

// A window's segment as the transcriber cut it, before word timing.
struct TimedSegment {
    double start = 0, end = 0;  // adjusted to the words by add_word_timestamps
    std::vector<int> tokens;    // text and timestamp tokens
    std::vector<Word> words;    // filled by add_word_timestamps
};

// faster-whisper's add_word_timestamps for the segments of one window starting at `window_seek`
// (mel frames): aligns their text tokens together, applies the heuristics, fills each segment's
// words and adjusts its bounds. `last_speech_timestamp`: the end of the speech before this window
// (seconds); returns the new one.
double add_word_timestamps(std::vector<TimedSegment>& segments, WhisperDecoder& decoder,
                           const WhisperTokenizer& tokenizer, std::span<const int> sot_sequence,
                           int window_seek, int num_frames, double last_speech_timestamp,
                           ThreadPool& pool);

}  // namespace sl::whisper
