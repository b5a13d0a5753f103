// Text <-> token ids for GGUF models. A Tokenizer is built from a plain TokenizerData (filled from
// the GGUF metadata by the model loader; this module does not read files).
//
// Thread-safety: a constructed Tokenizer is immutable; encode/decode may run concurrently on any
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sl {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,      // <|im_start|>, <s>: matched in text only with parse_special
    UserDefined = 4,  // added tokens: always matched in text, decoded as their literal text
    Unused = 5,
    Byte = 6,  // SentencePiece byte fallback <0xAB>
};

// Everything a tokenizer needs, as the GGUF metadata states it (keys in comments).
struct TokenizerData {
    std::string name;                  // for error messages, e.g. the model file's path
    std::string model;                 // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama"
    std::string pre;                   // tokenizer.ggml.pre: "smollm", "llama-bpe", "qwen2", ...
    std::vector<std::string> tokens;   // tokenizer.ggml.tokens, as stored (GPT-2: byte-mapped)
    std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (TokenType); empty: all Normal
    std::vector<float> scores;         // tokenizer.ggml.scores (SentencePiece); may be empty
    std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right", by rank (BPE)
    int32_t bos_id = -1;               // tokenizer.ggml.bos_token_id; -1: none
    int32_t eos_id = -1;               // tokenizer.ggml.eos_token_id
    int32_t eot_id = -1;               // tokenizer.ggml.eot_token_id (end of turn, if separate)
    int32_t unk_id = -1;               // tokenizer.ggml.unknown_token_id
    int32_t pad_id = -1;               // tokenizer.ggml.padding_token_id
    bool add_bos = false;              // tokenizer.ggml.add_bos_token
    bool add_eos = false;              // tokenizer.ggml.add_eos_token
    bool add_space_prefix = false;     // tokenizer.ggml.add_space_prefix (SentencePiece)
    std::string chat_template;         // tokenizer.chat_template (Jinja text), may be empty
};

class Tokenizer {
public:
    // Builds the tokenizer `data.model` names: "gpt2" (byte-level BPE with the pre-tokenizer
    // `data.pre` names) or "llama" (SentencePiece BPE with scores and byte fallback). Throws
    // FormatError naming data.name when the model or pre-tokenizer is unknown, or the vocabulary is
    // inconsistent.
    static std::unique_ptr<Tokenizer> create(TokenizerData data);

    virtual ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Token ids of `text` (any bytes; invalid UTF-8 is kept byte by byte). add_special: prepend
    // BOS / append EOS as add_bos / add_eos say. parse_special: control tokens written in the
    // text ("<|im_start|>") become their ids; otherwise they are encoded as plain text.
    // User-defined tokens are always matched. Byte-level BPE: bytes the vocabulary cannot
    // represent at all are dropped, as Hugging Face tokenizers does (SmolLM2 lacks 21 of the 256
    // byte tokens). SentencePiece: characters without a token become <0xXX> byte tokens, else unk.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special = false,
                                        bool parse_special = false) const = 0;

    // The raw bytes token `id` stands for (control tokens: their text, e.g. "<|im_end|>";
    // SentencePiece: U+2581 as a space, <0xXX> as that byte).
    // The bytes may be part of a UTF-8 sequence that the next tokens complete; see
    // unicode::utf8_complete_prefix for streaming. Throws Error when id is out of range.
    std::string_view piece(int32_t id) const;

    // Concatenated pieces. Control, unknown and unused tokens are included only with
    // render_special. The result may hold invalid UTF-8 (models can emit it). SentencePiece with
    // add_space_prefix: the first token's leading space is dropped (as HF's decoder does).
    std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

    // The token whose stored text is exactly `text` (e.g. "<|im_end|>"), or -1.
    int32_t find_token(std::string_view text) const;

    int32_t vocab_size() const { return static_cast<int32_t>(data_.tokens.size()); }
    TokenType type(int32_t id) const;
    bool is_control(int32_t id) const;  // Control, Unknown or Unused: not shown as text
    // Tokens that end a generated turn: EOS, EOT and the template's end marker where present.
    bool is_end_of_generation(int32_t id) const;
    const std::string& token_text(int32_t id) const;  // as stored in the vocabulary
    const TokenizerData& data() const { return data_; }

protected:
    explicit Tokenizer(TokenizerData data);

    // A run of plain text (id == -1) or one special token (text is its match in the input).
    struct Segment {
        std::string_view text;
        int32_t id;
    };
    // Splits `text` at the special tokens it contains (leftmost, then longest match): user-
    // defined tokens always, control tokens with parse_special.
    std::vector<Segment> split_special(std::string_view text, bool parse_special) const;
    // Prepends BOS / appends EOS around `ids` as add_bos / add_eos say.
    void add_special_tokens(std::vector<int32_t>& ids) const;

    // Every derived constructor fills pieces_[id]: the decoded bytes of each token.
    TokenizerData data_;
    std::vector<std::string> pieces_;
    std::unordered_map<std::string_view, int32_t> ids_;  // token text -> id; views into data_
    bool strip_leading_space_ = false;  // decode drops the first token's leading space (SPM)

private:
    void check_id(int32_t id) const;

    // Special tokens by first byte, longest first: the candidates of split_special.
    std::vector<int32_t> special_by_byte_[256];
    std::vector<int32_t> end_of_generation_;
};

}  // namespace sl
