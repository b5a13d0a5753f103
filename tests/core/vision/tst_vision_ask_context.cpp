// Visuals in the ask flow's context (core/ask/visual_context.h) on tiny random-weight files: which
// visuals enter as image tokens and at what size, that the builder places each one's exact layout
// (so the budget planner counts it), that VisualEmbeddings fills the rows the encoder gives for
// the same pixels, that a visual without pixels is read as a blank image and named, and that the
// chunked prefill (prefill_stream) equals one pass over the stream — with Gemma 3's bidirectional
// image runs kept whole even when the chunk is smaller than a run.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "core/ask/visual_cache.h"
#include "core/ask/visual_context.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/context/effort.h"
#include "core/model/llama_model.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/thread_pool.h"
#include "core/tokenizer/chat_template.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"
#include "tests/common/test_support.h"
#include "tests/core/vision/vision_test_util.h"

namespace {

constexpr int kRenderPx = 96;

sl::RgbImage random_image(int w, int h, unsigned seed) {
    sl::RgbImage img;
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    std::mt19937 gen(seed);
    for (auto& b : img.rgb) b = static_cast<uint8_t>(gen() % 256);
    return img;
}

sl::doc::Block block(std::string text, sl::doc::BlockRole role = sl::doc::BlockRole::Body) {
    sl::doc::Block b;
    b.text = std::move(text);
    b.role = role;
    b.bbox = sl::doc::BBox{0.1f, 0.1f, 0.9f, 0.2f};
    return b;
}

sl::doc::Visual visual(sl::doc::VisualKind kind, int w, int h, std::string locator) {
    sl::doc::Visual v;
    v.kind = kind;
    v.width = w;
    v.height = h;
    v.locator = std::move(locator);
    return v;
}

// A PDF (a figure page, a page of prose), a deck with a picture, a video with a frame.
std::vector<sl::doc::Document> documents() {
    std::vector<sl::doc::Document> docs(3);
    auto& pdf = docs[0];
    pdf.id = "sha-pdf";
    pdf.path = "/nowhere/report.pdf";
    pdf.kind = sl::doc::DocumentKind::Pdf;
    pdf.units.resize(2);
    pdf.units[0].index = 0;
    pdf.units[0].label = "1";
    pdf.units[0].width = 300;
    pdf.units[0].height = 400;
    pdf.units[0].blocks = {block("Figure 1: the pipeline.")};
    pdf.units[0].visuals = {visual(sl::doc::VisualKind::PageRender, 300, 400, "page:0@72dpi")};
    pdf.units[1].index = 1;
    pdf.units[1].label = "2";
    pdf.units[1].blocks = {block(std::string(700, 'a') + " prose.")};
    pdf.units[1].visuals = {visual(sl::doc::VisualKind::PageRender, 300, 400, "page:1@72dpi")};
    auto& deck = docs[1];
    deck.id = "sha-deck";
    deck.path = "/nowhere/deck.pptx";
    deck.kind = sl::doc::DocumentKind::Slides;
    deck.units.resize(1);
    deck.units[0].kind = sl::doc::UnitKind::Slide;
    deck.units[0].blocks = {block("Results")};
    deck.units[0].visuals = {visual(sl::doc::VisualKind::Picture, 120, 80, "zip:ppt/media/image1.png")};
    deck.units[0].visuals[0].bbox = sl::doc::BBox{0.5f, 0.5f, 0.9f, 0.9f};
    auto& video = docs[2];
    video.id = "sha-video";
    video.path = "/nowhere/talk.mp4";
    video.kind = sl::doc::DocumentKind::Video;
    video.units.resize(1);
    video.units[0].kind = sl::doc::UnitKind::Segment;
    video.units[0].time = sl::doc::TimeRange{60, 90};
    video.units[0].blocks = {block("so the answer is", sl::doc::BlockRole::Transcript)};
    video.units[0].visuals = {visual(sl::doc::VisualKind::Frame, 160, 90, "frame:t=65")};
    video.units[0].visuals[0].timestamp = 65.0;
    return docs;
}

struct Tower {
    std::unique_ptr<sl::LoadedModel> lm;
    std::unique_ptr<sl::LoadedVisionModel> vm;
};

Tower make_tower(const QTemporaryDir& dir, const QString& family) {
    Tower t;
    const QString py = sl::test::require_venv_python();
    if (py.isEmpty()) return t;
    const QString lm = dir.filePath(family + QStringLiteral("-lm.gguf")), mm = dir.filePath(family + QStringLiteral("-mm.gguf"));
    QStringList lm_args{sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), lm, QStringLiteral("--d-model"),
                        QStringLiteral("64"), QStringLiteral("--ctx"), QStringLiteral("4096")};
    QStringList mm_args{QStringLiteral("--out-embd"), QStringLiteral("64"), QStringLiteral("--image-size"), QStringLiteral("32"),
                        QStringLiteral("--patch-size"), QStringLiteral("4")};
    if (family == QLatin1String("gemma3")) {
        lm_args << QStringLiteral("--arch") << QStringLiteral("gemma3");
        mm_args << QStringLiteral("--family") << QStringLiteral("gemma3");
    } else {
        mm_args << QStringLiteral("--longest-edge") << QStringLiteral("64");  // tiled: 2 x 2 + global at 64 px
    }
    if (!sl::test::run_process(py, lm_args, nullptr) || !sl::test::make_mmproj(mm, mm_args)) return t;
    t.lm = sl::load_model(lm.toStdString());
    t.vm = sl::load_mmproj(mm.toStdString());
    return t;
}

