#include "core/answer/selection_collector.h"

#include <algorithm>

namespace sl {

SelectionCollector::SelectionCollector(const TokenStream& stream, int block_size, bool exclude_block0)
    : stream_(stream), block_size_(std::max(1, block_size)), exclude_block0_(exclude_block0) {}

void SelectionCollector::attach(MsaAttention& msa) {
    msa.set_token_mass(true);
    msa.set_observer([this](int layer, const AttentionCall& call, const std::vector<Selection>& s) {
        observe(layer, call, s);
    });
}

void SelectionCollector::detach(MsaAttention& msa) {
    msa.set_observer({});
    msa.set_token_mass(false);
}

void SelectionCollector::observe(int /*layer*/, const AttentionCall& call, const std::vector<Selection>& selections) {
    if (call.n_tokens != 1) return;
    if (steps_.empty() || steps_.back().pos != call.pos0) steps_.push_back({call.pos0, {}, {}});
    Step& step = steps_.back();
    const int64_t local = call.pos0 / block_size_;
    const auto B = static_cast<size_t>(block_size_);
    for (const Selection& sel : selections) {
        const bool has_tokens = sel.token_mass.size() == sel.blocks.size() * B;
        for (size_t i = 0; i < sel.blocks.size() && i < sel.mass.size(); ++i) {
            const int32_t b = sel.blocks[i];
            if (b == local || (exclude_block0_ && b == 0)) continue;
            if (static_cast<int64_t>(b) * block_size_ >= stream_.prefix_tokens) continue;
            auto it = std::lower_bound(step.blocks.begin(), step.blocks.end(), b,
                                       [](const std::pair<int32_t, float>& e, int32_t v) { return e.first < v; });
            const auto at = static_cast<size_t>(it - step.blocks.begin());
            if (it != step.blocks.end() && it->first == b) {
                it->second += sel.mass[i];
            } else {
                step.blocks.insert(it, {b, sel.mass[i]});
                step.tokens.insert(step.tokens.begin() + static_cast<std::ptrdiff_t>(at), std::vector<float>{});
            }
            if (!has_tokens) continue;
            std::vector<float>& t = step.tokens[at];
            if (t.empty()) t.assign(B, 0.0f);
            const float* src = sel.token_mass.data() + i * B;
            for (size_t j = 0; j < B; ++j) t[j] += src[j];
        }
    }
}

void SelectionCollector::on_text(std::string_view piece) {
    text_.append(piece);
    marks_.push_back({text_.size(), steps_.size()});
}

void SelectionCollector::truncate_text(size_t bytes) {
    if (bytes >= text_.size()) return;
    text_.resize(bytes);
    while (!marks_.empty() && marks_.back().text_end > bytes) {
        const size_t steps = marks_.back().steps_end;
        marks_.pop_back();
        if (marks_.empty() || marks_.back().text_end < bytes) {
            marks_.push_back({bytes, steps});
            break;
        }
    }
}

std::vector<float> SelectionCollector::mean_block_mass() const {
    std::vector<float> m;
    for (const auto& st : steps_)
        for (const auto& [b, mass] : st.blocks) {
            if (static_cast<size_t>(b) >= m.size()) m.resize(static_cast<size_t>(b) + 1, 0.0f);
            m[static_cast<size_t>(b)] += mass;
        }
    if (!steps_.empty())
        for (auto& x : m) x /= static_cast<float>(steps_.size());
    return m;
}

void SelectionCollector::clear() {
    steps_.clear();
    marks_.clear();
    text_.clear();
}

}  // namespace sl
