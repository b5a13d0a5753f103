// The effort knob: one word the user picks (low / medium / high) mapped to what the engine spends:
// KV blocks attended per query (MSA top-k), video frames kept per minute, render size for vision
// models and the answer's token budget.
#pragma once

#include <string>
#include <string_view>

namespace sl {

enum class Effort { Low, Medium, High };

struct EffortSettings {
    Effort effort = Effort::Medium;
    int top_k = 16;                 // MSA blocks attended per (query block, KV group)
    double frames_per_minute = 6;   // video frames kept (their OCR text or image patches)
    int render_px = 672;            // longest side of page/frame renders for vision encoders
    int answer_tokens = 256;        // generation budget
};

// low: top-k 8, 2 frames/min, 448 px, 128 answer tokens; medium: 16, 6, 672, 256 (MSA's default
// k); high: 32, 12, 896, 512.
EffortSettings effort_settings(Effort e);

// "low" / "medium" / "high" (case-sensitive); throws sl::Error naming the bad word.
Effort parse_effort(std::string_view word);
const char* to_string(Effort e);

// "effort medium: top-k 16 blocks, 6 frames/min, 672 px renders, answers up to 256 tokens"
std::string describe(const EffortSettings& s);

}  // namespace sl
