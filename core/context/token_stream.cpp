#include "core/context/token_stream.h"

#include <algorithm>

#include "core/util/error.h"

namespace sl {

const char* to_string(SpanKind k) {
    switch (k) {
        case SpanKind::Template: return "template";
        case SpanKind::Marker: return "marker";
        case SpanKind::Text: return "text";
        case SpanKind::Visual: return "visual";
    }
    return "?";
}

const ProvenanceSpan* TokenStream::span_at(int64_t pos) const {
    if (pos < 0 || spans.empty() || pos >= spans.back().end) return nullptr;
    auto it = std::upper_bound(spans.begin(), spans.end(), pos,
                               [](int64_t p, const ProvenanceSpan& s) { return p < s.end; });
    return it == spans.end() ? nullptr : &*it;
}

std::pair<size_t, size_t> TokenStream::spans_in(int64_t begin, int64_t end) const {
    auto lo = std::upper_bound(spans.begin(), spans.end(), begin,
                               [](int64_t p, const ProvenanceSpan& s) { return p < s.end; });
    auto hi = std::lower_bound(lo, spans.end(), end, [](const ProvenanceSpan& s, int64_t p) { return s.begin < p; });
    if (begin >= end) hi = lo;
    return {static_cast<size_t>(lo - spans.begin()), static_cast<size_t>(hi - spans.begin())};
}

std::vector<int64_t> TokenStream::tokens_per_source() const {
    std::vector<int64_t> n(sources.size(), 0);
    for (const auto& s : spans)
        if (s.source >= 0 && static_cast<size_t>(s.source) < n.size()) n[static_cast<size_t>(s.source)] += s.end - s.begin;
    return n;
}

TokenStream TokenStream::clipped(int64_t n) const {
    n = std::clamp<int64_t>(n, 0, static_cast<int64_t>(tokens.size()));
    TokenStream t;
    t.sources = sources;
    t.tokens.assign(tokens.begin(), tokens.begin() + n);
    for (const auto& s : spans) {
        if (s.begin >= n) break;
        t.spans.push_back(s);
        t.spans.back().end = std::min(s.end, n);
    }
    for (const auto& u : units) {
        if (u.begin >= n) break;
        t.units.push_back(u);
        t.units.back().end = std::min(u.end, n);
    }
    t.prefix_tokens = n;
    return t;
}

void TokenStream::check() const {
    int64_t at = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
        const auto& s = spans[i];
        if (s.begin != at || s.end <= s.begin)
            throw Error("token stream: span " + std::to_string(i) + " covers [" + std::to_string(s.begin) + ", " +
                        std::to_string(s.end) + "), expected to start at " + std::to_string(at));
        if (s.kind != SpanKind::Template &&
            (s.source < 0 || static_cast<size_t>(s.source) >= sources.size() || s.unit < 0 ||
             static_cast<size_t>(s.unit) >= units.size()))
            throw Error("token stream: span " + std::to_string(i) + " names a source or unit that does not exist");
        at = s.end;
    }
    if (at != static_cast<int64_t>(tokens.size()))
        throw Error("token stream: spans cover " + std::to_string(at) + " of " + std::to_string(tokens.size()) +
                    " tokens");
    if (prefix_tokens < 0 || prefix_tokens > static_cast<int64_t>(tokens.size()))
        throw Error("token stream: prefix of " + std::to_string(prefix_tokens) + " tokens exceeds the stream");
}

}  // namespace sl
