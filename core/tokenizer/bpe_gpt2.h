// GPT-2 byte-level BPE helpers that tests check directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sl::bpe {

// GPT-2's bytes_to_unicode(): the printable code point that stands for byte `b` in a byte-level
// vocabulary ('!'..'~', '¡'..'¬', '®'..'ÿ' map to themselves; the other 68 bytes to U+0100..).
uint32_t byte_to_cp(uint8_t b);

// The inverse: the byte that code point `cp` stands for, or -1 when it stands for none.
int byte_from_cp(uint32_t cp);

// "hello world" -> "helloĠworld": each byte replaced by the UTF-8 of byte_to_cp.
std::string bytes_to_vocab_text(std::string_view bytes);

// The inverse of bytes_to_vocab_text; code points that stand for no byte are kept as UTF-8.
std::string vocab_text_to_bytes(std::string_view text);

}  // namespace sl::bpe
