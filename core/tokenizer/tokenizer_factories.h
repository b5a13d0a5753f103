// The concrete tokenizers behind Tokenizer::create (internal to core/tokenizer).
#pragma once

#include <memory>

#include "core/tokenizer/tokenizer.h"

namespace sl::detail {

// Byte-level BPE (tokenizer.ggml.model "gpt2"): bpe_gpt2.cpp.
std::unique_ptr<Tokenizer> make_bpe_gpt2(TokenizerData data);

// SentencePiece BPE with scores and byte fallback (tokenizer.ggml.model "llama"): spm.cpp.
std::unique_ptr<Tokenizer> make_spm(TokenizerData data);

}  // namespace sl::detail
