// Test helper: the library's own prefill (core/ask/library_context.h) stopped part way, as the
// app's background prefill is when a question comes first. Header-only (tests that link the core).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "core/ask/library_context.h"

namespace sl::test {

struct StoppedPrefill {
    int64_t total = 0;  // the library context's tokens
    int64_t saved = 0;  // of which were saved (and recorded in the library) when it stopped
    std::string error;  // the prefill's, if any
};

// Runs the library prefill in the background, saving every 512 tokens, and stops it once at least
// `at_least` tokens are saved (or it ended); records what was saved.
inline StoppedPrefill stop_library_prefill_after(Library& lib, const LoadedModel& model, int64_t at_least) {
    LibraryPrefillOptions po;
    po.save_every = 512;
    po.progress_interval = 0.05;
    LibraryPrefill p(lib, model, po);
    StoppedPrefill out;
    out.total = static_cast<int64_t>(p.context().stream.tokens.size());
    p.start();
    while (p.running() && p.status().saved < at_least) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.cancel();
    p.wait();
    p.record();
    out.saved = p.status().saved;
    out.error = p.status().error;
    return out;
}

}  // namespace sl::test
