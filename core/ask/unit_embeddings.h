// Sentence embeddings of every unit (page, slide, segment) of a library's documents, cached on
// disk beside the library so that each question embeds only itself: a unit's text is cut into
// passages of about `passage_chars` bytes at word boundaries (MiniLM reads 256 word pieces), each
// passage embedded once. The question-aware context (unit_ranking.h) and the citation ranking
// (citations of the answer against every unit read) use the same vectors.
//
// File: <dir>/<document id, 24 hex>-<model name>.emb, one per document:
//   "SLEMB01\n" | u32 dim | u32 passage_chars | u32 n_units | per unit: u32 unit index, u64 text
//   hash (FNV-1a of the unit text), u32 n_passages, n_passages * dim f32
// A file that does not parse (truncated, hostile, another model's dim) is ignored and rewritten;
// units whose text hash changed are embedded again. Written to a temporary file and renamed.
//
// Threading: not thread-safe; one instance per thread that asks. The Embedder is called on the
// calling thread and must outlive the calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sl {

class Embedder;

class UnitEmbeddings {
public:
    static constexpr size_t kPassageChars = 1000;
    UnitEmbeddings(std::filesystem::path dir, Embedder& embedder, size_t passage_chars = kPassageChars);

    struct Request {
        std::string document;   // doc::Document::id
        int unit = 0;           // doc::Unit::index
        std::string_view text;  // the unit's text
    };
    // The passages' embeddings of each requested unit, in request order (a unit without text
    // gets none). Loads each document's file once, embeds what is missing (in batches, reporting
    // progress as (done, to do) through `progress` when set) and saves the files it changed.
    std::vector<std::vector<std::vector<float>>> get(const std::vector<Request>& units,
                                                     const std::function<void(size_t, size_t)>& progress = {});

    Embedder& embedder() { return embedder_; }

    // Passages of `text`: pieces of at most about `chars` bytes cut at white space.
    static std::vector<std::string> passages(std::string_view text, size_t chars);
    static uint64_t text_hash(std::string_view text);

private:
    struct Entry {
        uint64_t hash = 0;
        std::vector<std::vector<float>> passages;
    };
    struct DocFile {
        std::map<int, Entry> units;
        bool dirty = false;
    };
    std::filesystem::path file_of(const std::string& document) const;
    DocFile& load(const std::string& document);
    void save(const std::string& document, const DocFile& f) const;

    std::filesystem::path dir_;
    Embedder& embedder_;
    size_t passage_chars_;
    size_t dim_ = 0;
    std::map<std::string, DocFile> docs_;
};

}  // namespace sl
