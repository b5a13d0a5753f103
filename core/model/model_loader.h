// Opens a GGUF model file and builds what the runtime needs from it: the model (views into the
// mapped file), its tokenizer and chat template. Architectures of the llama family are read here;
// others are refused with a message that names the architecture. A file with an MSA indexer
// ("<arch>.attention.indexer.*", "<arch>.leading_dense_block_count" and blk.N.indexer.{q_proj,
// k_proj,q_norm,k_norm}.weight for every layer N >= leading_dense_block_count; MSA.md) gets it in
// LlamaConfig::indexer and LlamaLayer::idx_*; shapes are checked, errors name the file and tensor/key.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/gguf/gguf_reader.h"
#include "core/model/llama_model.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"

namespace sl {

// Owns the mapped file; `model` and `tokenizer` refer into it, so they live and die together.
// Immutable after load; may be shared by sessions on several threads.
struct LoadedModel {
    GgufFile file;
    std::unique_ptr<LlamaModel> model;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<ChatTemplate> chat;
    double load_seconds = 0;
};

// Throws IoError / FormatError naming the file and what is wrong (missing tensor, wrong shape,
// unsupported architecture or tensor type).
std::unique_ptr<LoadedModel> load_model(const std::filesystem::path& path);

// The config of a llama-family file (also for `sightline-cli info`).
LlamaConfig read_llama_config(const GgufFile& file);

// The tokenizer description in a GGUF file's metadata.
TokenizerData read_tokenizer_data(const GgufFile& file);

}  // namespace sl
