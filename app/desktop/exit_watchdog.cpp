#include "app/desktop/exit_watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace sl::desktop {

ExitWatchdog::ExitWatchdog(std::chrono::milliseconds limit, int code) {
    thread_ = std::thread([this, limit, code] {
        std::unique_lock lock(mutex_);
        if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
        std::fprintf(stderr, "sightline: background work did not stop within %lld ms of quitting; exiting without it\n",
                     static_cast<long long>(limit.count()));
        std::fflush(nullptr);
        std::_Exit(code);
    });
}

ExitWatchdog::~ExitWatchdog() {
    {
        const std::lock_guard lock(mutex_);
        done_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

}  // namespace sl::desktop
