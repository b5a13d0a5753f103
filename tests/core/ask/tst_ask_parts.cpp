// The ask flow's parts, without a model: the typed context spec (the old settings text decodes and
// encodes the same), the JSON writer, the answer guard (repetition loops, sentence ends), the unit
// embeddings cache (one embedding per passage, reused, a corrupt file ignored), the question-aware
// unit ranking (BM25 fused with embeddings), the global budget plan (the best units of the whole
// library, whichever document holds them), the attention choice and the kv/ size cap (least
// recently used first, orphans first, the context in use kept).
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "core/answer/verify.h"
#include "core/ask/answer_guard.h"
#include "core/ask/attention_choice.h"
#include "core/ask/context_spec.h"
#include "core/ask/kv_budget.h"
#include "core/ask/unit_embeddings.h"
#include "core/ask/unit_ranking.h"
#include "core/context/budget_planner.h"
#include "core/context/context_builder.h"
#include "core/embed/json.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/library/library.h"
#include "core/model/llama_model.h"
#include "core/util/json_writer.h"
#include "tests/core/context/synthetic_docs.h"

namespace {

// Bag of words hashed into 64 dimensions, with "regression" and "lm" sharing a dimension (a
// stand-in for a model that knows they are related). Counts its calls.
class WordsEmbedder : public sl::Embedder {
public:
    std::vector<float> embed(std::string_view text) override {
        ++calls;
        std::vector<float> v(64, 0.0f);
        std::string w;
        auto flush = [&] {
            if (w == "regression" || w == "lm" || w == "linear") v[0] += 1.0f;
            else if (w.size() > 2) v[1 + std::hash<std::string>{}(w) % 63] += 1.0f;
            w.clear();
        };
        for (char ch : text) {
            if (std::isalnum(static_cast<unsigned char>(ch))) w.push_back(static_cast<char>(std::tolower(ch)));
            else flush();
        }
        flush();
        return v;
    }
    std::string name() const override { return "words"; }
    int calls = 0;
};

}  // namespace

class TstAskParts : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void contextSpec();
    void jsonWriter();
    void guardStopsLoops();
    void guardSentenceEnd();
    void passages();
    void embeddingsCached();
    void rankingFusesMeaning();
    void planGlobal();
    void attentionChoice();
    void kvCap();
    void kvCapKeepsBases();
};

void TstAskParts::contextSpec() {
    // The text the library prefill wrote before the type existed.
    const std::string old = "{\"attention\":\"msa\",\"block\":128,\"top_k\":16,\"scoring\":\"hybrid8/group-mean/sink/w16/p98x8/c32k\","
                            "\"remap\":4096,\"library_prefill\":true,\"max_tokens\":131072,\"prefix_sha256\":\"ab12\"}";
    const auto s = sl::ContextSpec::decode(old);
    QVERIFY(s.has_value());
    QVERIFY(s->msa);
    QCOMPARE(s->block, 128);
    QCOMPARE(s->top_k, 16);
    QCOMPARE(s->remap_window, 4096);
    QVERIFY(s->library_prefill);
    QCOMPARE(s->max_tokens, int64_t{131072});
    QCOMPARE(s->encode(), old);
    // A question context (the ask flow's old key) and a dense one.
    const std::string q = "{\"attention\":\"msa\",\"block\":128,\"top_k\":8,\"prefix_sha256\":\"ff\"}";
    QCOMPARE(sl::ContextSpec::decode(q)->encode(), q);
    sl::ContextSpec d;
    d.msa = false;
    d.prefix_sha256 = "00";
    QCOMPARE(sl::ContextSpec::decode(d.encode()), std::optional<sl::ContextSpec>(d));
    QVERIFY(!sl::ContextSpec::decode(d.encode()).value().library_prefill);
    // Not a spec.
    for (const char* bad : {"", "[1]", "{\"attention\":\"msa\"}", "{\"attention\":\"sparse\",\"block\":1,\"prefix_sha256\":\"\"}",
                            "{\"attention\":\"msa\",\"block\":128,\"prefix_sha256\":\"x\"", "\"library_prefill\":true"})
        QVERIFY2(!sl::ContextSpec::decode(bad).has_value(), bad);
}

