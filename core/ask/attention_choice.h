// The one place that chooses the attention a context runs with, for the question flow (ask), the
// library's own prefill and `sightline-cli generate`: a model, a context length and an effort in,
// an MsaConfig out.
//
// - A model with its own learned indexer (MiniMax-M3 style) selects with it (native mode);
//   otherwise the training-free mode kTrainingFreeMode (msa_attention.h), whose recall and speed
//   issue #5's notes measured.
// - top-k from the effort (8 / 16 / 32 blocks).
// - Past the model's trained context, positions are remapped (a window of min(4096, n_train / 2)
//   tokens at their true distance, farther selected blocks at trained distances).
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/attention/msa_attention.h"
#include "core/context/effort.h"

namespace sl {

struct LlamaConfig;

struct AttentionChoice {
    MsaConfig config;
    std::string mode;   // the mode name (kTrainingFreeMode, or "native")
};

// `context_tokens`: the longest the context will grow (prefix + question + answer). `mode`: empty
// for the default, else a parse_msa_scoring name (throws sl::Error naming a bad one).
AttentionChoice choose_attention(const LlamaConfig& model, int64_t context_tokens, Effort effort, int block_size = 128,
                                 const std::string& mode = {});

}  // namespace sl
