#include "core/answer/citations.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

#include "core/answer/verify.h"
#include "core/context/lexical_rank.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"

namespace sl {

namespace {

bool space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Per step: mass per (unit, KV block). Units are TokenStream::units indices.
struct UnitMass {
    int unit;
    int32_t block;
    double mass;
};

std::vector<UnitMass> step_units(const SelectionCollector::Step& step, const TokenStream& ts, int B,
                                 const std::vector<float>* baseline) {
    std::vector<UnitMass> out;
    for (size_t bi = 0; bi < step.blocks.size(); ++bi) {
        auto [b, m] = step.blocks[bi];
        if (baseline && static_cast<size_t>(b) < baseline->size()) m = std::max(0.0f, m - (*baseline)[static_cast<size_t>(b)]);
        if (m <= 0) continue;
        const int64_t lo = static_cast<int64_t>(b) * B;
        const int64_t hi = std::min<int64_t>(lo + B, ts.prefix_tokens);
        if (hi <= lo) continue;
        // A block's mass goes to the units of its tokens: by the attention each token received
        // when the step recorded it, else by token count.
        const std::vector<float>* tok = bi < step.tokens.size() && step.tokens[bi].size() == static_cast<size_t>(B)
                                            ? &step.tokens[bi] : nullptr;
        double tok_total = 0;
        if (tok)
            for (const float x : *tok) tok_total += x;
        if (tok_total <= 0) tok = nullptr;
        const auto [s0, s1] = ts.spans_in(lo, hi);
        for (size_t si = s0; si < s1; ++si) {
            const auto& sp = ts.spans[si];
            if (sp.unit < 0 || sp.kind == SpanKind::Marker) continue;  // reading a marker is not reading the unit
            const int64_t b0 = std::max(lo, sp.begin), b1 = std::min(hi, sp.end);
            if (b1 <= b0) continue;
            double share = static_cast<double>(b1 - b0) / static_cast<double>(B);
            if (tok) {
                double x = 0;
                for (int64_t p = b0; p < b1; ++p) x += (*tok)[static_cast<size_t>(p - lo)];
                share = x / tok_total;
            }
            const double part = static_cast<double>(m) * share;
            if (part <= 0) continue;
            if (!out.empty() && out.back().unit == sp.unit && out.back().block == b) out.back().mass += part;
            else out.push_back({sp.unit, b, part});
        }
    }
    return out;
}

// Words cut at a UTF-8 boundary and a space, with "..." where text was left out.
std::string clip(std::string s, size_t max_chars) {
    // A region that starts or ends inside a character (a byte-level token split it): drop the
    // partial bytes at both ends.
    size_t lead = 0;
    while (lead < s.size() && lead < 3 && (static_cast<unsigned char>(s[lead]) & 0xC0) == 0x80) ++lead;
    s.erase(0, lead);
    s.resize(unicode::utf8_complete_prefix(s));
    for (auto& ch : s)
        if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
    std::string t;
    for (char ch : s)
        if (!(ch == ' ' && (t.empty() || t.back() == ' '))) t.push_back(ch);
    while (!t.empty() && t.back() == ' ') t.pop_back();
    if (t.size() <= max_chars) return t;
    size_t cut = unicode::utf8_complete_prefix(std::string_view(t).substr(0, max_chars));
    const size_t sp = t.rfind(' ', cut);
    if (sp != std::string::npos && sp > max_chars / 2) cut = sp;
    return t.substr(0, cut) + " ...";
}

// Decoded text of the stream's tokens [b, e) that belong to `unit`'s text (markers left out).
std::string unit_text(const TokenStream& ts, const Tokenizer& tok, int unit, int64_t b, int64_t e) {
    std::vector<int32_t> ids;
    const auto [s0, s1] = ts.spans_in(b, e);
    for (size_t si = s0; si < s1; ++si) {
        const auto& sp = ts.spans[si];
        if (sp.unit != unit || sp.kind != SpanKind::Text) continue;
        const int64_t lo = std::max(b, sp.begin), hi = std::min(e, sp.end);
        ids.insert(ids.end(), ts.tokens.begin() + lo, ts.tokens.begin() + hi);
    }
    return tok.decode(ids);
}

// Adds 1 / (k + rank) to fused[u] for the units of `value` with value > 0 (or every unit with a
// value when `all`), ranked by value, best first.
void fuse_rank(const std::vector<int>& units, const std::vector<double>& value, bool all, double k,
               std::vector<double>& fused) {
    std::vector<int> order;
    for (size_t i = 0; i < units.size(); ++i)
        if (all || value[i] > 0) order.push_back(static_cast<int>(i));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return value[static_cast<size_t>(a)] > value[static_cast<size_t>(b)]; });
    for (size_t r = 0; r < order.size(); ++r) fused[static_cast<size_t>(order[r])] += 1.0 / (k + static_cast<double>(r + 1));
}

