#include "core/ask/warm_context.h"

#include "core/runtime/session.h"

namespace sl {

WarmSession::WarmSession() = default;
WarmSession::WarmSession(WarmSession&&) noexcept = default;
WarmSession& WarmSession::operator=(WarmSession&&) noexcept = default;
WarmSession::~WarmSession() = default;

WarmContext::WarmContext(bool complete_only) : complete_only_(complete_only) {}

WarmContext::~WarmContext() = default;

WarmSession WarmContext::take(const std::string& key, int n_ctx) {
    WarmSession out = std::move(held_);
    held_ = WarmSession();
    if (!out.session || out.key != key || out.session->n_ctx() < n_ctx) return {};  // dropped here
    ++hits_;
    return out;
}

void WarmContext::keep(WarmSession s, bool complete) {
    held_ = WarmSession();  // the old one's memory first
    if (complete_only_ && !complete) return;
    held_ = std::move(s);
}

void WarmContext::clear() {
    held_ = WarmSession();
}

int64_t WarmContext::fill(int64_t max_blocks) {
    if (!held_.session || !held_.session->on_gpu()) return 0;  // a CPU session holds all of its context
    try {
        const int64_t n = held_.session->fill_device(max_blocks);
        if (held_.session->on_gpu()) return n;
    } catch (...) {  // a damaged page (the session is empty now), memory: nothing to keep
    }
    clear();  // (or the device failed and it went on on the CPU: a question restores afresh)
    return 0;
}

WarmSession WarmContext::release() {
    WarmSession out = std::move(held_);
    held_ = WarmSession();
    return out;
}

bool WarmContext::holds() const {
    return held_.session != nullptr;
}

}  // namespace sl
