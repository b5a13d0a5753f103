// Citations from synthetic selections over a hand-made TokenStream (byte tokenizer: one token per
// byte, so block ranges are known exactly): mass mapped through provenance to the right locators,
// the local block / sink / question blocks ignored, straddling blocks split, per-sentence
// assignment and inline markers, regions (bbox, time range), snippets; and verification: supported
// sentences pass, an unrelated citation is flagged weak and kept.
#include <QTest>

#include <array>
#include <cmath>

#include "core/answer/citations.h"
#include "core/answer/selection_collector.h"
#include "core/answer/verify.h"
#include "core/context/context_builder.h"
#include "core/util/error.h"
#include "tests/core/context/synthetic_docs.h"

namespace {

constexpr int B = 32;

struct Fixture {
    std::unique_ptr<sl::Tokenizer> tok = sl::test::byte_tokenizer();
    sl::doc::Document pdf = sl::test::report_pdf(), deck = sl::test::deck_pptx(), video = sl::test::lecture_mp4(0);
    sl::TokenStream ts;
    Fixture() {
        const std::array<const sl::doc::Document*, 3> docs{&pdf, &deck, &video};
        sl::ContextOptions o;
        o.sink_block = B;
        ts = sl::ContextBuilder(*tok, sl::test::chatml(), o).build(docs);
    }
    int unit(const std::string& locator) const {
        for (size_t i = 0; i < ts.units.size(); ++i)
            if (ts.units[i].locator == locator) return static_cast<int>(i);
        return -1;
    }
    // A KV block lying wholly inside the unit's text, after its marker (the byte tokenizer makes
    // units long enough).
    int32_t block_in(const std::string& locator) const {
        const int u = unit(locator);
        for (const auto& sp : ts.spans)
            if (sp.unit == u && sp.kind == sl::SpanKind::Text) return static_cast<int32_t>((sp.begin + B - 1) / B);
        return -1;
    }
    // Tokens of unit `u`'s text (not its marker) in [b, e).
    int64_t text_tokens(int u, int64_t b, int64_t e) const {
        int64_t n = 0;
        for (const auto& sp : ts.spans)
            if (sp.unit == u && sp.kind == sl::SpanKind::Text) n += std::max<int64_t>(0, std::min(e, sp.end) - std::max(b, sp.begin));
        return n;
    }
    int64_t answer_pos(int step) const { return ts.prefix_tokens + 40 + step; }
};

// One decode step: `layers` layers, 3 KV groups each, selecting `blocks` with `mass` plus the local
// block (given a large mass that must be ignored).
void step(sl::SelectionCollector& c, int64_t pos, const std::vector<int32_t>& blocks, const std::vector<float>& mass,
          int layers = 2) {
    sl::AttentionCall call;
    call.pos0 = pos;
    call.n_tokens = 1;
    for (int l = 0; l < layers; ++l) {
        std::vector<sl::Selection> sels;
        for (int g = 0; g < 3; ++g) {
            sl::Selection s;
            s.kv_head = g;
            s.q_pos0 = pos;
            s.n_queries = 1;
            s.blocks = blocks;
            s.mass = mass;
            s.blocks.push_back(static_cast<int32_t>(pos / B));
            s.mass.push_back(0.9f);
            sels.push_back(s);
        }
        call.layer = l;
        c.observe(l, call, sels);
    }
}

struct Said {
    std::string text;
    std::vector<int32_t> blocks;
    std::vector<float> mass;
};

// Streams the sentences as 4 chunks each, in the order a session runs: the forward pass of token i
// (a step, whose selection is the evidence of token i + 1) comes before token i's text.
void speak(sl::SelectionCollector& c, const Fixture& f, const std::vector<Said>& said) {
    struct Chunk {
        std::string text;
        const Said* from;
    };
    std::vector<Chunk> chunks;
    for (const auto& s : said)
        for (size_t i = 0; i < 4; ++i)
            chunks.push_back({s.text.substr(i * s.text.size() / 4, (i + 1) * s.text.size() / 4 - i * s.text.size() / 4), &s});
    for (size_t i = 0; i < chunks.size(); ++i) {
        const Said* next = chunks[std::min(i + 1, chunks.size() - 1)].from;
        step(c, f.answer_pos(static_cast<int>(i)), next->blocks, next->mass);
        c.on_text(chunks[i].text);
    }
}

// Bag of words hashed into 64 dimensions: a stand-in embedder with the right behaviour for the test
// (similar wording, high cosine).
class HashEmbedder : public sl::Embedder {
public:
    std::vector<float> embed(std::string_view text) override {
        ++calls;
        std::vector<float> v(64, 0.0f);
        std::string w;
        auto flush = [&] {
            if (w.size() > 2) v[std::hash<std::string>{}(w) % 64] += 1.0f;
            w.clear();
        };
        for (char ch : text) {
            if (std::isalpha(static_cast<unsigned char>(ch))) w.push_back(static_cast<char>(std::tolower(ch)));
            else flush();
        }
        flush();
        return v;
    }
    int calls = 0;
};

}  // namespace

