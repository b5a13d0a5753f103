// The context builder and budget planner on hand-made documents with a byte-level tokenizer (one
// token per byte, so every count and every decoded span can be checked exactly): markers, provenance
// of every token, the chat template around the documents, the question turn, the sink padding,
// image-patch hook, frames per minute, cuts to fit and the printed plan.
#include <QTest>

#include <array>

#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/context/effort.h"
#include "core/util/error.h"
#include "tests/core/context/synthetic_docs.h"

namespace {

std::string decode(const sl::Tokenizer& tok, const sl::TokenStream& ts, int64_t b, int64_t e) {
    return tok.decode(std::span<const int32_t>(ts.tokens).subspan(static_cast<size_t>(b), static_cast<size_t>(e - b)), true);
}

}  // namespace

class TstContextBuilder : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void markersAndProvenance();
    void templateAroundDocuments();
    void sinkPadding();
    void imagePatchHook();
    void effortWords();
    void framesPerMinute();
    void cutToFitSpreadsOrFollowsPriority();
    void planText();
};

void TstContextBuilder::markersAndProvenance() {
    auto tok = sl::test::byte_tokenizer();
    const auto chat = sl::test::chatml();
    const auto pdf = sl::test::report_pdf();
    const auto deck = sl::test::deck_pptx();
    const auto video = sl::test::lecture_mp4();
    const std::array<const sl::doc::Document*, 3> docs{&pdf, &deck, &video};
    const sl::ContextBuilder b(*tok, chat);
    const sl::TokenStream ts = b.build(docs);
    ts.check();
    const std::string all = decode(*tok, ts, 0, ts.prefix_tokens);
    QVERIFY(all.find("[Report.pdf p. 2]\n") != std::string::npos);
    QVERIFY(all.find("[Deck.pptx slide 2]\n") != std::string::npos);
    QVERIFY(all.find("[Lecture.mp4 00:41:30]\n") != std::string::npos);
    QCOMPARE(ts.sources.size(), size_t{3});
    QCOMPARE(ts.units.size(), size_t{3 + 2 + 2});
    QCOMPARE(ts.units[1].locator, std::string("Report.pdf p. 2"));

    // Every text token maps back to its block: decoding a Text span gives the block's text.
    int text_spans = 0;
    for (const auto& s : ts.spans) {
        if (s.kind != sl::SpanKind::Text) continue;
        ++text_spans;
        const auto& unit = ts.units[static_cast<size_t>(s.unit)];
        const sl::doc::Document* d = docs[static_cast<size_t>(unit.source)];
        const auto& blk = d->units[static_cast<size_t>(unit.unit)].blocks[static_cast<size_t>(s.block)];
        QCOMPARE(decode(*tok, ts, s.begin, s.end), blk.text + "\n");
        QCOMPARE(s.ref.document, d->id);
        QCOMPARE(s.ref.unit, unit.unit);
        QVERIFY(s.begin >= unit.begin && s.end <= unit.end);
        if (d->kind == sl::doc::DocumentKind::Pdf) {
            QVERIFY(s.ref.bbox.has_value());
            QCOMPARE(s.ref.bbox->y0, blk.bbox->y0);
        }
        if (d->kind == sl::doc::DocumentKind::Video) {
            QVERIFY(s.ref.time.has_value());
            QCOMPARE(s.ref.time->t0, blk.time->t0);
        }
    }
    QCOMPARE(text_spans, 6 + 4 + 2);
    // A token in the middle of page 3's second block.
    const auto& u3 = ts.units[2];
    const sl::ProvenanceSpan* mid = ts.span_at(u3.end - 3);
    QVERIFY(mid);
    QCOMPARE(mid->kind, sl::SpanKind::Text);
    QCOMPARE(mid->block, 1);
    QCOMPARE(mid->ref.unit, 2);
    QVERIFY(ts.span_at(static_cast<int64_t>(ts.tokens.size())) == nullptr);
    QVERIFY(ts.span_at(0)->kind == sl::SpanKind::Template);
    // Without an image-patch hook the frames contribute no tokens; the per-source counts add up.
    int64_t sum = 0;
    for (auto n : ts.tokens_per_source()) sum += n;
    QCOMPARE(sum, ts.units.back().end - ts.units.front().begin);
    QCOMPARE(ts.span_at(ts.prefix_tokens - 1)->kind, sl::SpanKind::Template);  // the closing block
}

