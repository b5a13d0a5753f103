// While a question is answered the background prefill stands still: the CPU is the bottleneck,
// and the answer reads what the prefill saved so far. PrefillGate is the meeting point: an answer
// holds it for its duration (PausingAnswerService does so around any AskService), the prefill
// controller's worker stops within the chunk in flight (at its next 256-token step; what it
// prefilled is saved and recorded in the library) and starts again, resuming from the saved file,
// when the last hold is released.
//
// Threading: every method may be called from any thread. The listener and the canceller run on
// the thread that calls hold()/release(), under the gate's lock: they must only post work or set
// flags (they may not call back into the gate).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "app/desktop/ask_service.h"

namespace sl::desktop {

class PrefillGate {
public:
    // ---- answer side ----
    void hold();     // pauses the prefill: cancels a running one (it stops within its chunk in flight)
    void release();  // the last release lets the prefill resume
    bool held() const;
    // Waits until no prefill runs (stopped and recorded, or none was running), at most `max`, and
    // gives up early when *cancel becomes true. True when stopped.
    bool waitStopped(std::chrono::milliseconds max, const std::atomic<bool>* cancel = nullptr);

    // ---- prefill side (the controller's worker) ----
    void setCanceller(std::function<void()> cancel);    // stops the running prefill; {} while none runs
    void setBusy(bool busy);                            // a prefill is being prepared or runs
    void setListener(std::function<void()> on_change);  // after each hold() / last release()

private:
    mutable std::mutex mutex_;
    std::condition_variable stopped_;
    int holds_ = 0;
    bool busy_ = false;
    std::function<void()> cancel_;
    std::function<void()> listener_;
};

// Holds a gate for a scope (null gate: nothing).
class PrefillHold {
public:
    explicit PrefillHold(std::shared_ptr<PrefillGate> gate) : gate_(std::move(gate)) {
        if (gate_) gate_->hold();
    }
    ~PrefillHold() {
        if (gate_) gate_->release();
    }
    PrefillHold(const PrefillHold&) = delete;
    PrefillHold& operator=(const PrefillHold&) = delete;

private:
    std::shared_ptr<PrefillGate> gate_;
};

// Any AskService with the background prefill paused while it answers: holds the gate, waits
// (at most max_wait) for the prefill's chunk in flight to be saved, answers, releases.
class PausingAnswerService : public AskService {
public:
    PausingAnswerService(std::shared_ptr<AskService> inner, std::shared_ptr<PrefillGate> gate,
                         std::chrono::milliseconds max_wait = std::chrono::seconds(30));
    std::string name() const override { return inner_->name(); }
    ChatAnswer answer(const std::string& question, Effort effort, const AskStream& stream,
                      const std::atomic<bool>* cancel) override;
    bool idle() override { return inner_->idle(); }  // (the prefill goes on: a slice is short)
    const std::shared_ptr<AskService>& inner() const { return inner_; }

private:
    std::shared_ptr<AskService> inner_;
    std::shared_ptr<PrefillGate> gate_;
    std::chrono::milliseconds max_wait_;
};

}  // namespace sl::desktop