class TstCitations : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void sentences();
    void citesWhatWasAttended();
    void ignoresLocalSinkAndQuestionBlocks();
    void straddlingBlockSplitsByTokens();
    void straddlingBlockSplitsByAttention();
    void videoTimeRange();
    void verificationFlagsUnrelated();
    void semanticVerification();
    void baselineRemovesPositionalMass();
    void fusedSupportOutranksMass();
    void fusedWithoutAttention();
    void questionRelevanceNumbersFirst();
    void truncatedTextKeepsItsSteps();
    void deliveredSelectionsReachTheCollector();
};

void TstCitations::sentences() {
    const std::string t = "Use lm(). See p. 3 for e.g. details! Then:\n1. fit\n2. look? Done with\nthe wrapped line\n\nNew";
    const auto s = sl::split_sentences(t);
    std::vector<std::string> got;
    for (auto [b, e] : s) got.push_back(t.substr(b, e - b));
    QCOMPARE(got, (std::vector<std::string>{"Use lm().", "See p. 3 for e.g. details!", "Then:", "1. fit", "2. look?",
                                           "Done with\nthe wrapped line", "New"}));
    QVERIFY(sl::split_sentences("  \n ").empty());
    // Code-fence lines alone are markup, not sentences; the code between them is.
    const std::string code = "Use sink:\n```r\nsink(\"out.txt\")\n```\nThen sink() again.";
    got.clear();
    for (auto [b, e] : sl::split_sentences(code)) got.push_back(code.substr(b, e - b));
    QCOMPARE(got, (std::vector<std::string>{"Use sink:", "sink(\"out.txt\")", "Then sink() again."}));
}

void TstCitations::citesWhatWasAttended() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Linear models are fitted with lm. ", {f.block_in("Report.pdf p. 1")}, {0.5f}},
                 {"Revenue grew by twelve percent.", {f.block_in("Deck.pptx slide 1")}, {0.2f}}});
    const sl::Answer a = sl::cite(c, *f.tok);
    QCOMPARE(a.steps, 8);
    QCOMPARE(a.citations.size(), size_t{2});
    QCOMPARE(a.citations[0].locator, std::string("Report.pdf p. 1"));
    QCOMPARE(a.citations[0].number, 1);
    QCOMPARE(a.citations[0].ref.document, std::string("sha-report"));
    QCOMPARE(a.citations[0].ref.unit, 0);
    QCOMPARE(a.citations[0].path, std::string("/data/Report.pdf"));
    QCOMPARE(a.citations[1].locator, std::string("Deck.pptx slide 1"));
    QCOMPARE(a.citations[1].ref.unit, 0);
    QVERIFY(a.citations[0].share > a.citations[1].share);
    // Mass: 2 layers x 3 groups x 0.5 per step, 3 steps (the 4th step already selects for the next
    // sentence); the block lies wholly in the unit.
    QVERIFY(std::abs(a.citations[0].mass - 3 * 6 * 0.5) < 1e-4);
    QCOMPARE(a.sentences.size(), size_t{2});
    QCOMPARE(a.sentences[0].supports.size(), size_t{1});
    QCOMPARE(a.sentences[0].supports[0].citation, 0);
    QCOMPARE(a.sentences[1].supports[0].citation, 1);
    QCOMPARE(a.with_markers(), std::string("Linear models are fitted with lm [1]. Revenue grew by twelve percent [2]."));
    // The region is on the attended block: its bbox is a box of page 1, the snippet its words.
    QVERIFY(a.citations[0].ref.bbox.has_value());
    QVERIFY(a.citations[0].ref.bbox->valid());
    QVERIFY(a.citations[0].text.find("lm") != std::string::npos || a.citations[0].text.find("Linear") != std::string::npos);
    QVERIFY(!a.citations[0].snippet.empty());
    const std::string src = a.sources_text();
    QVERIFY2(src.find("[1] Report.pdf p. 1") != std::string::npos, src.c_str());
    QVERIFY2(src.find("[2] Deck.pptx slide 1") != std::string::npos, src.c_str());
}

