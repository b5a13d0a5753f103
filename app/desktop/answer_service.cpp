#include "app/desktop/answer_service.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/context/lexical_rank.h"
#include "core/document/locator.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"

namespace sl::desktop {

const char* to_string(Effort e) {
    switch (e) {
        case Effort::Low: return "low";
        case Effort::Medium: return "medium";
        case Effort::High: return "high";
    }
    return "medium";
}

Effort effort_from_string(const std::string& s) {
    if (s == "low") return Effort::Low;
    if (s == "high") return Effort::High;
    return Effort::Medium;
}

namespace {

std::string trimmed(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes) return s;
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    return s.substr(0, cut) + " ...";
}

std::string unit_text(const doc::Unit& u) {
    std::string text;
    for (const auto& b : u.blocks) text += b.text + "\n";
    return text;
}

// The region of `u` that best matches `question`: the box (or time) of its best block, and the text
// of its two best blocks as the excerpt.
void locate_within(const std::string& question, const doc::Unit& u, Citation& c) {
    std::vector<std::string> texts;
    for (const auto& b : u.blocks) texts.push_back(b.text);
    if (texts.empty()) return;
    const LexicalIndex index(texts);
    auto hits = index.rank(question, 2);
    if (hits.empty()) hits.push_back({0, 0.0});
    const doc::Block& best = u.blocks[hits[0].passage];
    if (best.bbox && best.bbox->valid()) c.ref.bbox = *best.bbox;
    if (best.time) c.ref.time = *best.time;
    std::string excerpt;
    for (const auto& h : hits) excerpt += u.blocks[h.passage].text + "\n";
    c.excerpt = trimmed(excerpt, 400);
}

}  // namespace

std::vector<Citation> rank_sources(const std::string& question, const DocumentList& docs, size_t k) {
    struct Where {
        const doc::Document* d;
        const doc::Unit* u;
    };
    std::vector<std::string> texts;
    std::vector<Where> where;
    for (const auto& d : docs) {
        if (!d) continue;
        for (const auto& u : d->units) {
            std::string t = unit_text(u);
            if (t.empty()) continue;
            texts.push_back(std::move(t));
            where.push_back({d.get(), &u});
        }
    }
    std::vector<Citation> out;
    if (texts.empty()) return out;
    const LexicalIndex index(texts);
    for (const auto& h : index.rank(question, k)) {
        const Where& w = where[h.passage];
        Citation c;
        c.number = static_cast<int>(out.size()) + 1;
        c.ref.document = w.d->id;
        c.ref.unit = w.u->index;
        c.path = w.d->path;
        c.locator = doc::full_locator(*w.d, *w.u);
        c.score = h.score;
        locate_within(question, *w.u, c);
        if (!c.ref.time && w.u->time) c.ref.time = w.u->time;
        if (c.excerpt.empty()) c.excerpt = trimmed(texts[h.passage], 400);
        out.push_back(std::move(c));
    }
    return out;
}

void verify_citations(const std::string& answer_text, std::vector<Citation>& citations) {
    const auto answer_words = LexicalIndex::words(answer_text);
    const std::set<std::string> answer_set(answer_words.begin(), answer_words.end());
    for (auto& c : citations) {
        const auto w = LexicalIndex::words(c.excerpt);
        const std::set<std::string> source(w.begin(), w.end());
        size_t shared = 0;
        for (const auto& a : answer_set) shared += source.count(a);
        // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...).
        std::string marker = "[";
        marker += std::to_string(c.number);
        marker += ']';
        const bool cited_inline = answer_text.find(marker) != std::string::npos;
        const double overlap = answer_set.empty() ? 0.0 : static_cast<double>(shared) / static_cast<double>(answer_set.size());
        c.weak = overlap < 0.15 || shared < 2;
        if (c.weak)
            c.weak_reason = "shares " + std::to_string(shared) + " of " + std::to_string(answer_set.size()) +
                            " content words with the answer";
        else if (!cited_inline)
            c.weak_reason = "read, not cited inline";
    }
}

LexicalAnswerService::LexicalAnswerService(std::string model_path) : model_path_(std::move(model_path)) {}
LexicalAnswerService::~LexicalAnswerService() = default;

std::string LexicalAnswerService::model_name() const {
    return std::filesystem::path(model_path_).filename().string();
}

Answer LexicalAnswerService::answer(const std::string& question, const DocumentList& docs, const AnswerOptions& options,
                                    const std::function<bool(std::string_view)>& on_text,
                                    const std::atomic<bool>* cancel) {
    const std::lock_guard lock(mutex_);
    if (!model_) model_ = load_model(model_path_);
    const size_t k = options.effort == Effort::Low ? 2 : options.effort == Effort::High ? 5 : 3;
    const int max_tokens = options.effort == Effort::Low ? 80 : options.effort == Effort::High ? 256 : 160;
    const size_t excerpt_bytes = options.effort == Effort::High ? 1500 : 1000;

    Answer a;
    a.question = question;
    a.model = model_name();
    a.citations = rank_sources(question, docs, k);
    if (a.citations.empty())
        throw Error("no ready document mentions the words of the question; add documents or rephrase it");
    std::string sources;
    for (const auto& c : a.citations) {
        // The whole unit's text goes to the model; the citation keeps the best region.
        std::string text;
        for (const auto& d : docs)
            if (d && d->id == c.ref.document && c.ref.unit < static_cast<int>(d->units.size()))
                text = unit_text(d->units[static_cast<size_t>(c.ref.unit)]);
        sources += '[';
        sources += std::to_string(c.number);
        sources += "] (" + c.locator + ")\n" + trimmed(text, excerpt_bytes) + "\n\n";
    }
    const std::string user = "Sources:\n\n" + sources +
                             "Using only the sources above, answer briefly and cite sources as [1], [2]: " + question;
    const std::vector<ChatMessage> msgs{{"user", user}};
    const auto tokens = model_->tokenizer->encode(model_->chat->render(msgs, true), false, true);
    SessionOptions so;
    so.n_ctx = static_cast<int>(tokens.size()) + max_tokens + 8;
    Session session(*model_, so);
    session.prefill(tokens);
    a.context_tokens = static_cast<int>(tokens.size());
    GenerateOptions gen;
    gen.max_tokens = max_tokens;
    gen.sampling.greedy = options.greedy;
    gen.stop = model_->chat->stop_strings();
    session.generate(
        gen,
        [&](std::string_view t) {
            a.text += t;
            return on_text ? on_text(t) : true;
        },
        cancel);
    verify_citations(a.text, a.citations);
    a.method = "sources chosen by lexical ranking (BM25) of pages, slides and segments; citations verified by word overlap";
    a.finished = true;
    return a;
}

}  // namespace sl::desktop
