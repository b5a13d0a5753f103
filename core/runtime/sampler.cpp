#include "core/runtime/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_set>

namespace sl {

Sampler::Sampler(SamplingParams params)
    : params_(params),
      rng_(params.seed ? params.seed
                       : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {}

int32_t Sampler::sample(float* logits, int n_vocab, const std::vector<int32_t>& history) {
    const SamplingParams& p = params_;
    if (p.repeat_penalty != 1.0f && p.repeat_last_n > 0) {
        std::unordered_set<int32_t> seen;
        const size_t from = history.size() > static_cast<size_t>(p.repeat_last_n) ? history.size() - p.repeat_last_n : 0;
        for (size_t i = from; i < history.size(); ++i) {
            const int32_t t = history[i];
            if (t < 0 || t >= n_vocab || !seen.insert(t).second) continue;
            logits[t] = logits[t] > 0 ? logits[t] / p.repeat_penalty : logits[t] * p.repeat_penalty;
        }
    }
    if (p.greedy || p.temperature <= 0.0f)
        return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);

    candidates_.resize(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n_vocab; ++i) candidates_[static_cast<size_t>(i)] = {logits[i] / p.temperature, i};
    auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first; };
    size_t n = candidates_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), by_logit);
        n = static_cast<size_t>(p.top_k);
    } else {
        std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    // Softmax over the kept candidates (sorted, so [0] is the max).
    const float mx = candidates_[0].first;
    double sum = 0;
    std::vector<double> probs(n);
    for (size_t i = 0; i < n; ++i) sum += probs[i] = std::exp(static_cast<double>(candidates_[i].first - mx));
    for (auto& q : probs) q /= sum;
    if (p.min_p > 0.0f) {
        const double floor = p.min_p * probs[0];
        size_t keep = 1;
        while (keep < n && probs[keep] >= floor) ++keep;
        n = keep;
    }
    if (p.top_p < 1.0f) {
        double cum = 0;
        size_t keep = 0;
        while (keep < n) {
            cum += probs[keep++];
            if (cum >= p.top_p) break;
        }
        n = std::max<size_t>(1, keep);
    }
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += probs[i];
    std::uniform_real_distribution<double> u(0.0, total);
    double r = u(rng_);
    for (size_t i = 0; i < n; ++i) {
        r -= probs[i];
        if (r <= 0) return candidates_[i].second;
    }
    return candidates_[n - 1].second;
}

}  // namespace sl
