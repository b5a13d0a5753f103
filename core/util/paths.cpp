#include "core/util/paths.h"

#include <cstdlib>

#include "core/util/assets.h"

namespace sl::paths {

namespace fs = std::filesystem;

fs::path cache_dir() {
    if (const char* c = std::getenv("SIGHTLINE_CACHE"); c && *c) return fs::path(c);
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "sightline";
    if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "sightline";
    return fs::temp_directory_path() / "sightline-cache";
}

fs::path default_model() { return cache_dir() / assets::kDefaultModel; }

fs::path samples_dir() { return cache_dir() / "samples"; }

const char* setup_command() { return "scripts/setup.sh"; }

}  // namespace sl::paths
