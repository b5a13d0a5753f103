#include "core/context/context_builder.h"

#include <algorithm>
#include <array>

#include "core/context/budget_planner.h"
#include "core/document/locator.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace sl {

namespace {

// Placeholders rendered through the chat template and cut out again; control bytes that no
// template writes and that survive |trim.
constexpr std::string_view kDocs = "\x01SL_DOCUMENTS\x01";
constexpr std::string_view kQuestion = "\x01SL_QUESTION\x01";

}  // namespace

int64_t PreparedUnit::tokens() const {
    int64_t n = 0;
    for (const auto& it : items) n += static_cast<int64_t>(it.tokens.size());
    return n;
}

int64_t PreparedContext::tokens_of_source(int source) const {
    int64_t n = 0;
    for (const auto& u : units)
        if (u.meta.source == source) n += u.tokens();
    return n;
}

ContextBuilder::ContextBuilder(const Tokenizer& tok, const ChatTemplate& chat, ContextOptions options)
    : tok_(tok), options_(std::move(options)) {
    const std::array<ChatMessage, 2> msgs{
        ChatMessage{"system", options_.instructions},
        ChatMessage{"user", std::string(kDocs) + "\n\n" + options_.question_label + std::string(kQuestion)}};
    const std::string r = chat.render(msgs, true);
    const size_t d = r.find(kDocs);
    const size_t q = d == std::string::npos ? d : r.find(kQuestion, d + kDocs.size());
    if (q == std::string::npos)
        throw Error("context builder: the chat template does not keep the documents before the question");
    head_ = r.substr(0, d);
    mid_ = r.substr(d + kDocs.size(), q - d - kDocs.size());
    tail_ = r.substr(q + kQuestion.size());
}

PreparedContext ContextBuilder::prepare(std::span<const doc::Document* const> docs) const {
    PreparedContext p;
    p.opening = tok_.encode(head_, false, true);
    if (options_.sink_block > 0 && static_cast<int>(p.opening.size()) < options_.sink_block) {
        const auto nl = tok_.encode("\n");
        const int32_t pad = nl.size() == 1 ? nl[0] : -1;
        if (pad >= 0) p.opening.resize(static_cast<size_t>(options_.sink_block), pad);
    }
    if (!options_.closing.empty() || options_.closing_block > 0) {
        p.closing = tok_.encode(options_.closing);
        const auto nl = tok_.encode("\n");
        if (nl.size() == 1 && static_cast<int>(p.closing.size()) < options_.closing_block)
            p.closing.resize(static_cast<size_t>(options_.closing_block), nl[0]);
    }
    p.question_reserve = static_cast<int64_t>(tok_.encode(mid_ + tail_, false, true).size());

    for (const doc::Document* d : docs) {
        if (!d) continue;
        const int src = static_cast<int>(p.sources.size());
        p.sources.push_back({d->id, d->path, doc::file_name(*d), d->kind});
        for (const auto& u : d->units) {
            PreparedUnit pu;
            pu.meta.source = src;
            pu.meta.unit = u.index;
            pu.meta.kind = u.kind;
            pu.meta.locator = doc::full_locator(*d, u);
            pu.meta.time = u.time;
            doc::SourceRef unit_ref{d->id, u.index, std::nullopt, u.time};

            PreparedItem marker;
            marker.kind = SpanKind::Marker;
            marker.tokens = tok_.encode("\n[" + pu.meta.locator + "]\n");
            marker.ref = unit_ref;
            pu.items.push_back(std::move(marker));

            for (size_t b = 0; b < u.blocks.size(); ++b) {
                const auto& blk = u.blocks[b];
                if (blk.text.empty()) continue;
                PreparedItem it;
                it.kind = SpanKind::Text;
                it.block = static_cast<int>(b);
                it.tokens = tok_.encode(blk.text.back() == '\n' ? blk.text : blk.text + "\n");
                it.ref = {d->id, u.index, blk.bbox, blk.time ? blk.time : u.time};
                if (blk.role == doc::BlockRole::Ocr && u.kind == doc::UnitKind::Segment && blk.time)
                    it.frame_time = blk.time->t0;
                pu.items.push_back(std::move(it));
            }
            for (size_t v = 0; v < u.visuals.size(); ++v) {
                const auto& vis = u.visuals[v];
                std::vector<int32_t> seq;
                std::vector<VisualRegion> regions;
                if (options_.image_sequence) {
                    VisualSequence vs = options_.image_sequence(*d, u, vis, options_.render_px);
                    seq = std::move(vs.tokens);
                    regions = std::move(vs.regions);
                } else if (options_.image_patches && options_.image_token >= 0) {
                    const int n = options_.image_patches(*d, u, vis, options_.render_px);
                    seq.assign(static_cast<size_t>(std::max(0, n)), options_.image_token);
                }
                if (seq.empty() && vis.kind != doc::VisualKind::Frame) continue;  // nothing to place or count
                PreparedItem it;
                it.kind = SpanKind::Visual;
                it.block = static_cast<int>(v);
                it.tokens = std::move(seq);
                it.ref = {d->id, u.index, vis.bbox, std::nullopt};
                // A region's box on the unit: within the visual's own box (a picture on a slide),
                // else the visual is the whole unit (a page render, a frame, an image file).
                const doc::BBox vb = vis.bbox.value_or(doc::BBox{0, 0, 1, 1});
                for (VisualRegion r : regions) {
                    if (r.begin < 0 || r.end <= r.begin || r.end > static_cast<int64_t>(it.tokens.size())) continue;
                    r.box = {vb.x0 + r.box.x0 * (vb.x1 - vb.x0), vb.y0 + r.box.y0 * (vb.y1 - vb.y0),
                             vb.x0 + r.box.x1 * (vb.x1 - vb.x0), vb.y0 + r.box.y1 * (vb.y1 - vb.y0)};
                    it.regions.push_back(r);
                }
                if (vis.timestamp) it.ref.time = doc::TimeRange{*vis.timestamp, *vis.timestamp};
                if (vis.kind == doc::VisualKind::Frame) it.frame_time = vis.timestamp.value_or(0.0);
                pu.items.push_back(std::move(it));
            }
            p.units.push_back(std::move(pu));
        }
    }
    return p;
}

