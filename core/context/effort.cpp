#include "core/context/effort.h"

#include <cstdio>

#include "core/util/error.h"

namespace sl {

EffortSettings effort_settings(Effort e) {
    switch (e) {
        case Effort::Low: return {Effort::Low, 8, 2, 448, 128};
        case Effort::Medium: return {Effort::Medium, 16, 6, 672, 256};
        case Effort::High: return {Effort::High, 32, 12, 896, 512};
    }
    return {};
}

Effort parse_effort(std::string_view word) {
    if (word == "low") return Effort::Low;
    if (word == "medium") return Effort::Medium;
    if (word == "high") return Effort::High;
    throw Error("unknown effort '" + std::string(word) + "' (expected low, medium or high)");
}

const char* to_string(Effort e) {
    switch (e) {
        case Effort::Low: return "low";
        case Effort::Medium: return "medium";
        case Effort::High: return "high";
    }
    return "?";
}

std::string describe(const EffortSettings& s) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "effort %s: top-k %d blocks, %g frames/min, %d px renders, answers up to %d tokens",
                  to_string(s.effort), s.top_k, s.frames_per_minute, s.render_px, s.answer_tokens);
    return buf;
}

}  // namespace sl
