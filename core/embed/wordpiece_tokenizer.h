// BERT's uncased WordPiece tokenizer (all-MiniLM-L6-v2, bert-base-uncased), built from vocab.txt.
//
// encode(text) follows Hugging Face tokenizers' BertNormalizer + BertPreTokenizer + WordPiece +
// the [CLS] A [SEP] template, as sentence-transformers runs it:
//   0. the special tokens ([PAD] [UNK] [CLS] [SEP] [MASK]) written literally in the raw text are
//      matched first and become their ids (HF's added tokens, matched before normalization);
//   1. clean text: drop U+0000, U+FFFD, controls other than \t \n \r, Cf, Co, Cs; white space -> '
//   '
//      (invalid UTF-8 bytes count as U+FFFD, so they vanish);
//   2. CJK ideographs get a space on each side;
//   3. strip accents: NFD, then drop nonspacing marks (Mn);
//   4. lowercase, code point by code point;
//   5. split on white space; every punctuation character (ASCII punctuation or Unicode P*) is a
//      word of its own;
//   6. WordPiece: a word of more than 100 code points is [UNK]; otherwise greedy longest match
//      from the left, continuation pieces prefixed "##"; a word with any unmatched rest is [UNK];
//   7. [CLS] + the first max_tokens - 2 pieces + [SEP] (sentence-transformers truncates at 256).
// Unicode data: core/embed/bert_unicode.h.
//
// Immutable after construction; const member functions are safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sl {

class WordpieceTokenizer {
public:
    // Reads vocab.txt: one token per line, id = line number from 0 ("\r\n" accepted). Throws
    // IoError when it cannot be read, FormatError (naming the file and line) when it is empty, too
    // large (over 1M tokens or 64 MiB), has a duplicate token, or lacks [UNK] [CLS] [SEP] [PAD].
    static WordpieceTokenizer from_vocab_file(const std::filesystem::path& path);
    // The same checks on tokens held in memory; `origin` names them in errors.
    explicit WordpieceTokenizer(std::vector<std::string> vocab,
                                const std::string& origin = "<vocab>");

    // Ids of [CLS] text [SEP], at most max_tokens (>= 2) of them.
    std::vector<int32_t> encode(std::string_view text, size_t max_tokens = 256) const;
    // The pieces without [CLS]/[SEP] and without truncation.
    std::vector<int32_t> encode_pieces(std::string_view text) const;
    // Steps 1-4 on text without special tokens, as UTF-8 (for tests).
    std::string normalize(std::string_view text) const;

    size_t vocab_size() const { return vocab_.size(); }
    const std::string& token(int32_t id) const { return vocab_.at(static_cast<size_t>(id)); }
    // Id of a token, or -1.
    int32_t find(std::string_view token) const;

    int32_t cls_id() const { return cls_; }
    int32_t sep_id() const { return sep_; }
    int32_t unk_id() const { return unk_; }
    int32_t pad_id() const { return pad_; }

    static constexpr size_t kMaxWordChars = 100;

private:
    void normalize_into(std::string_view text, std::vector<uint32_t>& out) const;
    void wordpiece(const std::vector<uint32_t>& cps, size_t begin, size_t end, std::string& scratch,
                   std::vector<int32_t>& ids) const;
    void encode_plain(std::string_view text, std::vector<int32_t>& ids) const;

    std::vector<std::string> vocab_;
    std::unordered_map<std::string, int32_t> ids_;
    struct Special {
        std::string text;
        int32_t id;
    };
    std::vector<Special> specials_;
    int32_t cls_ = -1, sep_ = -1, unk_ = -1, pad_ = -1;
};

}  // namespace sl
