#include "app/desktop/event_loop_probe.h"

#include <algorithm>
#include <cmath>

namespace sl::desktop {

EventLoopProbe::EventLoopProbe(int interval_ms, QObject* parent) : QObject(parent), interval_ms_(interval_ms) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(interval_ms_);
    connect(&timer_, &QTimer::timeout, this, &EventLoopProbe::tick);
}

void EventLoopProbe::start() {
    clock_.start();
    last_ns_ = clock_.nsecsElapsed();
    timer_.start();
}

void EventLoopProbe::stop() { timer_.stop(); }

void EventLoopProbe::reset() {
    delays_ms_.clear();
    last_ns_ = clock_.isValid() ? clock_.nsecsElapsed() : -1;
}

void EventLoopProbe::tick() {
    const qint64 now = clock_.nsecsElapsed();
    if (last_ns_ >= 0) delays_ms_.push_back(std::max(0.0, static_cast<double>(now - last_ns_) / 1e6 - interval_ms_));
    last_ns_ = now;
}

double EventLoopProbe::maxDelayMs() const {
    return delays_ms_.empty() ? 0.0 : *std::max_element(delays_ms_.begin(), delays_ms_.end());
}

double EventLoopProbe::percentileDelayMs(double p) const {
    if (delays_ms_.empty()) return 0.0;
    std::vector<double> v = delays_ms_;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::floor(p / 100.0 * static_cast<double>(v.size()))));
    return v[i];
}

}  // namespace sl::desktop