void TstCitations::ignoresLocalSinkAndQuestionBlocks() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    // A query whose local block lies on page 3 (as during a prefill-like decode in the documents):
    // the local block's large mass must not make page 3 a citation.
    const int64_t in_p3 = f.block_in("Report.pdf p. 3") * int64_t{B} + 1;
    step(c, in_p3, {0, f.block_in("Report.pdf p. 2")}, {5.0f, 0.2f});
    // Blocks after the prefix (question, answer) are ignored.
    const auto after = static_cast<int32_t>(f.ts.prefix_tokens / B + 1);
    step(c, f.answer_pos(0) + 3 * B, {after, f.block_in("Report.pdf p. 2")}, {3.0f, 0.2f});
    c.on_text("Graphics use plot.");
    // Prefill calls (n_tokens > 1) are not recorded.
    sl::AttentionCall pre;
    pre.n_tokens = 16;
    c.observe(0, pre, {sl::Selection{0, 0, 16, {f.block_in("Report.pdf p. 3")}, {9.0f}, {}}});
    QCOMPARE(c.steps().size(), size_t{2});
    for (const auto& st : c.steps())
        for (auto [b, m] : st.blocks) {
            QVERIFY(b != 0);
            QVERIFY(b != after);
            QVERIFY(b != static_cast<int32_t>(st.pos / B));
        }
    const sl::Answer a = sl::cite(c, *f.tok);
    QCOMPARE(a.citations.size(), size_t{1});
    QCOMPARE(a.citations[0].locator, std::string("Report.pdf p. 2"));
}

void TstCitations::straddlingBlockSplitsByTokens() {
    Fixture f;
    // Two consecutive units and a block holding text of both (the end of one, the start of the
    // next; markers are not content, so their text must both reach into the block).
    int u1 = -1;
    int32_t b = -1;
    double in_p1 = 0, in_p2 = 0;
    for (int u = 0; u + 1 < static_cast<int>(f.ts.units.size()) && u1 < 0; ++u) {
        const auto& p1 = f.ts.units[static_cast<size_t>(u)];
        const auto& p2 = f.ts.units[static_cast<size_t>(u + 1)];
        if (p1.end != p2.begin) continue;
        const auto blk = static_cast<int32_t>(p1.end / B);
        const double a1 = static_cast<double>(f.text_tokens(u, blk * int64_t{B}, (blk + 1) * int64_t{B})) / B;
        const double a2 = static_cast<double>(f.text_tokens(u + 1, blk * int64_t{B}, (blk + 1) * int64_t{B})) / B;
        if (a1 > 0 && a2 > 0) {
            u1 = u;
            b = blk;
            in_p1 = a1;
            in_p2 = a2;
        }
    }
    QVERIFY2(u1 >= 0, "no block holds the text of two units");
    const std::string l1 = f.ts.units[static_cast<size_t>(u1)].locator, l2 = f.ts.units[static_cast<size_t>(u1 + 1)].locator;
    sl::SelectionCollector c(f.ts, B);
    step(c, f.answer_pos(0), {b}, {1.0f}, 1);
    c.on_text("x.");
    sl::CiteOptions o;
    o.min_share = 0;
    const auto a = sl::cite(c, *f.tok, o);
    QCOMPARE(a.citations.size(), size_t{2});
    for (const auto& ci : a.citations) {
        QVERIFY2(ci.locator == l1 || ci.locator == l2, ci.locator.c_str());
        const double want = ci.locator == l1 ? 3 * in_p1 : 3 * in_p2;
        QVERIFY2(std::abs(ci.mass - want) < 1e-4, ci.locator.c_str());
    }
}