double best_cosine(const std::vector<float>& v, const std::vector<std::vector<float>>& passages) {
    double best = -1;
    for (const auto& p : passages)
        if (p.size() == v.size()) best = std::max(best, cosine(v, p));
    return best;
}

}  // namespace

namespace {

// A Markdown code fence alone ("```", "```r"): markup, not a sentence to cite or flag.
bool fence_marker(std::string_view s) {
    if (s.size() < 3 || s.substr(0, 3) != "```") return false;
    for (size_t i = 3; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (!(std::isalnum(c) || c == '`' || c == '_' || c == '+' || c == '-')) return false;
    }
    return true;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text) {
    std::vector<std::pair<size_t, size_t>> out;
    size_t start = 0;
    auto emit = [&](size_t end) {
        size_t b = start, e = end;
        while (b < e && space(text[b])) ++b;
        while (e > b && space(text[e - 1])) --e;
        if (e > b && !fence_marker(text.substr(b, e - b))) out.push_back({b, e});
        start = end;
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (ch == '\n') {
            // A line break ends a sentence at a blank line, after closing punctuation, or before a
            // list item / quote; otherwise it is the model wrapping a line inside a sentence.
            size_t p = i;
            while (p > start && (text[p - 1] == ' ' || text[p - 1] == '\t' || text[p - 1] == '\r')) --p;
            const char last = p > start ? text[p - 1] : '\n';
            const std::string_view next = text.substr(i + 1, 3);
            const bool item = !next.empty() && (next[0] == '\n' || next[0] == '-' || next[0] == '*' || next[0] == '>' ||
                                                next[0] == '#' || next[0] == '`' ||
                                                (std::isdigit(static_cast<unsigned char>(next[0])) && next.size() > 1 &&
                                                 (next[1] == '.' || next[1] == ')')));
            size_t line = p;
            while (line > start && text[line - 1] != '\n') --line;
            while (line < p && space(text[line])) ++line;
            const bool fence = fence_marker(text.substr(line, p - line));
            if (last == '\n' || last == '.' || last == '!' || last == '?' || last == ':' || item || fence || next.empty())
                emit(i + 1);
        } else if ((ch == '.' || ch == '!' || ch == '?') && (i + 1 == text.size() || space(text[i + 1]))) {
            // Not after a single letter or a digit run like "e.g." / "p." / "3." list numbers.
            const bool abbrev = i >= 1 && std::isalpha(static_cast<unsigned char>(text[i - 1])) &&
                                (i < 2 || !std::isalnum(static_cast<unsigned char>(text[i - 2])));
            const bool number = i >= 1 && std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                                (i < 2 || !std::isalnum(static_cast<unsigned char>(text[i - 2])) || i - start < 4);
            if (!abbrev && !number) emit(i + 1);
        }
    }
    emit(text.size());
    return out;
}

Answer cite(const SelectionCollector& c, const Tokenizer& tok, const CiteOptions& o) {
    const TokenStream& ts = c.stream();
    const int B = c.block_size();
    Answer a;
    a.text = c.text();
    a.steps = static_cast<int>(c.steps().size());

    std::vector<std::vector<UnitMass>> per_step;
    per_step.reserve(c.steps().size());
    for (const auto& st : c.steps()) per_step.push_back(step_units(st, ts, B, o.baseline));

    // Totals per unit and per (unit, KV block).
    std::map<int, double> unit_mass;
    std::map<std::pair<int, int32_t>, double> block_mass;
    for (const auto& sm : per_step)
        for (const auto& um : sm) {
            unit_mass[um.unit] += um.mass;
            block_mass[{um.unit, um.block}] += um.mass;
            a.document_mass += um.mass;
        }

    const bool fused = o.evidence && o.evidence->size() == ts.units.size();
    // Fused: every unit with text is a candidate (index into `cand`).
    std::vector<int> cand;
    std::vector<std::string> sentence_text;
    std::vector<std::vector<float>> sentence_emb;
    if (fused) {
        for (size_t u = 0; u < ts.units.size(); ++u)
            if (!(*o.evidence)[u].text.empty()) cand.push_back(static_cast<int>(u));
        for (const auto& [sb, se] : split_sentences(a.text)) sentence_text.emplace_back(a.text.substr(sb, se - sb));
        if (o.embedder && !sentence_text.empty()) sentence_emb = o.embedder->embed_many(sentence_text);
    }
    // Every candidate's passages in one BM25 index (passage -> candidate).
    std::vector<std::string> passage_text;
    std::vector<size_t> passage_cand;
    for (size_t k = 0; k < cand.size(); ++k) {
        const UnitEvidence& ev = (*o.evidence)[static_cast<size_t>(cand[k])];
        if (ev.passage_texts.empty()) {
            passage_text.push_back(ev.text);
            passage_cand.push_back(k);
        }
        for (const auto& t : ev.passage_texts) {
            passage_text.push_back(t);
            passage_cand.push_back(k);
        }
    }
    const LexicalIndex passage_index(passage_text);
    // Per candidate: the best support of any sentence (lexical, semantic).
    std::vector<double> best_lex(cand.size(), 0.0), best_sem(cand.size(), -1.0);
    std::vector<double> best_bm25(cand.size(), 0.0);  // Σ over the sentences
    std::vector<bool> has_sem(cand.size(), false);

    // Ranked places.
    std::vector<std::pair<int, double>> ranked(unit_mass.begin(), unit_mass.end());
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::vector<int> candidates;
    for (const auto& [u, m] : ranked) {
        if (static_cast<int>(candidates.size()) >= o.max_citations) break;
        if (a.document_mass <= 0 || m < o.min_share * a.document_mass) break;
        candidates.push_back(u);
    }

    // Sentences and the steps that produced them (marks: text up to text_end came after steps_end).
    const auto& marks = c.marks();
    for (const auto& [sb, se] : split_sentences(a.text)) {
        AnswerSentence s;
        s.begin = sb;
        s.end = se;
        size_t step_lo = SIZE_MAX, step_hi = 0, prev_text = 0, prev_steps = 0;
        for (const auto& mk : marks) {
            const size_t tb = prev_text, te = mk.text_end;
            if (te > sb && tb < se) {  // this chunk overlaps the sentence
                const size_t lo = prev_steps > 0 ? prev_steps - 1 : 0;
                const size_t hi = mk.steps_end > 0 ? mk.steps_end - 1 : 0;
                step_lo = std::min(step_lo, lo);
                step_hi = std::max(step_hi, std::max(hi, lo + 1));
            }
            prev_text = mk.text_end;
            prev_steps = mk.steps_end;
        }
        std::map<int, double> m;
        double total = 0;
        for (size_t st = step_lo; st < step_hi && st < per_step.size(); ++st)
            for (const auto& um : per_step[st]) {
                m[um.unit] += um.mass;
                total += um.mass;
            }
        if (fused) {
            const size_t si = a.sentences.size();
            const std::string& st = sentence_text[si];
            const std::vector<float>* se_emb = si < sentence_emb.size() ? &sentence_emb[si] : nullptr;
            std::vector<double> mass(cand.size(), 0.0), lex(cand.size(), 0.0), sem(cand.size(), -1.0);
            std::vector<double> bm25(cand.size(), 0.0);
            std::vector<bool> sem_ok(cand.size(), false);
            for (const auto& h : passage_index.rank(st, passage_text.size())) {
                const size_t k = passage_cand[h.passage];
                if (h.score > bm25[k]) bm25[k] = h.score;
            }
            for (size_t pi = 0; pi < passage_text.size(); ++pi) {
                const size_t k = passage_cand[pi];
                if (bm25[k] > 0) lex[k] = std::max(lex[k], lexical_support(st, passage_text[pi]));
            }
            for (size_t k = 0; k < cand.size(); ++k) {
                const int u = cand[k];
                if (auto it = m.find(u); it != m.end()) mass[k] = it->second;
                const UnitEvidence& ev = (*o.evidence)[static_cast<size_t>(u)];
                if (se_emb && !ev.passages.empty()) {
                    sem[k] = best_cosine(*se_emb, ev.passages);
                    sem_ok[k] = true;
                }
                best_lex[k] = std::max(best_lex[k], lex[k]);
                if (sem_ok[k]) {
                    best_sem[k] = std::max(best_sem[k], sem[k]);
                    has_sem[k] = true;
                }
            }
            std::vector<double> score(cand.size(), 0.0);
            fuse_rank(cand, mass, false, o.rrf_k, score);
            fuse_rank(cand, bm25, false, o.rrf_k, score);
            for (size_t k = 0; k < cand.size(); ++k) best_bm25[k] += bm25[k];
            if (se_emb) {
                std::vector<double> sem_rank(cand.size());
                for (size_t k = 0; k < cand.size(); ++k) sem_rank[k] = sem_ok[k] ? sem[k] + 2.0 : 0.0;  // > 0 when known
                fuse_rank(cand, sem_rank, false, o.rrf_k, score);
            }
            std::vector<size_t> order(cand.size());
            std::iota(order.begin(), order.end(), size_t{0});
            std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return score[x] > score[y]; });
            for (size_t k : order) {
                if (static_cast<int>(s.supports.size()) >= o.max_per_sentence || score[k] <= 0) break;
                const bool read = total > 0 && mass[k] >= o.sentence_min_share * total;
                const bool backs = lex[k] >= o.lexical_strong || (sem_ok[k] && sem[k] >= o.semantic_strong);
                if (!read && !backs) continue;
                Support sup;
                sup.citation = cand[k];
                sup.mass = mass[k];
                sup.lexical = lex[k];
                if (sem_ok[k]) sup.semantic = sem[k];
                sup.weak = !backs;
                sup.verified = true;
                s.supports.push_back(sup);
            }
        } else {
            std::vector<std::pair<int, double>> here;
            for (int u : candidates)
                if (auto it = m.find(u); it != m.end() && total > 0 && it->second >= o.sentence_min_share * total)
                    here.push_back({u, it->second});
            std::stable_sort(here.begin(), here.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
            if (static_cast<int>(here.size()) > o.max_per_sentence) here.resize(static_cast<size_t>(o.max_per_sentence));
            for (const auto& [u, mass] : here) {
                Support sup;
                sup.citation = u;  // the unit id until the places are numbered below
                sup.mass = mass;
                s.supports.push_back(sup);
            }
        }
        a.sentences.push_back(std::move(s));
    }