void TstAskParts::jsonWriter() {
    sl::JsonWriter w;
    w.begin_object();
    w.key("s"), w.value(std::string("a\"b\\c\n\x01\xC3\xA9"));
    w.key("n"), w.value(0.1);
    w.key("i"), w.value(int64_t{-9007199254740993});
    w.key("a");
    w.begin_array();
    w.value(true), w.null(), w.value(1.0 / 0.0);
    w.begin_object();
    w.end_object();
    w.end_array();
    w.end_object();
    const sl::JsonValue v = sl::JsonValue::parse(w.str(), "test");
    QCOMPARE(v.find("s")->text(), std::string("a\"b\\c\n\x01\xC3\xA9"));
    QCOMPARE(v.find("n")->as_double(), 0.1);
    QCOMPARE(v.find("i")->text(), std::string("-9007199254740993"));
    QCOMPARE(v.find("a")->items().size(), size_t{4});
    // Text cut inside characters (a snippet starting mid-token): still valid UTF-8, U+FFFD for the
    // stray bytes, valid sequences (2, 3 and 4 bytes) kept.
    const std::string cut = "\x95 where \xCF\x95 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\xA0\x80 \xC0\xAF end\xE2\x82";
    QCOMPARE(sl::json_quote(cut), std::string("\"\xEF\xBF\xBD where \xCF\x95 \xE2\x82\xAC \xF0\x9F\x98\x80 "
                                              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBD\xEF\xBF\xBD\""));
    QCOMPARE(v.find("a")->items()[2].as_double(), 0.0);  // infinity written as 0
}

void TstAskParts::guardStopsLoops() {
    sl::AnswerGuard g;
    const std::string intro = "Use lm() to fit a model. ";
    const std::string loop = "The function returns the coefficients of the fitted model as a vector. ";
    bool go = g.on_text(intro);
    int pieces = 0;
    for (int i = 0; i < 6 && go; ++i, ++pieces) go = g.on_text(loop);
    QVERIFY(!go);
    QVERIFY(g.looped());
    QVERIFY(pieces <= 3);
    // Cut back to the end of the sentence before the second occurrence: intro + one loop.
    QCOMPARE(g.text().substr(0, g.keep()), intro + loop.substr(0, loop.size() - 1));
    // A repeated line (a list that repeats itself).
    sl::AnswerGuard l;
    go = true;
    for (int i = 0; i < 5 && go; ++i) go = l.on_text("- summary(fit) prints it\n");
    QVERIFY(!go);
    QCOMPARE(l.text().substr(0, l.keep()), std::string("- summary(fit) prints it\n"));
    // Ordinary text with repeated short words is not a loop.
    sl::AnswerGuard ok;
    for (int i = 0; i < 10; ++i) QVERIFY(ok.on_text("Step " + std::to_string(i) + ": call the function with x and y. "));
    QVERIFY(!ok.looped());
    QCOMPARE(ok.keep(), ok.text().size());
}

void TstAskParts::guardSentenceEnd() {
    using G = sl::AnswerGuard;
    QCOMPARE(G::last_sentence_end("Fit it with lm(). Then call summary"), size_t{17});
    QCOMPARE(G::last_sentence_end("Done."), size_t{5});
    QCOMPARE(G::last_sentence_end("Done!  \n"), size_t{8});
    QCOMPARE(G::last_sentence_end("See e.g. the manual and"), size_t{0});
    QCOMPARE(G::last_sentence_end("One.\n\nTwo and"), size_t{6});
    QCOMPARE(G::last_sentence_end("no end at all"), size_t{0});
    QCOMPARE(G::last_sentence_end("(as said.) and more"), size_t{10});
}

void TstAskParts::passages() {
    std::string t;
    for (int i = 0; i < 500; ++i) t += "word" + std::to_string(i) + " \n";
    const auto p = sl::UnitEmbeddings::passages(t, 1000);
    QVERIFY(p.size() >= 4);
    std::string joined, collapsed;
    for (const auto& s : p) {
        QVERIFY(s.size() <= 1100);
        QVERIFY(!s.empty() && s.front() != ' ' && s.back() != ' ');
        joined += (joined.empty() ? "" : " ") + s;
    }
    for (int i = 0; i < 500; ++i) collapsed += (i ? " word" : "word") + std::to_string(i);
    QCOMPARE(joined, collapsed);  // nothing lost (white space collapsed)
    QVERIFY(sl::UnitEmbeddings::passages(" \n\t ", 1000).empty());
    QCOMPARE(sl::UnitEmbeddings::passages("short", 1000), std::vector<std::string>{"short"});
}