void TstCitations::straddlingBlockSplitsByAttention() {
    // With the tokens' attention recorded (Selection::token_mass), a block holding the text of two
    // units gives its mass to them by what was read: here only the second unit's tokens.
    Fixture f;
    int u1 = -1;
    int32_t b = -1;
    for (int u = 0; u + 1 < static_cast<int>(f.ts.units.size()) && u1 < 0; ++u) {
        const auto& p1 = f.ts.units[static_cast<size_t>(u)];
        const auto& p2 = f.ts.units[static_cast<size_t>(u + 1)];
        const auto blk = static_cast<int32_t>(p1.end / B);
        if (p1.end == p2.begin && f.text_tokens(u, blk * int64_t{B}, (blk + 1) * int64_t{B}) > 0 &&
            f.text_tokens(u + 1, blk * int64_t{B}, (blk + 1) * int64_t{B}) > 0) {
            u1 = u;
            b = blk;
        }
    }
    QVERIFY2(u1 >= 0, "no block holds the text of two units");
    const std::string l2 = f.ts.units[static_cast<size_t>(u1 + 1)].locator;
    // Token mass: uniform over the second unit's text tokens in the block, summing to the mass.
    std::vector<float> tok(B, 0.0f);
    const int64_t lo = int64_t{b} * B;
    const int64_t n2 = f.text_tokens(u1 + 1, lo, lo + B);
    for (int j = 0; j < B; ++j) tok[static_cast<size_t>(j)] = f.text_tokens(u1 + 1, lo + j, lo + j + 1) > 0 ? 1.0f / n2 : 0.0f;
    sl::SelectionCollector c(f.ts, B);
    sl::AttentionCall call;
    call.pos0 = f.answer_pos(0);
    call.n_tokens = 1;
    sl::Selection sel{0, call.pos0, 1, {b, static_cast<int32_t>(call.pos0 / B)}, {1.0f, 0.9f}, {}};
    sel.token_mass = tok;
    sel.token_mass.resize(2 * B, 0.9f / B);  // the local block's: ignored
    c.observe(0, call, {sel});
    QCOMPARE(c.steps().size(), size_t{1});
    QCOMPARE(c.steps()[0].tokens.size(), size_t{1});
    c.on_text("x.");
    sl::CiteOptions o;
    o.min_share = 0;
    const auto a = sl::cite(c, *f.tok, o);
    QCOMPARE(a.citations.size(), size_t{1});
    QCOMPARE(a.citations[0].locator, l2);
    QVERIFY(std::abs(a.citations[0].mass - 1.0) < 1e-4);
}

void TstCitations::videoTimeRange() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Entropy never decreases.", {f.block_in("Lecture.mp4 00:41:30")}, {0.7f}}});
    const auto a = sl::cite(c, *f.tok);
    QCOMPARE(a.citations.size(), size_t{1});
    QCOMPARE(a.citations[0].locator, std::string("Lecture.mp4 00:41:30"));
    QCOMPARE(a.citations[0].kind, sl::doc::DocumentKind::Video);
    QVERIFY(a.citations[0].ref.time.has_value());
    QVERIFY(a.citations[0].ref.time->t0 >= 2490 && a.citations[0].ref.time->t1 <= 2520);
}