// The pixels each visual gets: the page exactly at its encode size, the picture larger (resized by
// VisualEmbeddings), the frame none.
std::optional<sl::RgbImage> pixels_of(const sl::doc::Document&, const sl::doc::Unit&, const sl::doc::Visual& v, int max_px) {
    if (v.kind == sl::doc::VisualKind::PageRender) {
        const auto [w, h] = sl::visual_encode_size(v, max_px);
        return random_image(w, h, 11);
    }
    if (v.kind == sl::doc::VisualKind::Picture) return random_image(240, 160, 12);
    return std::nullopt;
}

std::vector<const sl::doc::Document*> pointers(const std::vector<sl::doc::Document>& docs) {
    std::vector<const sl::doc::Document*> ptrs;
    for (const auto& d : docs) ptrs.push_back(&d);
    return ptrs;
}

// A builder whose visuals take the tower's layouts (no sink or closing padding).
sl::ContextBuilder builder(const Tower& t) {
    sl::ContextOptions co;
    co.sink_block = 0;
    co.closing_block = 0;
    co.render_px = kRenderPx;
    co.image_sequence = sl::image_sequence_for(t.vm->model, *t.lm->tokenizer);
    return sl::ContextBuilder(*t.lm->tokenizer, sl::ChatTemplate("<|im_start|>"), co);
}

sl::TokenStream build(const Tower& t, const std::vector<sl::doc::Document>& docs) { return builder(t).build(pointers(docs)); }

// The visuals of a stream: consecutive Visual spans of one (source, unit, visual) merged, each
// with the spans it was placed as.
struct PlacedVisual {
    sl::ProvenanceSpan whole;
    std::vector<sl::ProvenanceSpan> parts;
};
std::vector<PlacedVisual> placed_visuals(const sl::TokenStream& ts) {
    std::vector<PlacedVisual> out;
    for (const auto& sp : ts.spans) {
        if (sp.kind != sl::SpanKind::Visual) continue;
        if (!out.empty() && out.back().whole.end == sp.begin && out.back().whole.source == sp.source &&
            out.back().whole.unit == sp.unit && out.back().whole.block == sp.block) {
            out.back().whole.end = sp.end;
            out.back().parts.push_back(sp);
            continue;
        }
        out.push_back({sp, {sp}});
        out.back().whole.ref.bbox = sp.ref.bbox;
    }
    return out;
}

sl::SessionOptions cpu_session() {
    sl::SessionOptions so;
    so.device = "cpu";
    so.n_threads = 2;
    return so;
}

// Every position's row of `v` over a stream of n positions.
std::vector<float> all_rows(sl::VisualEmbeddings& v, int n) {
    std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(v.width()));
    v.fill(0, n, rows.data());
    return rows;
}

std::vector<float> last_logits_of(sl::Session& s) { return {s.last_logits().begin(), s.last_logits().end()}; }

}  // namespace

