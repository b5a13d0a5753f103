#include "core/answer/citations.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>

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

}  // namespace

std::vector<std::pair<size_t, size_t>> split_sentences(std::string_view text) {
    std::vector<std::pair<size_t, size_t>> out;
    size_t start = 0;
    auto emit = [&](size_t end) {
        size_t b = start, e = end;
        while (b < e && space(text[b])) ++b;
        while (e > b && space(text[e - 1])) --e;
        if (e > b) out.push_back({b, e});
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
            if (last == '\n' || last == '.' || last == '!' || last == '?' || last == ':' || item || next.empty())
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
        a.sentences.push_back(std::move(s));
    }

    // Number the places: first use in the answer, then the unused ones by mass.
    std::vector<int> order;
    for (const auto& s : a.sentences)
        for (const auto& sup : s.supports)
            if (std::find(order.begin(), order.end(), sup.citation) == order.end()) order.push_back(sup.citation);
    for (int u : candidates)
        if (std::find(order.begin(), order.end(), u) == order.end()) order.push_back(u);

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