void TstCitations::verificationFlagsUnrelated() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    // The second sentence is about revenue but its selections point at the packages page: unrelated.
    speak(c, f, {{"Linear models are fitted with the function lm. ", {f.block_in("Report.pdf p. 1")}, {0.5f}},
                 {"Revenue grew by twelve percent.", {f.block_in("Report.pdf p. 3")}, {0.5f}}});
    sl::Answer a = sl::cite(c, *f.tok);
    QCOMPARE(a.citations.size(), size_t{2});
    sl::verify(a);
    QCOMPARE(a.sentences.size(), size_t{2});
    const auto& good = a.sentences[0].supports.at(0);
    const auto& bad = a.sentences[1].supports.at(0);
    QVERIFY(good.verified && bad.verified);
    QVERIFY2(good.lexical >= 0.6, std::to_string(good.lexical).c_str());
    QVERIFY(!good.weak);
    QVERIFY2(bad.lexical < 0.2, std::to_string(bad.lexical).c_str());
    QVERIFY(bad.weak);
    QVERIFY(!bad.semantic.has_value());
    // Kept and marked, not dropped.
    QCOMPARE(a.with_markers(),
             std::string("Linear models are fitted with the function lm [1]. Revenue grew by twelve percent [2?]."));
    QVERIFY(a.sources_text().find("[2] Report.pdf p. 3") != std::string::npos);
    QVERIFY(a.sources_text().find("(weak support)") != std::string::npos);

    QCOMPARE(sl::lexical_support("The summaries print coefficients.", "summary prints the coefficient table"), 1.0);
    QCOMPARE(sl::lexical_support("the of and", "anything"), 0.0);
}

void TstCitations::semanticVerification() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Linear models are fitted with the function lm. ", {f.block_in("Report.pdf p. 1")}, {0.5f}},
                 {"Revenue grew by twelve percent.", {f.block_in("Report.pdf p. 3")}, {0.5f}}});
    sl::Answer a = sl::cite(c, *f.tok);
    HashEmbedder e;
    sl::verify(a, &e);
    const auto& good = a.sentences[0].supports.at(0);
    const auto& bad = a.sentences[1].supports.at(0);
    QVERIFY(good.semantic.has_value() && bad.semantic.has_value());
    QVERIFY(*good.semantic > *bad.semantic);
    QVERIFY(bad.weak);
    QCOMPARE(e.calls, 4);  // two sentences, two sources, each embedded once
    const std::vector<float> x{1, 0, 1}, y{1, 0, 1}, z{0, 1, 0};
    QCOMPARE(sl::cosine(x, y), 1.0);
    QCOMPARE(sl::cosine(x, z), 0.0);
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::cosine(x, std::vector<float>{1, 2}));
}

void TstCitations::baselineRemovesPositionalMass() {
    // Slide 2 (the last unit before the question) gets 0.5 per step whatever is asked: the probe
    // (an empty question) sees it too. Page 2 gets 0.2 only while the answer is written.
    Fixture f;
    const int32_t near = f.block_in("Lecture.mp4 00:41:30"), read = f.block_in("Report.pdf p. 2");
    sl::SelectionCollector probe(f.ts, B);
    speak(probe, f, {{"Anything at all.", {near}, {0.5f}}});
    const std::vector<float> base = probe.mean_block_mass();
    QCOMPARE(base.size(), static_cast<size_t>(near) + 1);
    QVERIFY(std::abs(base[static_cast<size_t>(near)] - 6 * 0.5f) < 1e-5);  // 2 layers x 3 groups
    QCOMPARE(base[static_cast<size_t>(read)], 0.0f);

    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Graphics are drawn with plot.", {near, read}, {0.5f, 0.2f}}});
    const auto raw = sl::cite(c, *f.tok);
    QCOMPARE(raw.citations.at(0).locator, std::string("Lecture.mp4 00:41:30"));
    sl::CiteOptions o;
    o.baseline = &base;
    const auto a = sl::cite(c, *f.tok, o);
    QCOMPARE(a.citations.size(), size_t{1});
    QCOMPARE(a.citations[0].locator, std::string("Report.pdf p. 2"));
    QCOMPARE(a.with_markers(), std::string("Graphics are drawn with plot [1]."));
}

// Evidence for the fixture's stream: each unit's text as the ask flow gives it.
std::vector<sl::UnitEvidence> evidence(const Fixture& f, sl::Embedder* emb) {
    std::vector<sl::UnitEvidence> ev(f.ts.units.size());
    for (size_t u = 0; u < f.ts.units.size(); ++u) {
        std::vector<int32_t> ids;
        for (const auto& sp : f.ts.spans)
            if (sp.unit == static_cast<int>(u) && sp.kind == sl::SpanKind::Text)
                ids.insert(ids.end(), f.ts.tokens.begin() + sp.begin, f.ts.tokens.begin() + sp.end);
        ev[u].text = f.tok->decode(ids);
        if (emb) ev[u].passages.push_back(emb->embed(ev[u].text));
    }
    return ev;
}

