#include "core/ask/attention_choice.h"

#include <algorithm>

#include "core/model/llama_model.h"

namespace sl {

AttentionChoice choose_attention(const LlamaConfig& model, int64_t context_tokens, Effort effort, int block_size,
                                 const std::string& mode) {
    AttentionChoice a;
    a.mode = mode.empty() ? std::string(kTrainingFreeMode) : mode;
    a.config.block_size = block_size;
    parse_msa_scoring(a.mode, a.config);
    a.config.top_k = effort_settings(effort).top_k;
    if (mode.empty() && model.has_indexer()) {
        a.config = native_msa_config(model, a.config);
        a.config.top_k = effort_settings(effort).top_k;
        a.config.block_size = block_size;
        a.mode = "native";
    }
    const int64_t n_train = model.n_ctx_train;
    if (n_train > 0 && context_tokens > n_train) {
        a.config.positions = PositionMode::Remap;
        a.config.remap_window = static_cast<int>(std::min<int64_t>(4096, n_train / 2));
    }
    return a;
}

}  // namespace sl