class TstVisionAskContext : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void whichVisualsAndSizes();
    void pagesGetRenders();
    void builderPlacesEachLayout();
    void rowsAreTheEncodersRows();
    void cachedRowsEqualFreshOnes();
    void chunkedPrefillEqualsOnePass();
    void gemma3RunsStayWhole();

private:
    QTemporaryDir dir_;
    Tower idefics3_, gemma3_;
};

void TstVisionAskContext::initTestCase() {
    if (sl::test::require_venv_python().isEmpty()) QSKIP("the project's venv is not installed (scripts/setup.sh)");
    idefics3_ = make_tower(dir_, QStringLiteral("idefics3"));
    gemma3_ = make_tower(dir_, QStringLiteral("gemma3"));
    QVERIFY(idefics3_.lm && idefics3_.vm && gemma3_.lm && gemma3_.vm);
}

void TstVisionAskContext::whichVisualsAndSizes() {
    const auto docs = documents();
    QVERIFY(sl::visual_enters_as_image(docs[0].units[0], docs[0].units[0].visuals[0]));   // a figure page
    QVERIFY(!sl::visual_enters_as_image(docs[0].units[1], docs[0].units[1].visuals[0]));  // prose
    QVERIFY(sl::visual_enters_as_image(docs[1].units[0], docs[1].units[0].visuals[0]));
    QVERIFY(sl::visual_enters_as_image(docs[2].units[0], docs[2].units[0].visuals[0]));
    // OCR text does not make a page "text": a scan is read as an image too.
    sl::doc::Unit scan = docs[0].units[1];
    scan.blocks[0].role = sl::doc::BlockRole::Ocr;
    QVERIFY(sl::visual_enters_as_image(scan, scan.visuals[0]));

    using Size = std::pair<int, int>;
    QCOMPARE(sl::visual_encode_size(docs[0].units[0].visuals[0], 96), Size(72, 96));  // scaled down
    QCOMPARE(sl::visual_encode_size(docs[1].units[0].visuals[0], 672), Size(120, 80));  // never up
    QCOMPARE(sl::visual_encode_size(visual(sl::doc::VisualKind::Frame, 0, 0, "frame:t=1"), 672), Size(0, 0));

    // Tiling follows the render size (SmolVLM's 512 px tiles up to 2048 px).
    sl::VisionConfig c;
    c.projector = "idefics3";
    c.image_size = 512;
    c.longest_edge = 2048;
    QCOMPARE(sl::visual_tile_edge(c, 448), 512);    // low: the global tile only
    QCOMPARE(sl::visual_tile_edge(c, 672), 1024);   // medium: 2 x 2 and the global one
    QCOMPARE(sl::visual_tile_edge(c, 4000), 2048);  // never past the file's
    c.longest_edge = 0;
    QCOMPARE(sl::visual_tile_edge(c, 672), -1);
    c.projector = "gemma3";
    c.longest_edge = 2048;
    QCOMPARE(sl::visual_tile_edge(c, 672), -1);
}

void TstVisionAskContext::pagesGetRenders() {
    // A PDF stored without page renders (ingest's default) gets one per page, upright; a page that
    // has one and other kinds of documents are left alone.
    auto docs = documents();
    docs[0].units[1].visuals.clear();
    docs[0].units[1].width = 612;
    docs[0].units[1].height = 792;
    docs[0].units[1].rotation = 90;
    const size_t deck_visuals = docs[1].units[0].visuals.size();
    sl::add_page_renders(docs);
    QCOMPARE(docs[0].units[0].visuals.size(), size_t{1});
    QCOMPARE(docs[0].units[0].visuals[0].locator, std::string("page:0@72dpi"));
    QCOMPARE(docs[0].units[1].visuals.size(), size_t{1});
    const auto& v = docs[0].units[1].visuals[0];
    QCOMPARE(v.kind, sl::doc::VisualKind::PageRender);
    QCOMPARE(v.locator, std::string("page:1@150dpi"));
    QCOMPARE(v.width, 1650);  // 792 pt at 150 dpi: turned by its rotation
    QCOMPARE(v.height, 1275);
    QCOMPARE(docs[1].units[0].visuals.size(), deck_visuals);
}