void TstAskParts::embeddingsCached() {
    QTemporaryDir tmp;
    const std::filesystem::path dir = tmp.path().toStdString();
    WordsEmbedder e;
    const std::string long_text(2500, 'x');
    std::vector<sl::UnitEmbeddings::Request> req{{"docA", 0, "alpha beta gamma"}, {"docA", 3, long_text}, {"docB", 1, ""}};
    std::vector<std::vector<std::vector<float>>> first;
    {
        sl::UnitEmbeddings u(dir, e);
        size_t reported = 0;
        first = u.get(req, [&](size_t done, size_t total) { reported = done == total ? total : reported; });
        QCOMPARE(first.size(), size_t{3});
        QCOMPARE(first[0].size(), size_t{1});
        QCOMPARE(first[1].size(), size_t{3});  // 2,500 bytes in passages of about 1,000
        QVERIFY(first[2].empty());
        QCOMPARE(reported, size_t{4});
    }
    const int calls = e.calls;
    {
        sl::UnitEmbeddings u(dir, e);  // a new process: read from the files
        const auto again = u.get(req);
        QCOMPARE(e.calls, calls);
        QCOMPARE(again, first);
        // A changed text is embedded again.
        auto changed = req;
        changed[0].text = "alpha beta delta";
        u.get(changed);
        QCOMPARE(e.calls, calls + 1);
    }
    // A damaged file is ignored (and rewritten), never trusted.
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
        std::filesystem::resize_file(f.path(), std::filesystem::file_size(f.path()) - 7);
    }
    {
        sl::UnitEmbeddings u(dir, e);
        const auto again = u.get(req);
        QVERIFY(e.calls > calls + 1);
        QCOMPARE(again[1].size(), size_t{3});
    }
}

void TstAskParts::rankingFusesMeaning() {
    auto tok = sl::test::byte_tokenizer();
    const sl::doc::Document pdf = sl::test::report_pdf(), deck = sl::test::deck_pptx();
    const std::array<const sl::doc::Document*, 2> docs{&pdf, &deck};
    const sl::PreparedContext p = sl::ContextBuilder(*tok, sl::test::chatml(), {}).prepare(docs);
    // Lexical only: the words of page 3 win.
    const sl::UnitRanking lex = sl::rank_units(p, "How are packages installed?", *tok, nullptr);
    QCOMPARE(p.units[lex.order[0]].meta.locator, std::string("Report.pdf p. 3"));
    QVERIFY(!lex.semantic);
    // "regression" shares no word with page 1 ("Linear models are fitted with the function lm."),
    // but the embedder relates them: the fusion ranks page 1 first.
    QTemporaryDir tmp;
    WordsEmbedder e;
    sl::UnitEmbeddings cache(tmp.path().toStdString(), e);
    const sl::UnitRanking r = sl::rank_units(p, "regression", *tok, &cache);
    QVERIFY(r.semantic);
    QCOMPARE(r.bm25[r.order[0]], 0.0);
    QCOMPARE(p.units[r.order[0]].meta.locator, std::string("Report.pdf p. 1"));
    QVERIFY(r.cosine[r.order[0]] > 0.3);
    QCOMPARE(r.passages.size(), p.units.size());
}

void TstAskParts::planGlobal() {
    auto tok = sl::test::byte_tokenizer();
    const sl::doc::Document pdf = sl::test::report_pdf(), deck = sl::test::deck_pptx();
    const std::array<const sl::doc::Document*, 2> docs{&pdf, &deck};
    const sl::PreparedContext p = sl::ContextBuilder(*tok, sl::test::chatml(), {}).prepare(docs);
    const sl::EffortSettings es = sl::effort_settings(sl::Effort::Low);
    sl::PlanOptions po;
    // Room for about two units: the two the priorities prefer, both from the PDF (fair shares
    // would give the deck half).
    int64_t two = 0;
    two = p.units[0].tokens() + p.units[2].tokens();
    const int64_t fixed = static_cast<int64_t>(p.opening.size() + p.closing.size()) + p.question_reserve + po.question_tokens + es.answer_tokens;
    po.unit_priority.assign(p.units.size(), 0.0);
    po.unit_priority[0] = 2;  // Report p. 1
    po.unit_priority[2] = 1;  // Report p. 3
    po.global = true;
    const sl::BudgetPlan plan = sl::plan_budget(p, fixed + two + 4, es, po);
    QVERIFY(plan.keep[0][0]);
    QVERIFY(plan.keep[2][0]);
    QVERIFY(!plan.keep[1][0]);
    for (size_t i = 3; i < p.units.size(); ++i) QVERIFY(!plan.keep[i][0]);
    QCOMPARE(plan.sources[0].units_kept, 2);
    QCOMPARE(plan.sources[1].units_kept, 0);
    QVERIFY(plan.total_planned <= plan.available);
    // Without `global`, each source keeps a share.
    po.global = false;
    const sl::BudgetPlan fair = sl::plan_budget(p, fixed + two + 4, es, po);
    QVERIFY(fair.sources[1].units_kept > 0);
}

