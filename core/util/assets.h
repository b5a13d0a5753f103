// The pinned downloads that scripts/setup.sh puts in the cache (scripts/assets.sha256).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sl::assets {

struct Asset {
    std::string relative_path;  // e.g. "samples/pdf/refman.pdf"
    std::string sha256;         // pinned, lowercase hex
};

// Every pinned asset, in the order of scripts/assets.sha256.
const std::vector<Asset>& all();

// The pinned hash of `relative_path`, or "" when it is not pinned.
std::string pinned_sha256(const std::string& relative_path);

// cache_dir() / relative_path.
std::filesystem::path path_of(const std::string& relative_path);

// The default model's path relative to the cache.
inline constexpr const char* kDefaultModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
// Gemma 3 270M (base, Q4_K_M): the gemma3 architecture's real-weights check.
inline constexpr const char* kGemma3Model = "models/gemma-3-270m-q4_k_m.gguf";

}  // namespace sl::assets
