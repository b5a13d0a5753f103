#include "core/ask/visual_context.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "core/ask/visual_cache.h"
#include "core/model/llama_model.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"

namespace sl {

namespace {

std::optional<double> frame_time(const doc::Visual& v) {
    return v.kind == doc::VisualKind::Frame ? v.timestamp : std::nullopt;
}

// `img` resampled to w x h (the encoder's own resampler, so the result is what preprocessing
// would make of it).
RgbImage resized(const RgbImage& img, int w, int h) {
    std::vector<float> src(img.rgb.size());
    for (size_t i = 0; i < src.size(); ++i) src[i] = img.rgb[i];
    const std::vector<float> dst = resample(src.data(), img.width, img.height, 3, w, h);
    RgbImage out;
    out.width = w;
    out.height = h;
    out.rgb.reserve(dst.size());
    for (const float x : dst) out.rgb.push_back(static_cast<uint8_t>(std::clamp(std::lround(x), 0L, 255L)));
    return out;
}

std::string visual_name(const doc::Document& d, const doc::Unit& u, const doc::Visual& v) {
    std::string s = d.path + " (" + doc::to_string(u.kind) + " " + (u.label.empty() ? std::to_string(u.index + 1) : u.label);
    if (v.timestamp) s += ", frame at " + std::to_string(static_cast<long long>(*v.timestamp)) + " s";
    return s + ")";
}

}  // namespace

void add_page_renders(std::vector<doc::Document>& docs) {
    constexpr int kDpi = 150;
    for (auto& d : docs) {
        if (d.kind != doc::DocumentKind::Pdf) continue;
        for (auto& u : d.units) {
            if (u.kind != doc::UnitKind::Page || u.width <= 0 || u.height <= 0) continue;
            if (std::any_of(u.visuals.begin(), u.visuals.end(),
                            [](const doc::Visual& v) { return v.kind == doc::VisualKind::PageRender; }))
                continue;
            const bool turned = u.rotation % 180 != 0;
            doc::Visual v;
            v.kind = doc::VisualKind::PageRender;
            v.width = static_cast<int>(std::lround((turned ? u.height : u.width) * kDpi / 72.0));
            v.height = static_cast<int>(std::lround((turned ? u.width : u.height) * kDpi / 72.0));
            if (v.width <= 0 || v.height <= 0) continue;
            v.locator = "page:" + std::to_string(u.index) + "@" + std::to_string(kDpi) + "dpi";
            u.visuals.push_back(std::move(v));
        }
    }
}

bool visual_enters_as_image(const doc::Unit& u, const doc::Visual& v) {
    if (v.kind != doc::VisualKind::PageRender) return true;
    size_t chars = 0;
    for (const auto& b : u.blocks)
        if (b.role != doc::BlockRole::Ocr) chars += b.text.size();
    return chars < static_cast<size_t>(kImagedPageChars);
}

std::pair<int, int> visual_encode_size(const doc::Visual& v, int render_px) {
    if (v.width <= 0 || v.height <= 0 || render_px <= 0) return {0, 0};
    const int longest = std::max(v.width, v.height);
    if (longest <= render_px) return {v.width, v.height};
    const double s = static_cast<double>(render_px) / longest;
    return {std::max(1, static_cast<int>(std::lround(v.width * s))), std::max(1, static_cast<int>(std::lround(v.height * s)))};
}

int visual_tile_edge(const VisionConfig& config, int render_px) {
    if (config.gemma3() || config.longest_edge <= 0 || config.image_size <= 0) return -1;
    const int tiles = std::max(1, (render_px + config.image_size - 1) / config.image_size);
    return std::min(config.longest_edge, tiles * config.image_size);
}

ImageSequence image_sequence_for(const VisionModel& model, const Tokenizer& tokenizer) {
    return [&model, &tokenizer](const doc::Document&, const doc::Unit& u, const doc::Visual& v,
                                int render_px) -> VisualSequence {
        if (!visual_enters_as_image(u, v)) return {};
        const auto [w, h] = visual_encode_size(v, render_px);
        if (w <= 0) return {};
        try {
            const ImageTokenLayout layout =
                image_token_layout(model.config, w, h, frame_time(v), visual_tile_edge(model.config, render_px));
            std::vector<LayoutTile> tiles;
            VisualSequence out;
            out.tokens = layout_tokens(layout, tokenizer, nullptr, nullptr, &tiles);
            for (const LayoutTile& t : tiles)
                if (t.tile < layout.plan.rows * layout.plan.cols)  // the global tile shows all of it
                    out.regions.push_back({t.begin, t.end, tile_region(layout.plan, t.tile)});
            return out;
        } catch (const Error&) {
            return {};  // a size the tower cannot plan: the visual's OCR text stands for it
        }
    };
}

VisualEmbeddings::VisualEmbeddings(const TokenStream& ts, std::span<const doc::Document> docs, const AskVision& vision,
                                   VisionEncoder& encoder, const Tokenizer& tokenizer, int render_px, const VisualCache* cache)
    : vision_(vision), encoder_(encoder), render_px_(render_px), width_(encoder.config().n_embd_out), cache_(cache) {
    std::map<std::string, const doc::Document*> by_id;
    for (const auto& d : docs) by_id.emplace(d.id, &d);
    for (size_t si = 0; si < ts.spans.size(); ++si) {
        ProvenanceSpan sp = ts.spans[si];
        if (sp.kind != SpanKind::Visual || sp.end <= sp.begin) continue;
        // A visual placed with tile regions is several spans in a row: one visual.
        while (si + 1 < ts.spans.size() && ts.spans[si + 1].kind == SpanKind::Visual && ts.spans[si + 1].source == sp.source &&
               ts.spans[si + 1].unit == sp.unit && ts.spans[si + 1].block == sp.block && ts.spans[si + 1].begin == sp.end)
            sp.end = ts.spans[++si].end;
        const auto first = ts.tokens.begin() + sp.begin, last = ts.tokens.begin() + sp.end;
        if (std::find(first, last, LlamaModel::kEmbeddingToken) == last) continue;
        if (sp.source < 0 || static_cast<size_t>(sp.source) >= ts.sources.size())
            throw Error("visual context: an image span names no document");
        const auto d = by_id.find(ts.sources[static_cast<size_t>(sp.source)].id);
        if (d == by_id.end()) throw Error("visual context: the document of an image span is not loaded");
        Slot s;
        s.begin = sp.begin;
        s.end = sp.end;
        s.doc = d->second;
        for (const auto& u : s.doc->units)
            if (u.index == sp.ref.unit) s.unit = &u;
        if (!s.unit || sp.block < 0 || static_cast<size_t>(sp.block) >= s.unit->visuals.size())
            throw Error("visual context: " + s.doc->path + " has no visual " + std::to_string(sp.block) + " in unit " +
                        std::to_string(sp.ref.unit));
        s.visual = &s.unit->visuals[static_cast<size_t>(sp.block)];
        std::tie(s.width, s.height) = visual_encode_size(*s.visual, render_px);
        const ImageTokenLayout layout = image_token_layout(vision.model->config, std::max(1, s.width), std::max(1, s.height),
                                                           frame_time(*s.visual), visual_tile_edge(vision.model->config, render_px));
        std::vector<std::pair<int64_t, int64_t>> runs;
        const std::vector<int32_t> ids = layout_tokens(layout, tokenizer, &s.rows, &runs);
        if (!std::equal(ids.begin(), ids.end(), first, last))
            throw Error("visual context: the image positions of " + visual_name(*s.doc, *s.unit, *s.visual) +
                        " were planned for another layout");
        for (const auto& [b, e] : runs) runs_.emplace_back(s.begin + b, s.begin + e);
        s.n_rows = layout.n_embeddings;
        slots_.push_back(std::move(s));
    }
}

bool VisualEmbeddings::any_in(int64_t pos, int64_t n) const {
    for (const Slot& s : slots_)
        if (s.begin < pos + n && s.end > pos) return true;
    return false;
}

void VisualEmbeddings::encode(Slot& s) {
    const auto t0 = std::chrono::steady_clock::now();
    const VisualKey key{vision_.identity, s.doc->id, s.unit->index, static_cast<int>(s.visual - s.unit->visuals.data()),
                        s.width, s.height, visual_tile_edge(encoder_.config(), render_px_)};
    if (cache_ && !vision_.identity.empty()) {
        if (auto rows = cache_->load(key, s.n_rows, width_)) {
            s.embeddings = std::move(*rows);
            s.done = true;
            ++from_cache_;
            return;
        }
    }
    std::optional<RgbImage> img;
    std::string why;
    try {
        if (vision_.pixels) img = vision_.pixels(*s.doc, *s.unit, *s.visual, render_px_);
    } catch (const Error& e) {
        why = e.what();
    }
    const bool blank = !img || img->width <= 0 || img->height <= 0 ||
                       img->rgb.size() != static_cast<size_t>(img->width) * static_cast<size_t>(img->height) * 3;
    if (blank) {
        notes_.push_back(visual_name(*s.doc, *s.unit, *s.visual) + ": no pixels" + (why.empty() ? "" : " (" + why + ")") +
                         "; read as a blank image");
        img.emplace();
        img->width = s.width;
        img->height = s.height;
        img->rgb.assign(static_cast<size_t>(s.width) * static_cast<size_t>(s.height) * 3, 128);
    }
    if (img->width != s.width || img->height != s.height) img = resized(*img, s.width, s.height);
    EncodedImage enc = encode_image(encoder_, *img, visual_tile_edge(encoder_.config(), render_px_));
    const int64_t n_rows = static_cast<int64_t>(enc.embeddings.size()) / std::max(1, enc.width);
    for (const int32_t r : s.rows)
        if (r >= n_rows || enc.width != width_)
            throw Error("visual context: the encoding of " + visual_name(*s.doc, *s.unit, *s.visual) +
                        " does not match its planned positions");
    s.embeddings = std::move(enc.embeddings);
    VisualCache::round_to_f16(s.embeddings);  // what the cache gives back: the same rows either way
    if (cache_ && !vision_.identity.empty() && !blank && n_rows == s.n_rows) cache_->store(key, s.embeddings, width_);
    s.done = true;
    ++encoded_;
    encode_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void VisualEmbeddings::fill(int64_t pos, int n, float* out) {
    const size_t w = static_cast<size_t>(width_);
    std::fill(out, out + static_cast<size_t>(n) * w, 0.0f);
    for (Slot& s : slots_) {
        if (s.end <= pos) {  // passed: its rows are in the KV cache now
            std::vector<float>().swap(s.embeddings);
            continue;
        }
        if (s.begin >= pos + n) break;
        if (!s.done) encode(s);
        const int64_t lo = std::max(pos, s.begin), hi = std::min(pos + n, s.end);
        for (int64_t p = lo; p < hi; ++p) {
            const int32_t r = s.rows[static_cast<size_t>(p - s.begin)];
            if (r >= 0) std::memcpy(out + static_cast<size_t>(p - pos) * w, s.embeddings.data() + static_cast<size_t>(r) * w, w * sizeof(float));
        }
    }
}

void prefill_stream(Session& session, std::span<const int32_t> tokens, int64_t pos0, VisualEmbeddings* vis,
                    bool bidirectional, size_t chunk, const std::function<void()>& before,
                    const std::function<void(size_t)>& after) {
    chunk = std::max<size_t>(chunk, 1);
    std::vector<float> rows;
    std::vector<std::pair<int64_t, int64_t>> runs;  // within the chunk
    for (size_t i = 0; i < tokens.size();) {
        if (before) before();
        size_t n = std::min(chunk, tokens.size() - i);
        const int64_t a = pos0 + static_cast<int64_t>(i);
        runs.clear();
        if (vis && bidirectional) {
            for (const auto& [b, e] : vis->bidirectional()) {
                if (e <= a) continue;
                const int64_t z = a + static_cast<int64_t>(n);
                if (b >= z) break;
                if (e > z) {  // the chunk would cut this run: end before it, or take all of it
                    n = static_cast<size_t>(b > a ? b - a : e - a);
                    if (b > a) break;
                }
                runs.emplace_back(std::max(b, a) - a, e - a);
            }
            n = std::min(n, tokens.size() - i);  // a run past the tokens (not the stream's) is cut
            for (auto& r : runs) r.second = std::min<int64_t>(r.second, static_cast<int64_t>(n));
        }
        const std::span<const int32_t> part = tokens.subspan(i, n);
        if (vis && vis->any_in(a, static_cast<int64_t>(n))) {
            rows.resize(n * static_cast<size_t>(vis->width()));
            vis->fill(a, static_cast<int>(n), rows.data());
            session.prefill(part, rows.data(), runs);
        } else {
            session.prefill(part);
        }
        i += n;
        if (after) after(i);
    }
}

}  // namespace sl
