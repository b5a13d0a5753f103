#include "core/library/library_codec.h"

#include <bit>
#include <charconv>
#include <cstring>

namespace sl::library_codec {

static_assert(std::endian::native == std::endian::little, "library blobs are little-endian");

namespace {

template <class T>
void put(std::vector<uint8_t>& out, T v) {
    const size_t at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

struct Reader {
    const uint8_t* p;
    size_t left;
    const std::string& file;
    const char* what;
    template <class T>
    T get() {
        T v;
        take(&v, sizeof(T));
        return v;
    }
    void take(void* dst, size_t n) {
        if (n > left)
            throw FormatError(file + ": a stored " + std::string(what) + " blob is truncated");
        std::memcpy(dst, p, n);
        p += n;
        left -= n;
    }
};

template <class E, size_t N>
E parse(const std::string& s, const E (&values)[N], const char* what, const std::string& file) {
    for (E v : values)
        if (s == to_string(v)) return v;
    throw FormatError(file + ": unknown " + std::string(what) + " '" + s + "' in the library");
}

}  // namespace

std::vector<uint8_t> encode_lines(const std::vector<doc::Span>& lines) {
    std::vector<uint8_t> out;
    for (const auto& l : lines) {
        put<uint32_t>(out, static_cast<uint32_t>(l.text.size()));
        out.insert(out.end(), l.text.begin(), l.text.end());
        put(out, l.bbox.x0);
        put(out, l.bbox.y0);
        put(out, l.bbox.x1);
        put(out, l.bbox.y1);
    }
    return out;
}

std::vector<doc::Span> decode_lines(const void* data, size_t size, const std::string& file) {
    std::vector<doc::Span> lines;
    Reader r{static_cast<const uint8_t*>(data), size, file, "block lines"};
    while (r.left) {
        doc::Span s;
        const auto n = r.get<uint32_t>();
        if (n > r.left) throw FormatError(file + ": a stored block lines blob is truncated");
        s.text.assign(reinterpret_cast<const char*>(r.p), n);
        r.p += n;
        r.left -= n;
        s.bbox.x0 = r.get<float>();
        s.bbox.y0 = r.get<float>();
        s.bbox.x1 = r.get<float>();
        s.bbox.y1 = r.get<float>();
        lines.push_back(std::move(s));
    }
    return lines;
}

std::vector<uint8_t> encode_spans(const std::vector<TokenSpan>& spans) {
    std::vector<uint8_t> out;
    out.reserve(spans.size() * 28);
    for (const auto& s : spans) {
        put(out, s.begin);
        put(out, s.end);
        put(out, s.unit);
        put(out, s.block);
        put(out, s.visual);
    }
    return out;
}

std::vector<TokenSpan> decode_spans(const void* data, size_t size, const std::string& file) {
    if (size % 28) throw FormatError(file + ": a stored provenance blob has a partial span");
    std::vector<TokenSpan> spans(size / 28);
    Reader r{static_cast<const uint8_t*>(data), size, file, "provenance"};
    for (auto& s : spans) {
        s.begin = r.get<int64_t>();
        s.end = r.get<int64_t>();
        s.unit = r.get<int32_t>();
        s.block = r.get<int32_t>();
        s.visual = r.get<int32_t>();
    }
    return spans;
}

std::string encode_ids(const std::vector<int64_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(ids[i]);
    }
    return s;
}

std::vector<int64_t> decode_ids(const std::string& s, const std::string& file) {
    const auto malformed = [&] {
        const std::string shown = s.size() > 64 ? s.substr(0, 64) + "..." : s;
        return FormatError(file + ": malformed id list '" + shown + "' in the library");
    };
    if (!s.empty() && s.back() == ',') throw malformed();  // "3,1," lost its last id
    std::vector<int64_t> ids;
    size_t at = 0;
    while (at < s.size()) {
        size_t end = s.find(',', at);
        if (end == std::string::npos) end = s.size();
        // The whole part must be one decimal int64: "", "-", "1-2", "--3" and values past the
        // int64 range are damage (std::stoll would throw its own exceptions or read a prefix).
        int64_t id = 0;
        const char* first = s.data() + at;
        const char* last = s.data() + end;
        const auto [ptr, ec] = std::from_chars(first, last, id);
        if (first == last || ec != std::errc() || ptr != last) throw malformed();
        ids.push_back(id);
        at = end + 1;
    }
    return ids;
}

doc::DocumentKind document_kind(const std::string& s, const std::string& file) {
    using K = doc::DocumentKind;
    static constexpr K kAll[] = {K::Pdf, K::Slides, K::Image, K::Video, K::Audio, K::Text};
    return parse(s, kAll, "document kind", file);
}

doc::UnitKind unit_kind(const std::string& s, const std::string& file) {
    using K = doc::UnitKind;
    static constexpr K kAll[] = {K::Page, K::Slide, K::Segment, K::Image, K::Section};
    return parse(s, kAll, "unit kind", file);
}

doc::BlockRole block_role(const std::string& s, const std::string& file) {
    using R = doc::BlockRole;
    static constexpr R kAll[] = {R::Title,    R::Body,       R::Note,      R::Ocr,
                                 R::Subtitle, R::Transcript, R::TableCell, R::Caption};
    return parse(s, kAll, "block role", file);
}

doc::VisualKind visual_kind(const std::string& s, const std::string& file) {
    using K = doc::VisualKind;
    static constexpr K kAll[] = {K::PageRender, K::Picture, K::Frame};
    return parse(s, kAll, "visual kind", file);
}

DocumentState document_state(const std::string& s, const std::string& file) {
    using S = DocumentState;
    static constexpr S kAll[] = {S::Ingesting, S::Ready, S::Failed};
    return parse(s, kAll, "document state", file);
}

KvCacheState kv_cache_state(const std::string& s, const std::string& file) {
    using S = KvCacheState;
    static constexpr S kAll[] = {S::Partial, S::Complete};
    return parse(s, kAll, "KV cache state", file);
}

}  // namespace sl::library_codec
