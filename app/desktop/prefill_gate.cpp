#include "app/desktop/prefill_gate.h"

#include <algorithm>

namespace sl::desktop {

void PrefillGate::hold() {
    const std::lock_guard lock(mutex_);
    ++holds_;
    if (cancel_) cancel_();
    if (listener_) listener_();
}

void PrefillGate::release() {
    const std::lock_guard lock(mutex_);
    if (holds_ == 0) return;  // unbalanced
    if (--holds_ == 0 && listener_) listener_();
}

bool PrefillGate::held() const {
    const std::lock_guard lock(mutex_);
    return holds_ > 0;
}

bool PrefillGate::waitStopped(std::chrono::milliseconds max, const std::atomic<bool>* cancel) {
    const auto until = std::chrono::steady_clock::now() + max;
    std::unique_lock lock(mutex_);
    while (busy_) {
        if (cancel && cancel->load()) return false;
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) return false;
        stopped_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(100)));
    }
    return true;
}

void PrefillGate::setCanceller(std::function<void()> cancel) {
    const std::lock_guard lock(mutex_);
    cancel_ = std::move(cancel);
    if (cancel_ && holds_ > 0) cancel_();  // held while the prefill was being prepared
}

void PrefillGate::setBusy(bool busy) {
    {
        const std::lock_guard lock(mutex_);
        busy_ = busy;
    }
    if (!busy) stopped_.notify_all();
}

void PrefillGate::setListener(std::function<void()> on_change) {
    const std::lock_guard lock(mutex_);
    listener_ = std::move(on_change);
}

PausingAnswerService::PausingAnswerService(std::shared_ptr<AskService> inner, std::shared_ptr<PrefillGate> gate,
                                           std::chrono::milliseconds max_wait)
    : inner_(std::move(inner)), gate_(std::move(gate)), max_wait_(max_wait) {}

ChatAnswer PausingAnswerService::answer(const std::string& question, Effort effort, const AskStream& stream,
                                        const std::atomic<bool>* cancel) {
    const PrefillHold hold(gate_);
    if (gate_) gate_->waitStopped(max_wait_, cancel);
    return inner_->answer(question, effort, stream, cancel);
}

}  // namespace sl::desktop
