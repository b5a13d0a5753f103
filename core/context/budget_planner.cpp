#include "core/context/budget_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/context/context_builder.h"

namespace sl {

namespace {

// Frames of a unit kept at `fpm` frames per minute, evenly spaced: marks keep[i] false for the
// others. Returns (frames, kept).
std::pair<int, int> thin_frames(const PreparedUnit& u, double fpm, std::vector<bool>& keep) {
    std::vector<size_t> frames;
    for (size_t i = 0; i < u.items.size(); ++i)
        if (u.items[i].frame_time) frames.push_back(i);
    if (frames.empty()) return {0, 0};
    double minutes = 0;
    if (u.meta.time) minutes = std::max(0.0, u.meta.time->t1 - u.meta.time->t0) / 60.0;
    else minutes = std::max(0.0, *u.items[frames.back()].frame_time - *u.items[frames.front()].frame_time) / 60.0;
    const size_t cap = std::max<size_t>(1, static_cast<size_t>(std::ceil(fpm * minutes - 1e-9)));
    if (frames.size() <= cap) return {static_cast<int>(frames.size()), static_cast<int>(frames.size())};
    std::vector<bool> chosen(frames.size(), false);
    for (size_t k = 0; k < cap; ++k) chosen[(k * frames.size() + frames.size() / 2) / cap] = true;
    int kept = 0;
    for (size_t f = 0; f < frames.size(); ++f) {
        keep[frames[f]] = chosen[f];
        kept += chosen[f] ? 1 : 0;
    }
    return {static_cast<int>(frames.size()), kept};
}

std::string thousands(int64_t n) {
    const std::string digits = std::to_string(n < 0 ? -n : n);
    std::string s = n < 0 ? "-" : "";
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
        s.push_back(digits[i]);
    }
    return s;
}

}  // namespace

