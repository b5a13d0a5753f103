// One long context as the engine reads it: token ids plus, for every token, where it came from.
// Provenance is stored as run-length spans (one per marker, text block or visual), not per token.
// The first `prefix_tokens` tokens (chat-template opening, instructions and the documents) are the
// same for every question, so their KV cache can be prefilled once, saved and reused; a question is
// appended after them as tokens of its own (ContextBuilder::question_tokens).
//
// Plain data: copyable, movable, no Qt. Readers may share a const TokenStream across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/document/document.h"

namespace sl {

// What a span of tokens is.
enum class SpanKind : uint8_t {
    Template,  // chat-template text and instructions: no source
    Marker,    // a unit marker such as "[R-intro.pdf p. 12]": belongs to the unit, no block
    Text,      // a text block of the unit (body, title, note, OCR, subtitle, transcript...)
    Visual,    // image-patch tokens of a visual (vision models only)
};

const char* to_string(SpanKind k);

// Tokens [begin, end) of the stream and their source. For Template spans every index is -1.
struct ProvenanceSpan {
    int64_t begin = 0;
    int64_t end = 0;
    SpanKind kind = SpanKind::Template;
    int source = -1;   // index into TokenStream::sources
    int unit = -1;     // index into TokenStream::units
    int block = -1;    // Text: index of the block in its doc::Unit::blocks; Visual: in visuals
    doc::SourceRef ref;  // document id, unit index, block bbox or time range (empty for Template)
};

// A document in the stream.
struct StreamSource {
    std::string id;     // doc::Document::id
    std::string path;   // where the file was read from
    std::string name;   // file name, as markers and citations show it
    doc::DocumentKind kind = doc::DocumentKind::Pdf;
};

// A unit (page, slide, segment, image) in the stream: tokens [begin, end), marker included.
struct StreamUnit {
    int source = 0;         // index into sources
    int unit = 0;           // doc::Unit::index
    doc::UnitKind kind = doc::UnitKind::Page;
    std::string locator;    // doc::full_locator: "R-intro.pdf p. 12"
    std::optional<doc::TimeRange> time;
    int64_t begin = 0, end = 0;
};

struct TokenStream {
    std::vector<int32_t> tokens;
    std::vector<ProvenanceSpan> spans;  // ordered, contiguous, covering [0, tokens.size())
    std::vector<StreamSource> sources;
    std::vector<StreamUnit> units;      // ordered by position
    int64_t prefix_tokens = 0;          // identical for every question (== tokens.size() after build)

    // The span holding token `pos`, or null when pos is outside the stream. O(log spans).
    const ProvenanceSpan* span_at(int64_t pos) const;
    // Indices of the spans overlapping [begin, end), in order (empty when none).
    std::pair<size_t, size_t> spans_in(int64_t begin, int64_t end) const;
    // Tokens per source (index into sources).
    std::vector<int64_t> tokens_per_source() const;
    // The first n tokens (n <= size): spans and units clipped at n (a unit cut by n keeps its
    // tokens before n), sources kept; prefix_tokens = n.
    TokenStream clipped(int64_t n) const;
    // Throws sl::Error naming the first broken invariant (spans not contiguous, indices out of range).
    void check() const;
};

}  // namespace sl
