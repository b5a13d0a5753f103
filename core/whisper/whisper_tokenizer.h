// Whisper's tokenizer: GPT-2's byte-level BPE (50257 text tokens, the GPT-2 regex pre-tokenizer)
// plus Whisper's special tokens (<|endoftext|>, <|startoftranscript|>, languages, tasks,
// <|notimestamps|>, 1501 timestamps <|0.00|>..<|30.00|>), built on core/tokenizer's BPE.
//
// Files of a CTranslate2 Whisper directory: vocabulary.txt (one token per line, byte-mapped as
// GPT-2 stores them; the line number is the id) or, in newer conversions, vocabulary.json (a JSON
// array of the same), and tokenizer.json (Hugging Face; only model.merges is read from it). Every
// id >= eot is a control token: decode_text() leaves them out, encode() never produces them.
//
// Immutable after open(); encode/decode may run concurrently on any thread.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/tokenizer.h"

namespace sl::whisper {

class WhisperTokenizer {
public:
    // Reads `dir`/vocabulary.txt (else vocabulary.json) and `dir`/tokenizer.json. n_vocab: the
    // model's vocabulary size (the file must list exactly that many tokens), eot its <|endoftext|>
    // id. Throws IoError / FormatError naming the file.
    static WhisperTokenizer open(const std::filesystem::path& dir, int n_vocab, int eot);

    // Text tokens of `text`, as GPT-2 / Hugging Face encode it, except that special tokens
    // written in the text ("<|endoftext|>") stay text: encode() never returns an id >= eot.
    std::vector<int> encode(std::string_view text) const;
    // The text of the tokens below eot, in order (the others skipped). May hold invalid UTF-8
    // when the ids end in the middle of a character.
    std::string decode_text(std::span<const int> ids) const;
    // A token as the vocabulary stores it ("Ġthe", "<|0.00|>").
    const std::string& token_text(int id) const { return bpe_->token_text(id); }
    int size() const { return bpe_->vocab_size(); }
    // The id of the token stored as `token` ("<|en|>"), or -1.
    int find(std::string_view token) const;

private:
    std::shared_ptr<const Tokenizer> bpe_;
    int eot_ = 0;
};

}  // namespace sl::whisper