BudgetPlan plan_budget(const PreparedContext& p, int64_t n_ctx, const EffortSettings& effort, const PlanOptions& o) {
    BudgetPlan plan;
    plan.effort = effort;
    plan.n_ctx = n_ctx;
    plan.opening = static_cast<int64_t>(p.opening.size() + p.closing.size());
    plan.reserve = p.question_reserve + o.question_tokens + effort.answer_tokens;
    plan.available = std::max<int64_t>(0, n_ctx - plan.opening - plan.reserve);
    plan.fits = n_ctx >= plan.opening + plan.reserve;

    const size_t ns = p.sources.size();
    plan.sources.resize(ns);
    for (size_t s = 0; s < ns; ++s) plan.sources[s].name = p.sources[s].name;

    // Frames first (the effort's frames per minute), then token counts per unit as thinned.
    plan.keep.resize(p.units.size());
    std::vector<int64_t> unit_tokens(p.units.size(), 0);
    for (size_t ui = 0; ui < p.units.size(); ++ui) {
        const PreparedUnit& u = p.units[ui];
        auto& keep = plan.keep[ui];
        keep.assign(u.items.size(), true);
        auto& sp = plan.sources[static_cast<size_t>(u.meta.source)];
        const auto [frames, kept] = thin_frames(u, effort.frames_per_minute, keep);
        sp.frames_total += frames;
        sp.frames_kept += kept;
        ++sp.units_total;
        sp.tokens_full += u.tokens();
        for (size_t i = 0; i < u.items.size(); ++i)
            if (keep[i]) unit_tokens[ui] += static_cast<int64_t>(u.items[i].tokens.size());
    }
    std::vector<int64_t> need(ns, 0);
    for (size_t ui = 0; ui < p.units.size(); ++ui) need[static_cast<size_t>(p.units[ui].meta.source)] += unit_tokens[ui];
    for (size_t s = 0; s < ns; ++s) plan.total_full += plan.sources[s].tokens_full;

    // Fair shares (water-filling): sources under their share keep everything. Global priorities:
    // the units are first chosen across sources, and each source's share is what it was given.
    std::vector<int64_t> share(ns, 0);
    if (o.global && !o.unit_priority.empty()) {
        std::vector<size_t> order(p.units.size());
        std::iota(order.begin(), order.end(), size_t{0});
        auto prio = [&](size_t ui) { return ui < o.unit_priority.size() ? o.unit_priority[ui] : 0.0; };
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prio(a) > prio(b); });
        int64_t left = plan.available;
        std::vector<bool> chosen(p.units.size(), false);
        for (size_t ui : order) {
            if (unit_tokens[ui] > left) continue;
            left -= unit_tokens[ui];
            chosen[ui] = true;
            share[static_cast<size_t>(p.units[ui].meta.source)] += unit_tokens[ui];
        }
        for (size_t ui = 0; ui < p.units.size(); ++ui)
            if (!chosen[ui]) std::fill(plan.keep[ui].begin(), plan.keep[ui].end(), false);
        for (size_t s = 0; s < ns; ++s) need[s] = share[s];  // nothing more to cut below
    } else {
        std::vector<size_t> order(ns);
        std::iota(order.begin(), order.end(), size_t{0});
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return need[a] < need[b]; });
        int64_t left = plan.available;
        for (size_t k = 0; k < ns; ++k) {
            const size_t s = order[k];
            const int64_t fair = left / static_cast<int64_t>(ns - k);
            share[s] = std::min(need[s], fair);
            left -= share[s];
        }
    }

    // Within a source over its share: keep units by priority until the share is spent.
    for (size_t s = 0; s < ns; ++s) {
        std::vector<size_t> units;
        for (size_t ui = 0; ui < p.units.size(); ++ui)
            if (static_cast<size_t>(p.units[ui].meta.source) == s) units.push_back(ui);
        if (need[s] > share[s]) {
            std::vector<double> prio(units.size());
            for (size_t k = 0; k < units.size(); ++k) {
                if (units[k] < o.unit_priority.size()) prio[k] = o.unit_priority[units[k]];
                else prio[k] = -std::fmod(static_cast<double>(k) * 0.6180339887498949, 1.0);  // spread evenly
            }
            std::vector<size_t> order(units.size());
            std::iota(order.begin(), order.end(), size_t{0});
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prio[a] > prio[b]; });
            int64_t used = 0;
            std::vector<bool> kept(units.size(), false);
            for (size_t k : order) {
                if (used + unit_tokens[units[k]] > share[s]) continue;
                used += unit_tokens[units[k]];
                kept[k] = true;
            }
            for (size_t k = 0; k < units.size(); ++k)
                if (!kept[k]) std::fill(plan.keep[units[k]].begin(), plan.keep[units[k]].end(), false);
        }
        auto& sp = plan.sources[s];
        for (size_t ui : units) {
            if (plan.keep[ui].empty() || !plan.keep[ui][0]) continue;
            ++sp.units_kept;
            sp.tokens_planned += unit_tokens[ui];
        }
        plan.total_planned += sp.tokens_planned;
    }
    return plan;
}

std::string BudgetPlan::to_text() const {
    std::string s;
    char line[320];
    std::snprintf(line, sizeof line, "Context plan: %s tokens of context, %s\n", thousands(n_ctx).c_str(),
                  describe(effort).c_str());
    s += line;
    std::snprintf(line, sizeof line, "  %-32s %12s tokens\n", "opening, instructions, closing", thousands(opening).c_str());
    s += line;
    for (const auto& sp : sources) {
        std::string what;
        if (sp.units_kept == sp.units_total) what = "all " + std::to_string(sp.units_total) + " units";
        else what = std::to_string(sp.units_kept) + " of " + std::to_string(sp.units_total) + " units kept (cut to fit)";
        if (sp.frames_total > 0)
            what += ", frames " + std::to_string(sp.frames_kept) + " of " + std::to_string(sp.frames_total) + " kept";
        std::snprintf(line, sizeof line, "  %-32s %12s tokens -> %s: %s\n", sp.name.c_str(), thousands(sp.tokens_full).c_str(),
                      thousands(sp.tokens_planned).c_str(), what.c_str());
        s += line;
    }
    std::snprintf(line, sizeof line, "  %-32s %12s tokens\n", "question and answer reserve", thousands(reserve).c_str());
    s += line;
    std::snprintf(line, sizeof line, "  total %s of %s tokens (documents: %s of %s)%s\n",
                  thousands(opening + total_planned + reserve).c_str(), thousands(n_ctx).c_str(),
                  thousands(total_planned).c_str(), thousands(total_full).c_str(),
                  fits ? "" : " -- does not fit: the opening and reserve alone exceed the context");
    s += line;
    return s;
}

}  // namespace sl
