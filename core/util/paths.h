// Where Sightline keeps its cache (models, sample inputs) and which files live there.
// Pure functions of the environment; thread-safe.
#pragma once

#include <filesystem>

namespace sl::paths {

// $SIGHTLINE_CACHE, else $XDG_CACHE_HOME/sightline, else ~/.cache/sightline (as scripts/env.sh).
std::filesystem::path cache_dir();

// The default model that scripts/setup.sh fetches: SmolLM2-135M-Instruct Q4_1.
std::filesystem::path default_model();

// cache_dir()/samples: the real sample inputs of shared/DATA.md.
std::filesystem::path samples_dir();

// The command that fills the cache, for error messages.
const char* setup_command();

}  // namespace sl::paths