void TstVisionAskContext::builderPlacesEachLayout() {
    QVERIFY(idefics3_.lm);
    const auto docs = documents();
    const sl::TokenStream ts = build(idefics3_, docs);
    ts.check();
    int n = 0;
    for (const PlacedVisual& pv : placed_visuals(ts)) {
        const sl::ProvenanceSpan& sp = pv.whole;
        ++n;
        const auto& d = docs[static_cast<size_t>(sp.source)];
        const auto& v = d.units[static_cast<size_t>(sp.ref.unit)].visuals[static_cast<size_t>(sp.block)];
        const auto [w, h] = sl::visual_encode_size(v, kRenderPx);
        const auto layout = sl::image_token_layout(idefics3_.vm->model.config, w, h,
                                                   v.kind == sl::doc::VisualKind::Frame ? v.timestamp : std::nullopt,
                                                   sl::visual_tile_edge(idefics3_.vm->model.config, kRenderPx));
        const auto want = sl::layout_tokens(layout, *idefics3_.lm->tokenizer);
        QCOMPARE(static_cast<int>(want.size()), sl::count_positions(layout, *idefics3_.lm->tokenizer));
        const std::vector<int32_t> got(ts.tokens.begin() + sp.begin, ts.tokens.begin() + sp.end);
        QCOMPARE(got, want);
        if (v.kind == sl::doc::VisualKind::Frame) QCOMPARE(sp.ref.time->t0, 65.0);  // cited at its time
        // Each tile's positions are a span citing the tile's part of the unit: for the page (no
        // box of its own) the tile's area of the page, for the slide's picture the tile's area
        // within the picture's box; wrappers and the global tile cite the whole visual.
        const int tiled = layout.plan.rows * layout.plan.cols;
        const sl::doc::BBox vb = v.bbox.value_or(sl::doc::BBox{0, 0, 1, 1});
        int tile_spans = 0;
        for (const auto& part : pv.parts) {
            const bool has_embeddings = std::count(ts.tokens.begin() + part.begin, ts.tokens.begin() + part.end,
                                                   sl::LlamaModel::kEmbeddingToken) > 0;
            if (part.ref.bbox == v.bbox) continue;  // the whole visual
            QVERIFY(has_embeddings);
            QVERIFY(part.ref.bbox.has_value());
            const auto& b = *part.ref.bbox;
            QVERIFY(b.x0 >= vb.x0 - 1e-6f && b.y0 >= vb.y0 - 1e-6f && b.x1 <= vb.x1 + 1e-6f && b.y1 <= vb.y1 + 1e-6f);
            QVERIFY(b.x1 - b.x0 < vb.x1 - vb.x0);  // a part, not the whole
            ++tile_spans;
        }
        QCOMPARE(tile_spans, tiled);
        if (v.kind == sl::doc::VisualKind::PageRender) {
            QCOMPARE(tiled, 4);  // 2 x 2 at this size: the quadrants of the page
            QCOMPARE(*pv.parts[1].ref.bbox, (sl::doc::BBox{0, 0, 0.5f, 0.5f}));
        }
    }
    QCOMPARE(n, 3);  // the prose page is read as text only

    // The budget planner counts the image positions like any token: the plan is the stream.
    const sl::ContextBuilder b = builder(idefics3_);
    const auto p = b.prepare(pointers(docs));
    const auto plan = sl::plan_budget(p, 100000, sl::effort_settings(sl::Effort::High));
    const auto planned = b.assemble(p, &plan);
    QCOMPARE(planned.prefix_tokens, plan.opening + plan.total_planned);
    QCOMPARE(planned.tokens, ts.tokens);
}

