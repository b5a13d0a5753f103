#include "core/context/preselect.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/answer/verify.h"
#include "core/context/lexical_rank.h"
#include "core/tokenizer/tokenizer.h"

namespace sl {

std::string thousands(int64_t v) {
    std::string digits = std::to_string(v < 0 ? -v : v), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return v < 0 ? "-" + out : out;
}

std::string unit_text(const PreparedUnit& u, const Tokenizer& tok) {
    std::string t;
    for (const auto& it : u.items)
        if (it.kind == SpanKind::Text) {
            t += tok.decode(it.tokens);
            t += ' ';
        }
    return t;
}

namespace {

// (source, unit index) of a stream unit or a prepared unit.
using UnitKey = std::pair<int, int>;

// Units of `prefix` read to their end. The last one, ending at the clip, counts as cut (it may
// go on after it); picking it again costs at most one repeated unit.
std::set<UnitKey> fully_read(const TokenStream& prefix) {
    std::set<UnitKey> read;
    for (const auto& u : prefix.units)
        if (u.end < prefix.prefix_tokens) read.insert({u.source, u.unit});
    return read;
}

}  // namespace

Preselection preselect_units(const PreparedContext& p, const TokenStream& prefix, std::string_view question,
                             int64_t budget, const Tokenizer& tok, Embedder* embedder, const PreselectOptions& o) {
    Preselection out;
    const std::set<UnitKey> read = fully_read(prefix);
    std::vector<size_t> cand;
    for (size_t i = 0; i < p.units.size(); ++i)
        if (!read.count({p.units[i].meta.source, p.units[i].meta.unit})) cand.push_back(i);
    out.candidates = cand.size();
    if (cand.empty() || budget <= 0) return out;

    std::vector<std::string> texts;
    texts.reserve(cand.size());
    for (size_t i : cand) texts.push_back(unit_text(p.units[i], tok));
    std::vector<double> score(cand.size(), 0.0);
    const LexicalIndex index(texts);
    const auto hits = index.rank(question, cand.size());
    const double best = hits.empty() ? 0.0 : hits.front().score;
    for (const auto& h : hits) score[h.passage] = best > 0 ? h.score / best : 0.0;

    if (embedder && o.semantic_pool > 0) {
        // The pool: the best by BM25, then an even spread of the others.
        std::vector<size_t> pool;
        std::vector<bool> in(cand.size(), false);
        for (const auto& h : hits) {
            if (pool.size() >= o.semantic_pool / 2) break;
            pool.push_back(h.passage);
            in[h.passage] = true;
        }
        const size_t rest = o.semantic_pool - pool.size();
        const double step = std::max(1.0, static_cast<double>(cand.size()) / static_cast<double>(std::max<size_t>(1, rest)));
        for (double x = 0; x < static_cast<double>(cand.size()) && pool.size() < o.semantic_pool; x += step) {
            const auto i = static_cast<size_t>(x);
            if (!in[i]) {
                pool.push_back(i);
                in[i] = true;
            }
        }
        const std::vector<float> qv = embedder->embed(question);
        for (size_t i : pool) {
            const std::string& t = texts[i];
            const std::vector<float> v = embedder->embed(std::string_view(t).substr(0, o.embed_chars));
            score[i] += std::max(0.0, cosine(qv, v));
        }
        out.semantic = true;
    }

    std::vector<size_t> order(cand.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<std::pair<size_t, double>> picked;
    int64_t left = budget;
    for (size_t i : order) {
        if (score[i] <= 0) break;  // nothing points at it
        const int64_t t = p.units[cand[i]].tokens();
        if (t > left) continue;
        left -= t;
        picked.push_back({cand[i], score[i]});
    }
    std::sort(picked.begin(), picked.end());
    for (const auto& [u, s] : picked) {
        out.units.push_back(u);
        out.scores.push_back(s);
        out.tokens += p.units[u].tokens();
    }
    return out;
}

std::string describe_reading(const TokenStream& ts, int64_t n, int64_t total, const Preselection& pre) {
    // Per source, the first and last unit the prefix reached.
    auto place = [&](const StreamUnit& u) {
        const std::string& name = ts.sources[static_cast<size_t>(u.source)].name;
        return u.locator.rfind(name + " ", 0) == 0 ? u.locator.substr(name.size() + 1) : u.locator;
    };
    std::string read;
    for (size_t s = 0; s < ts.sources.size(); ++s) {
        const StreamUnit* first = nullptr;
        const StreamUnit* last = nullptr;
        int count = 0;
        for (const auto& u : ts.units) {
            if (u.begin >= n || u.source != static_cast<int>(s)) continue;
            if (!first) first = &u;
            last = &u;
            ++count;
        }
        if (!first) continue;
        if (!read.empty()) read += ", ";
        read += ts.sources[s].name + " " + place(*first);
        if (last != first) read += " - " + place(*last);
        if (last->end >= n) read += " (in part)";  // the prefill stopped inside it
    }
    std::string out = thousands(n) + " of " + thousands(total) + " prefilled library tokens";
    if (!read.empty()) out += " (" + read + ")";
    if (!pre.units.empty()) {
        out += " and " + std::to_string(pre.units.size()) + (pre.units.size() == 1 ? " unit" : " units") +
               " preselected for the question" + (pre.semantic ? " (lexical + semantic)" : " (lexical)") + ": ";
        size_t shown = 0;
        for (const auto& u : ts.units) {
            if (u.begin < n) continue;
            if (shown++) out += ", ";
            if (shown > 8) {
                out += "...";
                break;
            }
            out += u.locator;
        }
    }
    const size_t unread = pre.candidates - pre.units.size();
    if (unread > 0) out += "; not read yet: " + std::to_string(unread) + (unread == 1 ? " unit" : " units");
    return out;
}

}  // namespace sl
