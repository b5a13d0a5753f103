// The verification Embedder backed by all-MiniLM-L6-v2 (core/embed/sentence_embedder.h).
// The SentenceEmbedder must outlive this adapter; thread-safety as SentenceEmbedder's.
#pragma once

#include <memory>
#include <string>

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

// The installed all-MiniLM-L6-v2 (SentenceEmbedder::default_dir()) with its adapter, or none and
// why: what `ask`, `serve` and the app's answer service open for semantic ranking and verification.
struct InstalledMiniLm {
    std::unique_ptr<SentenceEmbedder> model;
    std::unique_ptr<MiniLmEmbedder> embedder;
    std::string note;  // why there is none ("... is not installed", or the load error); empty when there is
    Embedder* get() const { return embedder.get(); }
    // Never throws: a failure lands in `note`.
    static InstalledMiniLm open();
};

}  // namespace sl
