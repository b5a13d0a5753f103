// Keeps a reasoning model's thinking out of its answer. Text between "<think>" and "</think>" is
// withheld (kept in thoughts()), and so is everything before the first "</think>" when the prompt
// itself opened the block (ChatTemplate::opens_thinking). The white space that follows a closing
// tag is dropped too. Generated pieces may split a tag anywhere: what could still be the start of
// a tag is held back until the next piece (or finish()) decides it.
//
// Not thread-safe; one filter per answer.
#pragma once

#include <string>
#include <string_view>

namespace sl {

class ThinkFilter {
public:
    explicit ThinkFilter(bool starts_inside = false) : inside_(starts_inside), skip_ws_(false) {}

    // The visible text this piece completes (possibly empty).
    std::string feed(std::string_view piece);
    // The rest at the end of generation: held-back text that turned out to be no tag (outside a
    // block); an unclosed block stays withheld.
    std::string finish();

    bool thinking() const { return inside_; }
    const std::string& thoughts() const { return thoughts_; }

private:
    bool inside_;
    bool skip_ws_;
    std::string pending_;
    std::string thoughts_;
};

}  // namespace sl
