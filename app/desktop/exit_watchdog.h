// Bounds how long quitting may take. Armed after the event loop returns and before the window's
// destructor waits for its workers (a prefill chunk or an answer step can take tens of seconds on
// a big model, and cannot be interrupted midway): when the destructor has not finished `limit`
// later, the process ends there with `code` (std::_Exit, after flushing stdio). What the workers
// leave is safe to drop: the library commits its records as it goes and a prefill resumes from
// its last recorded chunk.
//
// The watchdog runs its own thread; the destructor disarms it and joins that thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sl::desktop {

class ExitWatchdog {
public:
    ExitWatchdog(std::chrono::milliseconds limit, int code);
    ~ExitWatchdog();
    ExitWatchdog(const ExitWatchdog&) = delete;
    ExitWatchdog& operator=(const ExitWatchdog&) = delete;

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

}  // namespace sl::desktop