void TstVisionAskContext::rowsAreTheEncodersRows() {
    QVERIFY(idefics3_.lm);
    const auto docs = documents();
    const sl::TokenStream ts = build(idefics3_, docs);
    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(idefics3_.vm->model, pool);
    sl::AskVision av{&idefics3_.vm->model, "test", pixels_of};
    sl::VisualEmbeddings vis(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx);
    QCOMPARE(vis.visuals(), 3);
    QVERIFY(vis.bidirectional().empty());
    const int w = vis.width();
    const auto n = static_cast<int>(ts.tokens.size());
    std::vector<float> rows(static_cast<size_t>(n) * static_cast<size_t>(w));
    vis.fill(0, n, rows.data());
    QCOMPARE(vis.encoded(), 3);
    QCOMPARE(static_cast<int>(vis.notes().size()), 1);  // the frame had no pixels
    QVERIFY2(vis.notes()[0].find("talk.mp4") != std::string::npos && vis.notes()[0].find("blank") != std::string::npos,
             vis.notes()[0].c_str());

    // The page's rows are what the encoder gives for its pixels, in MultimodalStream's order.
    const auto& page = docs[0].units[0].visuals[0];
    const auto [pw, ph] = sl::visual_encode_size(page, kRenderPx);
    sl::MultimodalStreamBuilder mb(*idefics3_.lm->tokenizer, w);
    const int edge = sl::visual_tile_edge(idefics3_.vm->model.config, kRenderPx);
    mb.add_image(sl::image_token_layout(idefics3_.vm->model.config, pw, ph, std::nullopt, edge),
                 sl::encode_image(enc, random_image(pw, ph, 11), edge), 0);
    const sl::MultimodalStream ref = mb.take();
    std::vector<float> want(static_cast<size_t>(ref.size()) * static_cast<size_t>(w));
    ref.fill_embeddings(0, static_cast<int>(ref.size()), want.data());
    sl::VisualCache::round_to_f16(want);  // the rows a visual gets are f16-exact (visual_cache.h)
    const auto placed = placed_visuals(ts);
    const sl::ProvenanceSpan* span = nullptr;
    for (const auto& pv : placed)
        if (pv.whole.source == 0) span = &pv.whole;
    QVERIFY(span);
    QCOMPARE(span->end - span->begin, ref.size());
    const double err = sl::test::normalized_error(rows.data() + static_cast<size_t>(span->begin) * static_cast<size_t>(w), want.data(), want.size());
    QVERIFY2(err < 1e-6, qPrintable(QString::number(err)));
    // Token positions get zero rows; every image position a finite, non-zero row.
    for (int p = 0; p < n; ++p) {
        double sum = 0;
        for (int k = 0; k < w; ++k) {
            const float x = rows[static_cast<size_t>(p) * static_cast<size_t>(w) + static_cast<size_t>(k)];
            QVERIFY(std::isfinite(x));
            sum += std::abs(x);
        }
        QCOMPARE(sum > 0, ts.tokens[static_cast<size_t>(p)] == sl::LlamaModel::kEmbeddingToken);
    }
}

void TstVisionAskContext::cachedRowsEqualFreshOnes() {
    // The first pass encodes and stores the page and the picture (not the frame: it had no pixels,
    // and a blank stand-in is not kept); the second reads them back, bit for bit the same rows.
    QVERIFY(idefics3_.lm);
    const auto docs = documents();
    const sl::TokenStream ts = build(idefics3_, docs);
    QTemporaryDir dir;
    const sl::VisualCache cache(dir.filePath(QStringLiteral("vision")).toStdString());
    sl::ThreadPool pool(2);
    sl::VisionEncoder enc(idefics3_.vm->model, pool);
    const sl::AskVision av{&idefics3_.vm->model, "0123456789abcdef0123", pixels_of};
    const auto n = static_cast<int>(ts.tokens.size());
    auto rows_of = [&](sl::VisualEmbeddings& v) { return all_rows(v, n); };
    sl::VisualEmbeddings first(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx, &cache);
    const auto a = rows_of(first);
    QCOMPARE(first.encoded(), 3);
    QCOMPARE(first.from_cache(), 0);
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.filePath(QStringLiteral("vision")).toStdString()))
        files += e.path().extension() == ".vemb" ? 1 : 0;
    QCOMPARE(files, 2);
    sl::VisualEmbeddings second(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx, &cache);
    const auto b = rows_of(second);
    QCOMPARE(second.from_cache(), 2);
    QCOMPARE(second.encoded(), 1);
    QVERIFY(a == b);
    // Another tower (or render size) does not read them.
    const sl::AskVision other{&idefics3_.vm->model, "fedcba9876543210fedc", pixels_of};
    sl::VisualEmbeddings third(ts, docs, other, enc, *idefics3_.lm->tokenizer, kRenderPx, &cache);
    (void)rows_of(third);
    QCOMPARE(third.from_cache(), 0);
    // A damaged file is ignored (encoded again, and replaced).
    for (const auto& e : std::filesystem::directory_iterator(dir.filePath(QStringLiteral("vision")).toStdString()))
        std::filesystem::resize_file(e.path(), 20);
    sl::VisualEmbeddings fourth(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx, &cache);
    QVERIFY(rows_of(fourth) == a);
    QCOMPARE(fourth.from_cache(), 0);
}

