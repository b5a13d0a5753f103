// Encoded visuals kept on disk beside the library, so that a visual is encoded once per vision
// tower and render size, not once per question (a 512 px SigLIP tile costs seconds of CPU).
//
// File: <dir>/<tower id, 16 hex>-<document id, 24 hex>-<unit>-<visual>-<w>x<h>-<edge>.vemb
//   "SLVEMB1\n" | u32 rows | u32 width | rows * width f16
// The rows are stored as f16; VisualEmbeddings rounds fresh encodings the same way, so a cached
// visual gives exactly what a fresh one gave. A file that does not parse or does not hold the
// rows asked for is ignored (and replaced by the next store). Written to a temporary file and
// renamed; a failed write costs time, not correctness.
//
// Threading: none of its own; one instance per asking thread (distinct files per key).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sl {

struct VisualKey {
    std::string tower;     // AskVision::identity (the mmproj's sha256)
    std::string document;  // doc::Document::id
    int unit = 0, visual = 0;
    int width = 0, height = 0;  // the encode size
    int edge = -1;              // the tiling edge (visual_tile_edge)
};

class VisualCache {
public:
    explicit VisualCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

    // The rows of `key` when a file holds exactly rows x width of them; nullopt otherwise.
    std::optional<std::vector<float>> load(const VisualKey& key, int64_t rows, int width) const;
    // Stores `data` (rows x width, already f16-exact: round_to_f16) for `key`.
    void store(const VisualKey& key, const std::vector<float>& data, int width) const;

    std::filesystem::path path(const VisualKey& key) const;

    // Rounds every value to the nearest f16 (what a stored file gives back).
    static void round_to_f16(std::vector<float>& data);

private:
    std::filesystem::path dir_;
};

}  // namespace sl