// A sentence about linear models, generated while attention looked at the graphics page (more
// mass) and a little at the linear-models page: the fusion puts the page that supports the
// sentence first, and does not flag it weak.
void TstCitations::fusedSupportOutranksMass() {
    Fixture f;
    HashEmbedder emb;
    const auto ev = evidence(f, &emb);
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Linear models are fitted with the function lm.",
                  {f.block_in("Report.pdf p. 1"), f.block_in("Report.pdf p. 2")}, {0.1f, 0.6f}}});
    // Attention alone ranks page 2 first.
    const sl::Answer by_mass = sl::cite(c, *f.tok);
    QCOMPARE(by_mass.citations[0].locator, std::string("Report.pdf p. 2"));
    sl::CiteOptions o;
    o.evidence = &ev;
    o.embedder = &emb;
    const sl::Answer a = sl::cite(c, *f.tok, o);
    QVERIFY(!a.citations.empty());
    QCOMPARE(a.citations[0].locator, std::string("Report.pdf p. 1"));
    QCOMPARE(a.citations[0].number, 1);
    QVERIFY(a.citations[0].lexical > 0.9);
    QVERIFY(a.citations[0].semantic.has_value());
    QCOMPARE(a.sentences.size(), size_t{1});
    QVERIFY(!a.sentences[0].supports.empty());
    QCOMPARE(a.sentences[0].supports[0].citation, 0);
    QVERIFY(!a.sentences[0].supports[0].weak);
    QVERIFY(a.sentences[0].supports[0].verified);
    // The ranking lists what each signal said; the attended page is there with its mass.
    bool saw_p2 = false;
    for (const auto& r : a.ranking) saw_p2 = saw_p2 || (r.unit_index == 1 && r.path == "/data/Report.pdf" && r.mass > 0);
    QVERIFY(saw_p2);
    QVERIFY(a.ranking.front().score >= a.ranking.back().score);
}

// Dense attention records no selections: the fusion still cites the unit whose text supports the
// sentence, and a sentence nothing supports gets no citation.
void TstCitations::fusedWithoutAttention() {
    Fixture f;
    const auto ev = evidence(f, nullptr);
    sl::SelectionCollector c(f.ts, B);
    c.on_text("Packages are installed with install.packages. Zebras eat grass quietly.");
    sl::CiteOptions o;
    o.evidence = &ev;
    const sl::Answer a = sl::cite(c, *f.tok, o);
    QCOMPARE(a.sentences.size(), size_t{2});
    QVERIFY(!a.sentences[0].supports.empty());
    QCOMPARE(a.citations[static_cast<size_t>(a.sentences[0].supports[0].citation)].locator, std::string("Report.pdf p. 3"));
    QVERIFY(a.sentences[1].supports.empty());
    QVERIFY2(a.with_markers().find("install.packages [1].") != std::string::npos, a.with_markers().c_str());
}

// The answer wandered to linear models while the question was about revenue: numbered by the
// question, the slide asked about is [1] (listed though no sentence cites it) and the page the
// sentence cites keeps its marker; by the fusion alone, the cited page is first.
void TstCitations::questionRelevanceNumbersFirst() {
    Fixture f;
    HashEmbedder emb;
    auto ev = evidence(f, &emb);
    int slide = -1, page = -1;
    for (size_t u = 0; u < f.ts.units.size(); ++u) {
        if (f.ts.units[u].locator == "Deck.pptx slide 1") slide = static_cast<int>(u);
        if (f.ts.units[u].locator == "Report.pdf p. 1") page = static_cast<int>(u);
    }
    QVERIFY(slide >= 0 && page >= 0);
    ev[static_cast<size_t>(slide)].question = 0.05;
    ev[static_cast<size_t>(page)].question = 0.01;
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Linear models are fitted with the function lm.", {f.block_in("Report.pdf p. 1")}, {0.6f}}});
    sl::CiteOptions o;
    o.evidence = &ev;
    o.embedder = &emb;
    const sl::Answer a = sl::cite(c, *f.tok, o);
    QVERIFY(a.citations.size() >= 2);
    QCOMPARE(a.citations[0].locator, std::string("Deck.pptx slide 1"));
    QCOMPARE(a.citations[1].locator, std::string("Report.pdf p. 1"));
    QVERIFY2(a.with_markers().find("lm [2]") != std::string::npos, a.with_markers().c_str());
    o.by_question = false;
    const sl::Answer b = sl::cite(c, *f.tok, o);
    QCOMPARE(b.citations[0].locator, std::string("Report.pdf p. 1"));
    QVERIFY2(b.with_markers().find("lm [1]") != std::string::npos, b.with_markers().c_str());
}

