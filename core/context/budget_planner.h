// Before prefill: how many tokens each source takes, and what is downsampled or cut so that the
// context fits the model's budget (n_ctx minus the question turn and the answer). Video frames are
// first thinned to the effort's frames per minute; when the sources still do not fit, each gets a
// fair share (sources smaller than their share keep everything, the rest split what is left) and
// keeps the units of highest priority within it (by default spread evenly over the document, so a
// cut book keeps pages from its whole length; pass priorities, e.g. lexical scores for a question,
// to keep the most relevant ones instead; with PlanOptions::global the priorities decide across
// sources too, without shares).
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/context/effort.h"

namespace sl {

struct PreparedContext;

struct SourcePlan {
    std::string name;
    int units_total = 0, units_kept = 0;
    int frames_total = 0, frames_kept = 0;  // video frames (or their OCR text)
    int64_t tokens_full = 0;                // everything
    int64_t tokens_planned = 0;             // what goes into the context
};

struct BudgetPlan {
    EffortSettings effort;
    int64_t n_ctx = 0;
    int64_t opening = 0;          // template + instructions + closing
    int64_t reserve = 0;          // question turn + question allowance + answer
    int64_t available = 0;        // for the documents
    int64_t total_full = 0, total_planned = 0;
    bool fits = true;             // false: nothing could be cut enough (opening + reserve > n_ctx)
    std::vector<SourcePlan> sources;
    std::vector<std::vector<bool>> keep;  // [unit][item] of PreparedContext::units

    // The plan as a person reads it, one line per source.
    std::string to_text() const;
};

struct PlanOptions {
    int question_tokens = 128;               // allowance for the question itself
    std::vector<double> unit_priority;       // per PreparedContext unit; empty: spread evenly
    // With priorities: fill the whole budget by them across every source (a question's context:
    // the most relevant units of the library, whichever documents hold them), instead of fair
    // shares per source. Units of equal priority keep the even spread's order.
    bool global = false;
};

BudgetPlan plan_budget(const PreparedContext& p, int64_t n_ctx, const EffortSettings& effort,
                       const PlanOptions& options = {});

}  // namespace sl
