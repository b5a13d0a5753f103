// Sentence embeddings with all-MiniLM-L6-v2 (sentence-transformers) on Sightline's own runtime:
// WordPiece tokens (core/embed/wordpiece_tokenizer.h) -> BERT encoder (core/embed/bert_encoder.h)
// -> mean over the tokens -> L2 normalisation. A 384-dim unit vector per text; the cosine of two
// texts is the dot product of their vectors. Used for citation verification and evidence
// preselection (core/answer).
//
// The model directory is what scripts/setup.sh installs under
// <cache>/models/all-MiniLM-L6-v2: model.safetensors, config.json, vocab.txt (tokenizer.json is
// not needed; sentence_bert_config.json, when present, gives max_seq_length; 1_Pooling/config.json,
// when present, must say mean pooling).
//
// Threading: embed() may be called from any thread; calls are serialized on an internal mutex
// (the encoder's thread pool has one owner at a time). Open one embedder per process and share
// it. The embedder owns its memory map (91 MB, the embedding tables are read from it), the linear
// weights packed for the GEMM (~43 MB), its thread pool, and work buffers that grow to the
// largest batch (~16 MB at the default batch_tokens).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/embed/bert_encoder.h"
#include "core/embed/safetensors.h"
#include "core/embed/wordpiece_tokenizer.h"
#include "core/runtime/thread_pool.h"

namespace sl {

class SentenceEmbedder {
public:
    struct Options {
        int n_threads = 0;           // <= 0: one per core
        size_t max_tokens = 0;       // 0: max_seq_length of sentence_bert_config.json, else 256
        size_t batch_tokens = 1024;  // sequences are encoded together up to this many tokens
    };

    // Opens the model in `dir`. Throws sl::Error (IoError / FormatError) naming the file and the
    // problem when a file is missing, unreadable or malformed.
    static std::unique_ptr<SentenceEmbedder> open(const std::string& dir);
    static std::unique_ptr<SentenceEmbedder> open(const std::string& dir, const Options& options);
    // <cache>/models/all-MiniLM-L6-v2, where scripts/setup.sh puts the model.
    static std::filesystem::path default_dir();

    // Embedding width (384).
    int dim() const { return encoder_->config().hidden; }
    // Texts are cut to this many tokens including [CLS] and [SEP] (256).
    size_t max_tokens() const { return max_tokens_; }
    const WordpieceTokenizer& tokenizer() const { return tokenizer_; }

    // The unit-length embedding of `text` (dim() floats). Any text, empty included.
    std::vector<float> embed(std::string_view text);
    // One embedding per text, in order; equal to embed() of each (batched for speed).
    std::vector<std::vector<float>> embed(std::span<const std::string> texts);

    // Cosine similarity of two embeddings from this class (their dot product; both unit length).
    static float similarity(std::span<const float> a, std::span<const float> b);

    SentenceEmbedder(const SentenceEmbedder&) = delete;
    SentenceEmbedder& operator=(const SentenceEmbedder&) = delete;

private:
    SentenceEmbedder(const std::filesystem::path& dir, const Options& options);
    void embed_batch(std::span<const std::vector<int32_t>> seqs,
                     std::vector<std::vector<float>>& out);

    SafetensorsFile weights_;
    WordpieceTokenizer tokenizer_;
    std::unique_ptr<BertEncoder> encoder_;
    size_t max_tokens_ = 256;
    size_t batch_tokens_ = 1024;
    std::mutex mutex_;  // guards pool_ and scratch_
    ThreadPool pool_;
    BertScratch scratch_;
    std::vector<float> hidden_;
};

}  // namespace sl
