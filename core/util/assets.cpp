#include "core/util/assets.h"

#include "core/util/paths.h"
#include "sightline/asset_pins.h"

namespace sl::assets {

const std::vector<Asset>& all() {
    static const std::vector<Asset> list = [] {
        std::vector<Asset> v;
        for (const auto& pin : generated::kAssetPins) v.push_back({pin.path, pin.sha256});
        return v;
    }();
    return list;
}

std::string pinned_sha256(const std::string& relative_path) {
    for (const auto& a : all())
        if (a.relative_path == relative_path) return a.sha256;
    return {};
}

std::filesystem::path path_of(const std::string& relative_path) { return paths::cache_dir() / relative_path; }

}  // namespace sl::assets
