// Idle slices as a test scripts them (AskService::idle, ServeBackend::idle): each call counted;
// the first `slices` - 1 calls of a run report more work, then none; `slices` < 0: every call
// does (each ~2 ms, as a real slice takes time). Any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace sl::test {

struct ScriptedIdle {
    std::atomic<int> calls{0};
    std::atomic<int> slices{0};
    bool step() {
        const int n = ++calls;
        if (slices < 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return true;
        }
        return n < slices;
    }
};

}  // namespace sl::test
