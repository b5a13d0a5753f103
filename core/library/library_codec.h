// Encodings of the library's small structured columns. Internal to core/library.
// Blobs are little-endian (checked at compile time); decoders validate sizes and throw
// FormatError naming `file` on malformed input.
//   lines blob:  per line: u32 text bytes, text, 4 x f32 bbox (x0 y0 x1 y1)
//   tokens blob: i32 per token
//   spans blob:  per span: i64 begin, i64 end, i32 unit, i32 block, i32 visual (28 bytes)
//   id lists:    decimal ids joined by ',' ("3,1,7"; "" for none)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/document/document.h"
#include "core/library/library.h"

namespace sl::library_codec {

std::vector<uint8_t> encode_lines(const std::vector<doc::Span>& lines);
std::vector<doc::Span> decode_lines(const void* data, size_t size, const std::string& file);

std::vector<uint8_t> encode_spans(const std::vector<TokenSpan>& spans);
std::vector<TokenSpan> decode_spans(const void* data, size_t size, const std::string& file);

std::string encode_ids(const std::vector<int64_t>& ids);
std::vector<int64_t> decode_ids(const std::string& s, const std::string& file);

// Enumerations from the text of their to_string(); FormatError naming `file` when unknown.
doc::DocumentKind document_kind(const std::string& s, const std::string& file);
doc::UnitKind unit_kind(const std::string& s, const std::string& file);
doc::BlockRole block_role(const std::string& s, const std::string& file);
doc::VisualKind visual_kind(const std::string& s, const std::string& file);
DocumentState document_state(const std::string& s, const std::string& file);
KvCacheState kv_cache_state(const std::string& s, const std::string& file);

}  // namespace sl::library_codec
