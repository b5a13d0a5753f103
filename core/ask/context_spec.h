// What a saved context (a KV cache file of the library) was made of, typed: the attention it was
// prefilled with, and either a question's context (its token prefix hash) or the library's own
// prefill (its size budget). Stored as the settings column of the library's kv_caches table
// through encode()/decode(): one encoding, so a record is found by comparing specs, not by
// searching its text.
//
// encode() writes the keys in a fixed order with only the fields that apply, the same text the
// flow wrote before this type existed (records saved then still match). Plain data; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sl {

struct ContextSpec {
    bool msa = true;              // false: dense attention (no selections, top_k / scoring unused)
    int block = 128;              // KV page / MSA block
    int top_k = 16;               // MSA blocks per selection
    std::string scoring;          // MSA mode name (parse_msa_scoring), "native"; empty: not recorded
    int remap_window = 0;         // > 0: positions remapped with this exact window
    bool library_prefill = false; // the library's own whole context (ask reads it when it can)
    int64_t max_tokens = 0;       // library prefill: the context's size budget
    std::string prefix_sha256;    // sha256 of the context's tokens (int32, little-endian)
    // The vision tower whose embeddings fill the image positions and the render size
    // (AskVision::identity "@" render px); empty: no image positions (text-only contexts).
    std::string vision;

    std::string encode() const;
    // nullopt when `text` is not a spec (other JSON, malformed): such a record is not ours.
    static std::optional<ContextSpec> decode(std::string_view text);

    bool operator==(const ContextSpec&) const = default;
};

}  // namespace sl