void TstAskParts::attentionChoice() {
    sl::LlamaConfig m;
    m.n_ctx_train = 8192;
    const auto a = sl::choose_attention(m, 4000, sl::Effort::Low);
    QCOMPARE(a.mode, std::string(sl::kTrainingFreeMode));
    QCOMPARE(a.config.top_k, 8);
    QVERIFY(a.config.positions == sl::PositionMode::Original);
    const auto b = sl::choose_attention(m, 100000, sl::Effort::High);
    QCOMPARE(b.config.top_k, 32);
    QVERIFY(b.config.positions == sl::PositionMode::Remap);
    QCOMPARE(b.config.remap_window, 4096);
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::choose_attention(m, 10, sl::Effort::Medium, 128, "no-such-mode"));
}

void TstAskParts::kvCap() {
    QTemporaryDir tmp;
    sl::Library lib = sl::Library::open(tmp.path().toStdString());
    auto file = [&](const std::string& name, size_t bytes) {
        const auto p = lib.kv_dir() / name;
        std::ofstream(p, std::ios::binary) << std::string(bytes, 'k');
        return p.string();
    };
    std::vector<std::string> paths;
    for (int i = 0; i < 4; ++i) {
        sl::KvCacheRecord r;
        r.path = file("ctx" + std::to_string(i) + ".slkv", 1000);
        r.model_fingerprint = "m";
        r.settings = "{\"i\":" + std::to_string(i) + "}";
        r.state = sl::KvCacheState::Complete;
        lib.save_kv_cache(r);
        paths.push_back(r.path);
        QTest::qWait(5);  // distinct updated_ms
    }
    file("orphan.slkv.tmp", 500);
    // Under the cap: nothing goes.
    QCOMPARE(sl::trim_kv_folder(lib, 10000, {}).removed, 0);
    // 4,500 bytes, cap 2,500, ctx0 (the oldest) in use: the orphan, then ctx1 and ctx2 go.
    const sl::KvTrim t = sl::trim_kv_folder(lib, 2500, {paths[0]});
    QCOMPARE(t.removed, 3);
    QCOMPARE(t.total, int64_t{2000});
    QVERIFY(std::filesystem::exists(paths[0]));
    QVERIFY(!std::filesystem::exists(paths[1]));
    QVERIFY(!std::filesystem::exists(paths[2]));
    QVERIFY(std::filesystem::exists(paths[3]));
    QVERIFY(!std::filesystem::exists(lib.kv_dir() / "orphan.slkv.tmp"));
    QCOMPARE(lib.list_kv_caches().size(), size_t{2});
    // A library prefill larger than the cap, exempt (read by the question): neither counted nor
    // removed; the rest stays under the cap around it (ctx3 in use, ctx0 the least recent: goes).
    const std::string big = file("library-big.slkv", 5000);
    const sl::KvTrim e = sl::trim_kv_folder(lib, 1500, {paths[3]}, {big});
    QCOMPARE(e.removed, 1);
    QCOMPARE(e.total, int64_t{1000});
    QVERIFY(std::filesystem::exists(big));
    QVERIFY(!std::filesystem::exists(paths[0]));
    QVERIFY(std::filesystem::exists(paths[3]));
    // Not exempt, it counts and goes like any other file.
    QCOMPARE(sl::trim_kv_folder(lib, 1500, {paths[3]}).removed, 1);
    QVERIFY(!std::filesystem::exists(big));
}