    // Number the places: first use in the answer, then the unused ones by mass. Fused: by the
    // fusion over the whole answer, the places some sentence cites first.
    std::vector<int> order;
    std::map<int, double> fused_score;
    if (fused) {
        std::vector<double> mass(cand.size()), sem_rank(cand.size(), 0.0), score(cand.size(), 0.0);
        std::vector<double> question(cand.size(), 0.0);
        for (size_t k = 0; k < cand.size(); ++k) {
            mass[k] = unit_mass.count(cand[k]) ? unit_mass[cand[k]] : 0.0;
            if (has_sem[k]) sem_rank[k] = best_sem[k] + 2.0;
            question[k] = (*o.evidence)[static_cast<size_t>(cand[k])].question;
        }
        fuse_rank(cand, mass, false, o.rrf_k, score);
        fuse_rank(cand, best_bm25, false, o.rrf_k, score);
        fuse_rank(cand, sem_rank, false, o.rrf_k, score);
        fuse_rank(cand, question, false, o.rrf_k, score);
        std::vector<size_t> by(cand.size());
        std::iota(by.begin(), by.end(), size_t{0});
        std::stable_sort(by.begin(), by.end(), [&](size_t x, size_t y) { return score[x] > score[y]; });
        std::vector<size_t> by_question = by;
        std::stable_sort(by_question.begin(), by_question.end(), [&](size_t x, size_t y) { return question[x] > question[y]; });
        std::vector<bool> top_question(cand.size(), false);
        for (size_t i = 0; i < by_question.size() && i < 3; ++i)
            if (question[by_question[i]] > 0) top_question[by_question[i]] = true;
        for (size_t k = 0; k < cand.size(); ++k) fused_score[cand[k]] = score[k];
        std::vector<bool> used(ts.units.size(), false);
        for (const auto& s : a.sentences)
            for (const auto& sup : s.supports) used[static_cast<size_t>(sup.citation)] = true;
        // By the fusion: the cited places and those read or asked about, up to max_citations;
        // every cited place is listed (its marker is in the text).
        // Listed in order of relevance to the question when asked (ties, and the places without a
        // relevance, by the fusion): the numbering a reader meets first.
        std::vector<size_t> numbered = by;
        if (o.by_question)
            std::stable_sort(numbered.begin(), numbered.end(), [&](size_t x, size_t y) { return question[x] > question[y]; });
        int room = o.max_citations;
        for (size_t k : numbered) {
            const bool u = used[static_cast<size_t>(cand[k])];
            const bool read = mass[k] > 0 && mass[k] >= o.min_share * a.document_mass;
            if (u || ((read || top_question[k]) && room > 0)) {
                order.push_back(cand[k]);
                --room;
            }
        }
        // What each signal said, for evaluation: the best by fusion, and the best 3 of each signal.
        std::vector<bool> listed(cand.size(), false);
        auto list = [&](size_t k) {
            if (listed[k]) return;
            listed[k] = true;
            const StreamUnit& su = ts.units[static_cast<size_t>(cand[k])];
            RankedSource r;
            r.path = ts.sources[static_cast<size_t>(su.source)].path;
            r.unit_index = su.unit;
            r.time = su.time;
            r.mass = mass[k];
            r.lexical = best_lex[k];
            r.bm25 = best_bm25[k];
            r.question = question[k];
            if (has_sem[k]) r.semantic = best_sem[k];
            r.score = score[k];
            a.ranking.push_back(std::move(r));
        };
        for (size_t i = 0; i < by.size() && i < 12; ++i) list(by[i]);
        for (const std::vector<double>* sig : {&mass, &best_bm25, &sem_rank, &question}) {
            std::vector<size_t> b2(cand.size());
            std::iota(b2.begin(), b2.end(), size_t{0});
            std::stable_sort(b2.begin(), b2.end(), [&](size_t x, size_t y) { return (*sig)[x] > (*sig)[y]; });
            for (size_t i = 0; i < b2.size() && i < 3; ++i)
                if ((*sig)[b2[i]] > 0) list(b2[i]);
        }
        std::stable_sort(a.ranking.begin(), a.ranking.end(), [](const auto& x, const auto& y) { return x.score > y.score; });
    } else {
        for (const auto& s : a.sentences)
            for (const auto& sup : s.supports)
                if (std::find(order.begin(), order.end(), sup.citation) == order.end()) order.push_back(sup.citation);
        for (int u : candidates)
            if (std::find(order.begin(), order.end(), u) == order.end()) order.push_back(u);
    }

