#include "core/ask/kv_budget.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "core/kvcache/kv_file.h"
#include "core/library/library.h"

namespace fs = std::filesystem;

namespace sl {

namespace {

std::string canonical_or_self(const fs::path& p) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(p, ec);
    return ec ? p.string() : c.string();
}

}  // namespace

KvTrim trim_kv_folder(Library& lib, int64_t cap, const std::vector<std::string>& keep,
                      const std::vector<std::string>& exempt) {
    KvTrim t;
    std::error_code ec;
    const fs::path dir = lib.kv_dir();
    std::vector<std::string> exempted;
    for (const auto& e : exempt) exempted.push_back(canonical_or_self(e));
    struct File {
        std::string path;
        int64_t bytes = 0;
        int64_t used_ms = -1;  // -1: no record (orphan)
        int64_t record = 0;
        std::string base;      // a delta file's base (canonical), else empty
        bool gone = false;
    };
    std::map<std::string, File> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        if (std::find(exempted.begin(), exempted.end(), canonical_or_self(it->path())) != exempted.end()) continue;
        File f;
        f.path = it->path().string();
        f.bytes = static_cast<int64_t>(it->file_size(ec));
        if (ec) f.bytes = 0;
        t.total += f.bytes;
        if (const KvFileBase b = kv_file_base(f.path); !b.empty()) f.base = canonical_or_self(dir / b.name);
        files[canonical_or_self(it->path())] = f;
    }
    if (cap <= 0 || t.total <= cap) return t;
    for (const KvCacheRecord& r : lib.list_kv_caches()) {
        auto it = files.find(canonical_or_self(r.path));
        if (it == files.end()) continue;
        it->second.used_ms = std::max(it->second.used_ms, r.updated_ms);
        it->second.record = r.id;
    }
    std::vector<std::string> kept;
    for (const auto& k : keep) kept.push_back(canonical_or_self(k));
    for (size_t i = 0, n = kept.size(); i < n; ++i)  // a kept delta keeps its base
        if (auto it = files.find(kept[i]); it != files.end() && !it->second.base.empty()) kept.push_back(it->second.base);
    std::vector<File*> order;
    for (auto& [key, f] : files)
        if (std::find(kept.begin(), kept.end(), key) == kept.end()) order.push_back(&f);
    // Orphans and temporary files first, then least recently used.
    std::stable_sort(order.begin(), order.end(), [](const File* a, const File* b) {
        const bool ta = a->path.size() > 4 && a->path.compare(a->path.size() - 4, 4, ".tmp") == 0;
        const bool tb = b->path.size() > 4 && b->path.compare(b->path.size() - 4, 4, ".tmp") == 0;
        if (ta != tb) return ta;
        return a->used_ms < b->used_ms;
    });
    auto remove = [&](File& f) {
        if (f.gone) return;
        f.gone = true;
        if (f.record > 0) lib.remove_kv_cache(f.record);  // removes the file too (under kv_dir())
        fs::remove(f.path, ec);
        t.total -= f.bytes;
        t.freed += f.bytes;
        ++t.removed;
    };
    for (File* f : order) {
        if (t.total <= cap) break;
        if (f->gone) continue;
        remove(*f);
        // The deltas over it are unusable without it.
        const std::string key = canonical_or_self(f->path);
        for (auto& [k, d] : files)
            if (d.base == key) remove(d);
    }
    return t;
}

}  // namespace sl