// kv/'s cap and delta files: a kept delta keeps its base; removing a base removes its deltas.
void TstAskParts::kvCapKeepsBases() {
    auto make = [](sl::Library& lib, std::vector<std::string>& paths) {
        sl::KvCacheOptions ko;
        ko.type = sl::KvType::F16;
        ko.block_size = 4;
        sl::KvCache kv(1, 64, 1, 4, ko);
        std::vector<float> k(4, 0.5f);
        for (int p = 0; p < 10; ++p) kv.write(0, p, k.data(), k.data());
        kv.set_n_past(10);
        sl::KvFileInfo in;
        in.fingerprint = std::string(64, 'f');
        in.n_layer = 1;
        in.n_kv_head = 1;
        in.head_dim = 4;
        in.block_size = 4;
        in.n_vocab = 8;
        in.type = sl::KvType::F16;
        in.page_bytes = kv.page_bytes();
        const std::vector<int32_t> t{1, 2, 3, 4, 5, 6, 7, 0, 1, 2};
        const std::vector<float> logits(8, 0.f);
        // A (oldest), B, C whole; D a delta over A (newest).
        for (const char* name : {"A.slkv", "B.slkv", "C.slkv", "D.slkv"}) {
            const std::string path = (lib.kv_dir() / name).string();
            sl::KvFileBase base;
            if (name[0] == 'D') base = {"A.slkv", 6, sl::kv_tokens_hash(t, 6)};
            sl::write_kv_file(path, in, kv, t, logits, {}, base);
            sl::KvCacheRecord r;
            r.path = path;
            r.model_fingerprint = "m";
            r.settings = std::string("{\"f\":\"") + name + "\"}";
            r.state = sl::KvCacheState::Complete;
            lib.save_kv_cache(r);
            paths.push_back(path);
            QTest::qWait(5);
        }
    };
    auto size = [](const std::string& p) { return static_cast<int64_t>(std::filesystem::file_size(p)); };
    {
        QTemporaryDir tmp;
        sl::Library lib = sl::Library::open(tmp.path().toStdString());
        std::vector<std::string> p;
        make(lib, p);
        QCOMPARE(sl::kv_file_base(p[3]).name, std::string("A.slkv"));
        // D in use: A (the oldest) stays as its base; B and C go.
        const sl::KvTrim t = sl::trim_kv_folder(lib, size(p[0]) + size(p[3]), {p[3]});
        QCOMPARE(t.removed, 2);
        QVERIFY(std::filesystem::exists(p[0]) && std::filesystem::exists(p[3]));
        QVERIFY(!std::filesystem::exists(p[1]) && !std::filesystem::exists(p[2]));
    }
    {
        QTemporaryDir tmp;
        sl::Library lib = sl::Library::open(tmp.path().toStdString());
        std::vector<std::string> p;
        make(lib, p);
        // C in use: A goes first (the oldest), and D with it, unusable without A.
        const sl::KvTrim t = sl::trim_kv_folder(lib, size(p[1]) + size(p[2]), {p[2]});
        QCOMPARE(t.removed, 2);
        QVERIFY(!std::filesystem::exists(p[0]) && !std::filesystem::exists(p[3]));
        QVERIFY(std::filesystem::exists(p[1]) && std::filesystem::exists(p[2]));
        QCOMPARE(lib.list_kv_caches().size(), size_t{2});
    }
    {
        // A exempt (the library prefill a question reads, named another way): neither counted nor
        // removed, while B and D (a delta over it) go to bring the rest under a cap that C (in
        // use) fills.
        QTemporaryDir tmp;
        sl::Library lib = sl::Library::open(tmp.path().toStdString());
        std::vector<std::string> p;
        make(lib, p);
        const std::string a_other = (lib.kv_dir() / "." / "A.slkv").string();
        const sl::KvTrim t = sl::trim_kv_folder(lib, size(p[2]), {p[2]}, {a_other});
        QCOMPARE(t.removed, 2);
        QCOMPARE(t.total, size(p[2]));
        QVERIFY(std::filesystem::exists(p[0]));
        QVERIFY(!std::filesystem::exists(p[1]));
        QVERIFY(std::filesystem::exists(p[2]));
        QVERIFY(!std::filesystem::exists(p[3]));
    }
}

QTEST_GUILESS_MAIN(TstAskParts)
#include "tst_ask_parts.moc"