    for (int u : order) {
        const StreamUnit& su = ts.units[static_cast<size_t>(u)];
        const StreamSource& src = ts.sources[static_cast<size_t>(su.source)];
        Citation ci;
        ci.number = static_cast<int>(a.citations.size()) + 1;
        ci.unit = u;
        ci.locator = su.locator;
        ci.path = src.path;
        ci.kind = src.kind;
        ci.mass = unit_mass[u];
        ci.share = a.document_mass > 0 ? ci.mass / a.document_mass : 0;
        ci.ref.document = src.id;
        ci.ref.unit = su.unit;
        if (fused) {
            ci.score = fused_score[u];
            const size_t k = static_cast<size_t>(std::find(cand.begin(), cand.end(), u) - cand.begin());
            if (k < cand.size()) {
                ci.lexical = best_lex[k];
                if (has_sem[k]) ci.semantic = best_sem[k];
            }
        }

        // The region: this unit's KV blocks with at least region_share of its top block's mass.
        double top = 0;
        int32_t top_block = -1;
        for (auto it = block_mass.lower_bound({u, INT32_MIN}); it != block_mass.end() && it->first.first == u; ++it)
            if (it->second > top) top = it->second, top_block = it->first.second;
        int64_t rb = INT64_MAX, re = 0;
        for (auto it = block_mass.lower_bound({u, INT32_MIN}); it != block_mass.end() && it->first.first == u; ++it) {
            if (it->second < o.region_share * top) continue;
            const int64_t lo = std::max<int64_t>(static_cast<int64_t>(it->first.second) * B, su.begin);
            const int64_t hi = std::min<int64_t>(static_cast<int64_t>(it->first.second + 1) * B, su.end);
            rb = std::min(rb, lo);
            re = std::max(re, hi);
        }
        if (rb >= re) rb = su.begin, re = su.end;
        ci.begin = rb;
        ci.end = re;
        const auto [s0, s1] = ts.spans_in(rb, re);
        for (size_t si = s0; si < s1; ++si) {
            const auto& sp = ts.spans[si];
            if (sp.unit != u || sp.kind == SpanKind::Template) continue;
            if (sp.ref.bbox && sp.kind != SpanKind::Marker) {
                if (!ci.ref.bbox) ci.ref.bbox = *sp.ref.bbox;
                else {
                    auto& bb = *ci.ref.bbox;
                    bb = {std::min(bb.x0, sp.ref.bbox->x0), std::min(bb.y0, sp.ref.bbox->y0),
                          std::max(bb.x1, sp.ref.bbox->x1), std::max(bb.y1, sp.ref.bbox->y1)};
                }
            }
            if (sp.ref.time && sp.kind != SpanKind::Marker) {
                if (!ci.ref.time) ci.ref.time = *sp.ref.time;
                else ci.ref.time = doc::TimeRange{std::min(ci.ref.time->t0, sp.ref.time->t0),
                                                  std::max(ci.ref.time->t1, sp.ref.time->t1)};
            }
        }
        if (!ci.ref.time && su.time) ci.ref.time = su.time;
        // Verification reads the region with one KV block of context on each side (within the unit):
        // a sentence often draws on the lines around the most attended block.
        ci.text = unit_text(ts, tok, u, std::max<int64_t>(su.begin, rb - B), std::min<int64_t>(su.end, re + B));
        const int64_t tb = top_block >= 0 ? std::max<int64_t>(static_cast<int64_t>(top_block) * B, su.begin) : su.begin;
        const int64_t te = top_block >= 0 ? std::min<int64_t>(static_cast<int64_t>(top_block + 1) * B, su.end) : su.end;
        ci.snippet = clip(unit_text(ts, tok, u, tb, te), static_cast<size_t>(o.snippet_chars));
        if (ci.snippet.empty()) ci.snippet = clip(ci.text, static_cast<size_t>(o.snippet_chars));
        a.citations.push_back(std::move(ci));
    }
    // Supports: unit ids -> citation indices.
    for (auto& s : a.sentences)
        for (auto& sup : s.supports)
            sup.citation = static_cast<int>(std::find(order.begin(), order.end(), sup.citation) - order.begin());
    return a;
}

}  // namespace sl