// An answer cut back (a repetition loop removed) keeps only the text before the cut; its citations
// read the steps of that text.
void TstCitations::truncatedTextKeepsItsSteps() {
    Fixture f;
    sl::SelectionCollector c(f.ts, B);
    speak(c, f, {{"Linear models are fitted with lm. ", {f.block_in("Report.pdf p. 1")}, {0.5f}},
                 {"Revenue grew by twelve percent.", {f.block_in("Deck.pptx slide 1")}, {0.2f}}});
    const size_t keep = std::string("Linear models are fitted with lm. ").size();
    c.truncate_text(keep);
    QCOMPARE(c.text(), std::string("Linear models are fitted with lm. "));
    QVERIFY(!c.marks().empty());
    QVERIFY(c.marks().back().text_end <= keep);
    const sl::Answer a = sl::cite(c, *f.tok);
    QCOMPARE(a.sentences.size(), size_t{1});
    QVERIFY2(a.with_markers() == "Linear models are fitted with lm [1]. ", a.with_markers().c_str());
}

void TstCitations::deliveredSelectionsReachTheCollector() {
    // Selections made on the device come back through MsaAttention::deliver (Session on CUDA):
    // they become the layer's last selections and reach an attached collector as the CPU's own do;
    // calls of several tokens (prefill) are ignored by the collector, as ever.
    Fixture f;
    sl::MsaConfig mc;
    mc.block_size = B;
    sl::MsaAttention msa(mc);
    sl::SelectionCollector c(f.ts, B);
    c.attach(msa);
    QVERIFY(msa.config().token_mass);  // what makes the device record masses
    const int32_t page1 = f.block_in("Report.pdf p. 1");
    const int64_t pos = f.answer_pos(0);
    sl::Selection s;
    s.kv_head = 1;
    s.q_pos0 = pos;
    s.n_queries = 1;
    s.blocks = {page1, static_cast<int32_t>(pos / B)};
    s.mass = {0.25f, 0.75f};
    s.token_mass.assign(2 * B, 0.0f);
    s.token_mass[3] = 0.25f;
    s.token_mass[B + 1] = 0.75f;
    sl::AttentionCall call;
    call.layer = 2;
    call.pos0 = pos;
    call.n_tokens = 1;
    msa.deliver(call, {s});
    QCOMPARE(msa.last_selections(2).size(), size_t{1});
    QCOMPARE(msa.last_selections(2)[0].blocks, s.blocks);
    QCOMPARE(c.steps().size(), size_t{1});
    QCOMPARE(c.steps()[0].pos, pos);
    QCOMPARE(c.steps()[0].blocks.size(), size_t{1});  // the local block is not a source
    QCOMPARE(c.steps()[0].blocks[0].first, page1);
    QCOMPARE(c.steps()[0].blocks[0].second, 0.25f);
    QCOMPARE(c.steps()[0].tokens[0][3], 0.25f);
    call.n_tokens = 5;  // a prefill call's selections: stored, not collected
    msa.deliver(call, {s});
    QCOMPARE(c.steps().size(), size_t{1});
    sl::SelectionCollector::detach(msa);
    QVERIFY(!msa.config().token_mass);
}

QTEST_GUILESS_MAIN(TstCitations)
#include "tst_citations.moc"