namespace {

void push_tokens(TokenStream& ts, const std::vector<int32_t>& toks, ProvenanceSpan span) {
    if (toks.empty()) return;
    span.begin = static_cast<int64_t>(ts.tokens.size());
    ts.tokens.insert(ts.tokens.end(), toks.begin(), toks.end());
    span.end = static_cast<int64_t>(ts.tokens.size());
    ts.spans.push_back(std::move(span));
}

// Appends unit `ui` of p (its items kept by `keep`, all when keep is null or empty).
void push_unit(TokenStream& ts, const PreparedContext& p, size_t ui, const std::vector<bool>* keep) {
    const PreparedUnit& pu = p.units[ui];
    StreamUnit meta = pu.meta;
    meta.begin = static_cast<int64_t>(ts.tokens.size());
    const int unit_id = static_cast<int>(ts.units.size());
    for (size_t ii = 0; ii < pu.items.size(); ++ii) {
        if (keep && !keep->empty() && (ii >= keep->size() || !(*keep)[ii])) continue;
        const PreparedItem& it = pu.items[ii];
        ProvenanceSpan s;
        s.kind = it.kind;
        s.source = meta.source;
        s.unit = unit_id;
        s.block = it.block;
        s.ref = it.ref;
        if (it.regions.empty()) {
            push_tokens(ts, it.tokens, std::move(s));
            continue;
        }
        // A visual with tile regions: one span per tile (citing its part), the wrapper tokens
        // between them citing the whole visual.
        int64_t at = 0;
        auto piece = [&](int64_t b, int64_t e, std::optional<doc::BBox> box) {
            if (e <= b) return;
            ProvenanceSpan part = s;
            if (box) part.ref.bbox = box;
            push_tokens(ts, std::vector<int32_t>(it.tokens.begin() + b, it.tokens.begin() + e), std::move(part));
        };
        for (const VisualRegion& r : it.regions) {
            if (r.begin < at) continue;
            piece(at, r.begin, std::nullopt);
            piece(r.begin, r.end, r.box);
            at = r.end;
        }
        piece(at, static_cast<int64_t>(it.tokens.size()), std::nullopt);
    }
    meta.end = static_cast<int64_t>(ts.tokens.size());
    ts.units.push_back(std::move(meta));
}

}  // namespace

TokenStream ContextBuilder::assemble(const PreparedContext& p, const BudgetPlan* plan) const {
    if (plan && plan->keep.size() != p.units.size())
        throw Error("context builder: the budget plan was made for another set of documents");
    TokenStream ts;
    ts.sources = p.sources;
    push_tokens(ts, p.opening, {});
    for (size_t ui = 0; ui < p.units.size(); ++ui) {
        if (plan && (plan->keep[ui].empty() || !plan->keep[ui][0])) continue;
        push_unit(ts, p, ui, plan ? &plan->keep[ui] : nullptr);
    }
    push_tokens(ts, p.closing, {});
    ts.prefix_tokens = static_cast<int64_t>(ts.tokens.size());
    return ts;
}

void ContextBuilder::append(TokenStream& ts, const PreparedContext& p, std::span<const size_t> units,
                            const BudgetPlan* plan, bool closing) const {
    if (ts.sources.size() != p.sources.size())
        throw Error("context builder: appending units of another set of documents");
    for (size_t ui : units) {
        if (ui >= p.units.size()) throw Error("context builder: unit " + std::to_string(ui) + " out of range");
        const std::vector<bool>* keep = nullptr;
        if (plan && ui < plan->keep.size() && !plan->keep[ui].empty() && plan->keep[ui][0]) keep = &plan->keep[ui];
        push_unit(ts, p, ui, keep);
    }
    if (closing) push_tokens(ts, p.closing, {});
    ts.prefix_tokens = static_cast<int64_t>(ts.tokens.size());
}

TokenStream ContextBuilder::build(std::span<const doc::Document* const> docs) const {
    return assemble(prepare(docs), nullptr);
}

std::vector<int32_t> ContextBuilder::question_tokens(std::string_view question) const {
    std::string q(question);
    // The question is the user's text: control tokens written in it stay plain text.
    std::vector<int32_t> ids = tok_.encode(mid_, false, true);
    const auto body = tok_.encode(q, false, false);
    ids.insert(ids.end(), body.begin(), body.end());
    const auto end = tok_.encode(tail_, false, true);
    ids.insert(ids.end(), end.begin(), end.end());
    return ids;
}

}  // namespace sl