void TstContextBuilder::templateAroundDocuments() {
    // Prefix + question turn == the chat template's rendering of the whole conversation, for any
    // question: the prefix does not depend on the question.
    auto tok = sl::test::byte_tokenizer();
    const auto chat = sl::test::chatml();
    const auto pdf = sl::test::report_pdf();
    const std::array<const sl::doc::Document*, 1> docs{&pdf};
    sl::ContextOptions o;
    o.sink_block = 0;
    const sl::ContextBuilder b(*tok, chat, o);
    const sl::TokenStream ts = b.build(docs);
    const std::string doc_text = decode(*tok, ts, ts.units.front().begin, ts.prefix_tokens);
    for (const std::string q : {"Which function fits linear models?", "What does <|im_end|> mean?"}) {
        std::vector<int32_t> all = ts.tokens;
        const auto qt = b.question_tokens(q);
        all.insert(all.end(), qt.begin(), qt.end());
        const std::array<sl::ChatMessage, 2> msgs{sl::ChatMessage{"system", o.instructions},
                                                  sl::ChatMessage{"user", doc_text + "\n\nQuestion: " + q}};
        QCOMPARE(tok->decode(all, true), chat.render(msgs, true));
    }
    // The user's control-token text stays text.
    const auto qt = b.question_tokens("<|im_end|>");
    QCOMPARE(std::count(qt.begin(), qt.end(), int32_t{257}), 1L);  // only the template's own
}

void TstContextBuilder::sinkPadding() {
    auto tok = sl::test::byte_tokenizer();
    const auto pdf = sl::test::report_pdf();
    const std::array<const sl::doc::Document*, 1> docs{&pdf};
    sl::ContextOptions o;
    o.instructions = "Answer.";
    o.sink_block = 64;
    const sl::ContextBuilder b(*tok, sl::test::chatml(), o);
    const auto ts = b.build(docs);
    QCOMPARE(ts.units.front().begin, int64_t{64});
    QCOMPARE(ts.span_at(63)->kind, sl::SpanKind::Template);
    QCOMPARE(ts.span_at(64)->kind, sl::SpanKind::Marker);
    // An opening longer than the sink block is left as it is.
    o.sink_block = 8;
    const auto ts2 = sl::ContextBuilder(*tok, sl::test::chatml(), o).build(docs);
    QVERIFY(ts2.units.front().begin > 8);
}

void TstContextBuilder::imagePatchHook() {
    auto tok = sl::test::byte_tokenizer();
    const auto video = sl::test::lecture_mp4(3);
    const std::array<const sl::doc::Document*, 1> docs{&video};
    sl::ContextOptions o;
    o.image_token = 256;
    o.image_patches = [](const sl::doc::Document&, const sl::doc::Unit&, const sl::doc::Visual& v, int px) {
        return v.kind == sl::doc::VisualKind::Frame && px == 672 ? 5 : 0;
    };
    const auto ts = sl::ContextBuilder(*tok, sl::test::chatml(), o).build(docs);
    int visuals = 0;
    for (const auto& s : ts.spans) {
        if (s.kind != sl::SpanKind::Visual) continue;
        ++visuals;
        QCOMPARE(s.end - s.begin, int64_t{5});
        QCOMPARE(ts.tokens[static_cast<size_t>(s.begin)], 256);
        QVERIFY(s.ref.time.has_value());
        QCOMPARE(s.ref.time->t0, video.units[static_cast<size_t>(s.ref.unit)].visuals[static_cast<size_t>(s.block)].timestamp.value());
    }
    QCOMPARE(visuals, 6);
}

void TstContextBuilder::effortWords() {
    QCOMPARE(sl::parse_effort("low"), sl::Effort::Low);
    QCOMPARE(sl::parse_effort("high"), sl::Effort::High);
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::parse_effort("extreme"));
    const auto lo = sl::effort_settings(sl::Effort::Low), me = sl::effort_settings(sl::Effort::Medium),
               hi = sl::effort_settings(sl::Effort::High);
    QCOMPARE(me.top_k, 16);
    QVERIFY(lo.top_k < me.top_k && me.top_k < hi.top_k);
    QVERIFY(lo.frames_per_minute < me.frames_per_minute && me.frames_per_minute < hi.frames_per_minute);
    QVERIFY(lo.answer_tokens < me.answer_tokens && me.answer_tokens < hi.answer_tokens);
    QVERIFY(sl::describe(hi).find("top-k 32") != std::string::npos);
}

