#include "core/answer/think_filter.h"

#include <algorithm>

namespace sl {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

}  // namespace

std::string ThinkFilter::feed(std::string_view piece) {
    pending_.append(piece);
    std::string out;
    for (;;) {
        if (skip_ws_) {
            const size_t b = pending_.find_first_not_of(" \t\r\n");
            if (b == std::string::npos) {
                pending_.clear();
                return out;
            }
            pending_.erase(0, b);
            skip_ws_ = false;
        }
        const std::string_view tag = inside_ ? kClose : kOpen;
        const size_t at = pending_.find(tag);
        if (at == std::string::npos) {
            const size_t keep = partial_tag(pending_, tag);
            (inside_ ? thoughts_ : out).append(pending_, 0, pending_.size() - keep);
            pending_.erase(0, pending_.size() - keep);
            return out;
        }
        (inside_ ? thoughts_ : out).append(pending_, 0, at);
        pending_.erase(0, at + tag.size());
        skip_ws_ = inside_;  // after </think>: the answer starts at its first visible character
        inside_ = !inside_;
    }
}

std::string ThinkFilter::finish() {
    std::string out;
    if (inside_)
        thoughts_ += pending_;
    else if (!skip_ws_)
        out = pending_;
    pending_.clear();
    return out;
}

}  // namespace sl
