#include "core/ask/ask_parts.h"

#include <ctime>
#include <map>
#include <memory>

#include "core/answer/answer_json.h"
#include "core/ask/unit_embeddings.h"
#include "core/library/library.h"
#include "core/util/json_writer.h"

namespace sl {

double since(AskClock::time_point t) { return std::chrono::duration<double>(AskClock::now() - t).count(); }

std::string now_iso() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

namespace {

// Stream unit (source, unit index) -> prepared unit.
std::map<std::pair<int, int>, size_t> prepared_index(const PreparedContext& p) {
    std::map<std::pair<int, int>, size_t> m;
    for (size_t i = 0; i < p.units.size(); ++i) m[{p.units[i].meta.source, p.units[i].meta.unit}] = i;
    return m;
}

}  // namespace

std::vector<UnitEvidence> evidence_of(const TokenStream& ts, const PreparedContext& p, const UnitRanking& rank) {
    const auto index = prepared_index(p);
    std::vector<UnitEvidence> ev(ts.units.size());
    for (size_t u = 0; u < ts.units.size(); ++u) {
        const auto it = index.find({ts.units[u].source, ts.units[u].unit});
        if (it == index.end()) continue;
        ev[u].text = rank.texts[it->second];
        ev[u].passage_texts = UnitEmbeddings::passages(ev[u].text, UnitEmbeddings::kPassageChars);
        ev[u].passages = rank.passages[it->second];
        ev[u].question = rank.score[it->second];
    }
    return ev;
}

std::string describe_ranked(const TokenStream& ts, size_t of, int64_t from) {
    std::string list;
    size_t n = 0;
    for (const auto& u : ts.units) {
        if (u.begin < from) continue;
        if (n < 8) list += (n ? ", " : "") + u.locator;
        else if (n == 8) list += ", ...";
        ++n;
    }
    return std::to_string(n) + (n == 1 ? " unit" : " units") + " ranked best for the question, of " +
           std::to_string(of) + (list.empty() ? "" : " (" + list + ")");
}

UnitRanking rank_for(const PreparedContext& p, Library& lib, const Tokenizer& tok, const AskOptions& o,
                     const AskCallbacks& cb) {
    std::unique_ptr<UnitEmbeddings> cache;
    if (o.embedder) cache = std::make_unique<UnitEmbeddings>(lib.dir() / "embed", *o.embedder, UnitEmbeddings::kPassageChars);
    auto last = AskClock::now() - std::chrono::seconds(10);
    return rank_units(p, o.question, tok, cache.get(), [&](size_t done, size_t total) {
        if (!cb.on_status) return;
        if (done < total && since(last) < 2.0) return;
        last = AskClock::now();
        cb.on_status("embedding the library's passages for semantic search (once): " + std::to_string(done) + " of " +
                     std::to_string(total));
    });
}

void store_chat(Library& lib, const AskOptions& o, const TokenStream& ts, const std::vector<DocId>& ids, AskResult& r,
                const std::function<void(JsonWriter&)>& engine_fields) {
    JsonWriter w;
    w.begin_object();
    w.key("effort"), w.value(to_string(o.effort));
    if (o.temperature > 0) w.key("temperature"), w.value(static_cast<double>(o.temperature));
    engine_fields(w);
    w.key("context_tokens"), w.value(ts.prefix_tokens);
    w.key("restored"), w.value(r.restored);
    w.key("semantic"), w.value(o.embedder != nullptr);
    w.key("baseline"), w.value(r.baseline);
    if (r.from_library_prefill) {
        w.key("library_prefill"), w.value(true);
        w.key("library_tokens"), w.value(r.library_tokens);
        w.key("library_prefilled"), w.value(r.library_saved);
    }
    if (!r.read_summary.empty()) w.key("read"), w.value(r.read_summary);
    w.key("stop"), w.value(r.answer.stop_reason);
    // What the context held (for evaluation: was the right place read at all).
    w.key("context_units");
    w.begin_array();
    for (const auto& u : ts.units) {
        if (u.begin >= ts.prefix_tokens) continue;
        w.begin_array();
        w.value(ts.sources[static_cast<size_t>(u.source)].name);
        w.value(u.unit);
        if (u.time) w.value(u.time->t0), w.value(u.time->t1);
        w.end_array();
    }
    w.end_array();
    w.key("documents");
    w.begin_array();
    for (DocId id : ids) w.value(id);
    w.end_array();
    w.key("when"), w.value(now_iso());
    w.end_object();
    r.settings_json = w.str();
    ChatRecord chat;
    chat.question = o.question;
    chat.answer = r.answer.with_markers();
    chat.citations = answer_to_json(r.answer);
    chat.settings = r.settings_json;
    r.chat_id = lib.add_chat(chat);
}

}  // namespace sl