void TstContextBuilder::framesPerMinute() {
    // 12 frames per 30 s segment; 6 frames/min keeps 3 per segment, 2/min keeps 1.
    auto tok = sl::test::byte_tokenizer();
    const auto video = sl::test::lecture_mp4(12);
    const std::array<const sl::doc::Document*, 1> docs{&video};
    sl::ContextOptions o;
    o.image_token = 256;
    o.image_patches = [](const sl::doc::Document&, const sl::doc::Unit&, const sl::doc::Visual&, int) { return 4; };
    const sl::ContextBuilder b(*tok, sl::test::chatml(), o);
    const auto p = b.prepare(docs);
    for (auto [effort, per_segment] : {std::pair{sl::Effort::Medium, 3}, std::pair{sl::Effort::Low, 1}}) {
        const auto plan = sl::plan_budget(p, 100000, sl::effort_settings(effort));
        QCOMPARE(plan.sources[0].frames_total, 24);
        QCOMPARE(plan.sources[0].frames_kept, 2 * per_segment);
        const auto ts = b.assemble(p, &plan);
        ts.check();
        int visuals = 0;
        for (const auto& s : ts.spans) visuals += s.kind == sl::SpanKind::Visual ? 1 : 0;
        QCOMPARE(visuals, 2 * per_segment);
        QCOMPARE(ts.prefix_tokens, plan.opening + plan.total_planned);
    }
}

void TstContextBuilder::cutToFitSpreadsOrFollowsPriority() {
    // Ten long pages and a small deck in a context that holds about four pages: the deck (under its
    // fair share) is kept whole, the PDF keeps pages spread over its length, the plan fits.
    auto tok = sl::test::byte_tokenizer();
    sl::doc::Document pdf;
    pdf.id = "sha-long";
    pdf.path = "Long.pdf";
    for (int i = 0; i < 10; ++i) {
        sl::doc::Unit u;
        u.index = i;
        u.blocks.push_back(sl::test::text_block("Page " + std::to_string(i + 1) + " " + std::string(480, 'x'), 0.1f));
        pdf.units.push_back(u);
    }
    const auto deck = sl::test::deck_pptx();
    const std::array<const sl::doc::Document*, 2> docs{&pdf, &deck};
    const sl::ContextBuilder b(*tok, sl::test::chatml());
    const auto p = b.prepare(docs);
    const auto effort = sl::effort_settings(sl::Effort::Low);
    const int64_t n_ctx = static_cast<int64_t>(p.opening.size() + p.closing.size()) + p.question_reserve + 128 + effort.answer_tokens + 2300;
    const auto plan = sl::plan_budget(p, n_ctx, effort);
    QVERIFY(plan.fits);
    QCOMPARE(plan.sources[1].units_kept, 2);
    QVERIFY(plan.sources[0].units_kept >= 3 && plan.sources[0].units_kept < 10);
    QVERIFY(plan.total_planned <= plan.available);
    const auto ts = b.assemble(p, &plan);
    ts.check();
    QVERIFY(static_cast<int64_t>(ts.tokens.size()) + p.question_reserve + 128 + effort.answer_tokens <= n_ctx);
    std::vector<int> kept;
    for (const auto& u : ts.units)
        if (u.source == 0) kept.push_back(u.unit);
    QVERIFY(kept.size() >= 3);
    QVERIFY(kept[0] <= 2 && kept[kept.size() - 1] >= 7);  // from the whole length, not just the start

    // Priorities: the pages named are the ones kept.
    sl::PlanOptions po;
    po.unit_priority.assign(p.units.size(), 0.0);
    po.unit_priority[4] = 3;
    po.unit_priority[9] = 2;
    const auto plan2 = sl::plan_budget(p, n_ctx, effort, po);
    QVERIFY(plan2.keep[4][0] && plan2.keep[9][0]);
    QVERIFY(!plan2.keep[0][0] || plan2.sources[0].units_kept > 2);

    // Too small for even the opening: says so.
    const auto plan3 = sl::plan_budget(p, 10, effort);
    QVERIFY(!plan3.fits);
    QCOMPARE(plan3.total_planned, int64_t{0});
}

void TstContextBuilder::planText() {
    auto tok = sl::test::byte_tokenizer();
    const auto pdf = sl::test::report_pdf();
    const auto video = sl::test::lecture_mp4(12);
    const std::array<const sl::doc::Document*, 2> docs{&pdf, &video};
    const sl::ContextBuilder b(*tok, sl::test::chatml());
    const auto p = b.prepare(docs);
    const auto plan = sl::plan_budget(p, 400, sl::effort_settings(sl::Effort::Medium));
    const std::string t = plan.to_text();
    QVERIFY2(t.find("Report.pdf") != std::string::npos, t.c_str());
    QVERIFY2(t.find("Lecture.mp4") != std::string::npos, t.c_str());
    QVERIFY2(t.find("frames 6 of 24 kept") != std::string::npos, t.c_str());
    QVERIFY2(t.find("effort medium") != std::string::npos, t.c_str());
}

QTEST_GUILESS_MAIN(TstContextBuilder)
#include "tst_context_builder.moc"
