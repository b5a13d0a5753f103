// The verification Embedder backed by all-MiniLM-L6-v2 (core/embed/sentence_embedder.h).
// The SentenceEmbedder must outlive this adapter; thread-safety as SentenceEmbedder's.
#pragma once

#include "core/answer/verify.h"
#include "core/embed/sentence_embedder.h"

namespace sl {

class MiniLmEmbedder final : public Embedder {
public:
    explicit MiniLmEmbedder(SentenceEmbedder& model) : model_(model) {}
    std::vector<float> embed(std::string_view text) override { return model_.embed(text); }
    std::vector<std::vector<float>> embed_many(std::span<const std::string> texts) override {
        return model_.embed(texts);
    }
    std::string name() const override { return "all-MiniLM-L6-v2"; }

private:
    SentenceEmbedder& model_;
};

}  // namespace sl
