#include "ingest/video/frame_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace sl::ingest {

FrameSampler::FrameSampler(const SamplerConfig& config) : config_(config) {
    const double cap = std::max(config.max_frames_per_minute, 1e-6);
    if (config.duration > 0) {
        const double budget = std::floor(cap * config.duration / 60.0 + 1e-9);
        slots_ = static_cast<int>(std::clamp(budget, 1.0, 1e7));
        slot_ = config.duration / slots_;
    } else {
        slot_ = 60.0 / cap;
    }
}

int FrameSampler::slot_of(double t) const {
    const double s = std::floor(std::max(t, 0.0) / slot_);
    const double last = slots_ > 0 ? slots_ - 1 : 2e9;
    return static_cast<int>(std::min(s, last));
}

double FrameSampler::difference(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    const size_t n = std::min(a.size(), b.size());
    if (n == 0) return 1.0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) sum += static_cast<uint64_t>(std::abs(int{a[i]} - int{b[i]}));
    return static_cast<double>(sum) / (255.0 * static_cast<double>(n));
}

FrameSampler::Decision FrameSampler::offer(double t, std::span<const uint8_t> small) {
    const double score = previous_.empty() ? 1.0 : difference(previous_, small);
    previous_.assign(small.begin(), small.end());
    const bool cut = score >= config_.cut_threshold;
    cuts_ += cut ? 1 : 0;

    Decision d;
    const int slot = slot_of(t);
    if (slot != current_slot_) {
        d.emit_pending = pending_;
        pending_ = false;
        current_slot_ = slot;
    }
    // The first frame of a slot is its regular frame; a shot change beats it and weaker cuts.
    const double priority = cut ? 1.0 + score : 0.0;
    if (!pending_ || priority > pending_priority_) {
        d.take = true;
        pending_ = true;
        pending_priority_ = priority;
    }
    return d;
}

bool FrameSampler::finish() {
    const bool p = pending_;
    pending_ = false;
    return p;
}

}  // namespace sl::ingest
