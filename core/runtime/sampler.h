// Next-token sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeded.
// One Sampler per generation; not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sl {

struct SamplingParams {
    bool greedy = false;          // argmax; ignores everything below but the repetition penalty
    float temperature = 0.7f;     // <= 0 means greedy
    int top_k = 40;               // <= 0: off
    float top_p = 0.95f;          // >= 1: off
    float min_p = 0.05f;          // <= 0: off; keeps tokens with p >= min_p * p_max
    float repeat_penalty = 1.1f;  // 1: off; divides positive logits / multiplies negative ones
    int repeat_last_n = 64;       // how many recent tokens the penalty looks at
    uint64_t seed = 0;            // 0: from the clock
};

class Sampler {
public:
    explicit Sampler(SamplingParams params);

    // Picks the next token from `logits` (n_vocab) given the tokens so far (for the penalty).
    // `logits` is used as scratch and changed.
    int32_t sample(float* logits, int n_vocab, const std::vector<int32_t>& history);

    const SamplingParams& params() const { return params_; }

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace sl