void TstVisionAskContext::chunkedPrefillEqualsOnePass() {
    QVERIFY(idefics3_.lm);
    const auto docs = documents();
    const sl::TokenStream ts = build(idefics3_, docs);
    const sl::SessionOptions so = cpu_session();
    sl::Session one(*idefics3_.lm, so), chunked(*idefics3_.lm, so);
    sl::VisionEncoder enc(idefics3_.vm->model, one.pool());
    sl::AskVision av{&idefics3_.vm->model, "test", pixels_of};
    sl::VisualEmbeddings all(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx);
    const std::vector<float> rows = all_rows(all, static_cast<int>(ts.tokens.size()));
    one.prefill(ts.tokens, rows.data());

    sl::VisualEmbeddings vis(ts, docs, av, enc, *idefics3_.lm->tokenizer, kRenderPx);
    std::vector<size_t> done;
    sl::prefill_stream(chunked, ts.tokens, 0, &vis, false, 7, nullptr, [&](size_t d) { done.push_back(d); });
    QCOMPARE(done.back(), ts.tokens.size());
    QCOMPARE(done.size(), (ts.tokens.size() + 6) / 7);
    QCOMPARE(chunked.tokens(), one.tokens());
    const auto a = last_logits_of(one), b = last_logits_of(chunked);
    const double err = sl::test::normalized_error(b.data(), a.data(), a.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
}

void TstVisionAskContext::gemma3RunsStayWhole() {
    QVERIFY(gemma3_.lm);
    const auto docs = documents();
    const sl::TokenStream ts = build(gemma3_, docs);
    const sl::SessionOptions so = cpu_session();
    sl::Session one(*gemma3_.lm, so), chunked(*gemma3_.lm, so), causal(*gemma3_.lm, so);
    sl::VisionEncoder enc(gemma3_.vm->model, one.pool());
    sl::AskVision av{&gemma3_.vm->model, "test", pixels_of};
    sl::VisualEmbeddings all(ts, docs, av, enc, *gemma3_.lm->tokenizer, kRenderPx);
    QCOMPARE(static_cast<int>(all.bidirectional().size()), 3);  // one run per image (one tile each)
    const int64_t run = all.bidirectional()[0].second - all.bidirectional()[0].first;
    QVERIFY(run > 3);
    const std::vector<float> rows = all_rows(all, static_cast<int>(ts.tokens.size()));
    one.prefill(ts.tokens, rows.data(), all.bidirectional());

    // Chunks of 3 positions, each run longer than that: a chunk ends before a run and the next
    // takes the whole run.
    sl::VisualEmbeddings vis(ts, docs, av, enc, *gemma3_.lm->tokenizer, kRenderPx);
    std::vector<size_t> done;
    sl::prefill_stream(chunked, ts.tokens, 0, &vis, true, 3, nullptr, [&](size_t d) { done.push_back(d); });
    for (const auto& [b, e] : all.bidirectional()) {
        QVERIFY(std::find(done.begin(), done.end(), static_cast<size_t>(b)) != done.end());
        QVERIFY(std::find(done.begin(), done.end(), static_cast<size_t>(e)) != done.end());
    }
    const auto a = last_logits_of(one), b = last_logits_of(chunked);
    const double err = sl::test::normalized_error(b.data(), a.data(), a.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));

    // The runs matter: all causal gives other logits.
    sl::VisualEmbeddings vis2(ts, docs, av, enc, *gemma3_.lm->tokenizer, kRenderPx);
    sl::prefill_stream(causal, ts.tokens, 0, &vis2, false, 3, nullptr, nullptr);
    const auto c = last_logits_of(causal);
    QVERIFY(sl::test::normalized_error(c.data(), a.data(), a.size()) > 1e-4);
}

QTEST_GUILESS_MAIN(TstVisionAskContext)
#include "tst_vision_ask_context.moc"
