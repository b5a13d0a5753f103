// Hand-written pre-tokenizers: split text into the "words" that BPE merges within, exactly as the
// Hugging Face regexes do (no regex engine: std::regex is slow and has no \p{..} classes).
// Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace sl {

enum class PreTokenizer {
    // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    Gpt2,
    // Digits(individual_digits) then the GPT-2 pattern on what lies between digits (SmolLM,
    // StarCoder): every \p{N} is a word of its own.
    DigitsGpt2,
    // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    //          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    Llama3,
    // Qwen2: the Llama 3 pattern with \p{N} one digit at a time.
    Qwen2,
    // GPT-4o's o200k pattern (tokenizer.ggml.pre "gpt-4o", MiniMax-M2/M3's "minimax-m2"): words
    // split by letter case, contractions kept with their word, numbers 1-3 digits, '/' after
    // punctuation:
    //   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
    //   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
    //   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
    O200k,
};

// Appends the words of `text` to `words`, in order; their concatenation is `text` (every byte,
// invalid UTF-8 included: a byte that starts no valid sequence is a character of class Other).
// The views point into `text`.
void pretokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words);

}  // namespace sl
