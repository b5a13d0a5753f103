#include "core/kvcache/kv_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/kvcache/kv_file.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/kv_convert.h"

namespace sl {

const char* kv_type_name(KvType t) {
    switch (t) {
        case KvType::F32: return "f32";
        case KvType::F16: return "f16";
        case KvType::Int8: return "int8";
    }
    return "?";
}

std::optional<KvType> parse_kv_type(std::string_view name) {
    if (name == "f32") return KvType::F32;
    if (name == "f16") return KvType::F16;
    if (name == "int8" || name == "i8" || name == "q8") return KvType::Int8;
    return std::nullopt;
}

size_t kv_type_size(KvType t) {
    switch (t) {
        case KvType::F32: return 4;
        case KvType::F16: return 2;
        case KvType::Int8: return 1;
    }
    return 4;
}

int64_t parse_byte_size(std::string_view text) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end == s.c_str() || errno != 0 || !(v >= 0))
        throw Error("'" + s + "' is not a size (examples: 512M, 2G, 1000000)");
    double mul = 1;
    std::string_view rest(end);
    if (!rest.empty()) {
        switch (rest[0]) {
            case 'k': case 'K': mul = 1024.0; break;
            case 'm': case 'M': mul = 1024.0 * 1024; break;
            case 'g': case 'G': mul = 1024.0 * 1024 * 1024; break;
            case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
            default: throw Error("'" + s + "' is not a size (examples: 512M, 2G, 1000000)");
        }
        rest.remove_prefix(1);
        if (rest == "iB" || rest == "B" || rest == "b") rest = {};
        if (!rest.empty()) throw Error("'" + s + "' is not a size (examples: 512M, 2G, 1000000)");
    }
    const double bytes = v * mul;
    if (bytes > 9.0e18) throw Error("'" + s + "' is too large a size");
    return static_cast<int64_t>(bytes);
}

// The spill file: an unlinked temp file, written with pwrite, read through one read-only shared
// map reserved for its largest possible size (pages never move once written).
class KvCache::Spill {
public:
    Spill(const std::string& dir, size_t capacity) : capacity_(capacity) {
        const std::filesystem::path d = dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(dir);
        std::string tmpl = (d / "sightline-kv-spill-XXXXXX").string();
        fd_ = ::mkstemp(tmpl.data());
        if (fd_ < 0) throw IoError(tmpl + ": cannot create the KV spill file: " + std::strerror(errno));
        ::unlink(tmpl.c_str());
        path_ = tmpl;
        void* p = ::mmap(nullptr, capacity_, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd_, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd_);
            throw IoError(path_ + ": cannot map the KV spill file: " + std::strerror(err));
        }
        map_ = static_cast<uint8_t*>(p);
    }
    ~Spill() {
        if (map_) ::munmap(map_, capacity_);
        if (fd_ >= 0) ::close(fd_);
    }
    Spill(const Spill&) = delete;
    Spill& operator=(const Spill&) = delete;

    // Appends `n` bytes; returns their place in the map.
    const uint8_t* put(const uint8_t* data, size_t n) {
        if (used_ + n > capacity_) throw IoError(path_ + ": KV spill file full");
        size_t done = 0;
        while (done < n) {
            const ssize_t w = ::pwrite(fd_, data + done, n - done, static_cast<off_t>(used_ + done));
            if (w < 0) {
                if (errno == EINTR) continue;
                throw IoError(path_ + ": cannot write the KV spill file: " + std::strerror(errno));
            }
            done += static_cast<size_t>(w);
        }
        const uint8_t* at = map_ + used_;
        used_ += n;
        return at;
    }
    // Drops the map's resident pages (they stay in the page cache; re-read on use).
    void release_resident() const { if (used_) ::madvise(map_, used_, MADV_DONTNEED); }

private:
    int fd_ = -1;
    std::string path_;
    uint8_t* map_ = nullptr;
    size_t capacity_ = 0;
    size_t used_ = 0;
};

namespace {

uint8_t* alloc_page(size_t bytes) {
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw Error("KV cache: out of memory allocating a page of " + std::to_string(bytes) + " bytes");
    return static_cast<uint8_t*>(p);
}

}  // namespace

KvCache::KvCache(int n_layer, int n_ctx, int n_kv_head, int head_dim, KvCacheOptions options)
    : n_layer_(n_layer), n_ctx_(n_ctx), n_kv_head_(n_kv_head), head_dim_(head_dim), block_(options.block_size),
      opt_(std::move(options)), row_(static_cast<int64_t>(n_kv_head) * head_dim) {
    if (n_layer <= 0 || n_ctx <= 0 || n_kv_head <= 0 || head_dim <= 0)
        throw Error("KV cache: invalid shape (" + std::to_string(n_layer) + " layers, " + std::to_string(n_ctx) +
                    " positions, " + std::to_string(n_kv_head) + " KV heads of dim " + std::to_string(head_dim) + ")");
    if (block_ <= 0 || block_ > 65536) throw Error("KV cache: block size must be in 1..65536, got " + std::to_string(block_));
    if (opt_.type != KvType::F32 && opt_.type != KvType::F16 && opt_.type != KvType::Int8)
        throw Error("KV cache: unknown storage type");
    if (opt_.budget_bytes < 0) throw Error("KV cache: negative budget");
    max_pages_ = (static_cast<int64_t>(n_ctx) + block_ - 1) / block_;
    esize_ = kv_type_size(opt_.type);
    const size_t rows = static_cast<size_t>(block_) * static_cast<size_t>(head_dim_);
    head_bytes_ = 2 * rows * esize_ + (opt_.type == KvType::Int8 ? 2 * static_cast<size_t>(block_) * sizeof(float) : 0);
    page_bytes_ = page_bytes_for(opt_.type, block_, n_kv_head_, head_dim_);
    pages_.resize(static_cast<size_t>(n_layer_) * static_cast<size_t>(max_pages_));
    mapped_reads_.assign(16, 0);
}

KvCache::~KvCache() { clear(); }

size_t KvCache::page_bytes_for(KvType type, int block_size, int n_kv_head, int head_dim) {
    const size_t rows = static_cast<size_t>(block_size) * static_cast<size_t>(head_dim);
    const size_t head = 2 * rows * kv_type_size(type) + (type == KvType::Int8 ? 2 * static_cast<size_t>(block_size) * sizeof(float) : 0);
    return (head * static_cast<size_t>(n_kv_head) + 63) / 64 * 64;
}

void KvCache::free_ram(Page& p) {
    if (p.ram) {
        std::free(p.ram);
        p.ram = nullptr;
        --ram_pages_;
    }
}

void KvCache::clear() {
    for (auto& p : pages_) {
        free_ram(p);
        p.mapped = nullptr;
        p.uses = 0;
        p.unchecked = 0;
    }
    damaged_ = 0;
    spill_.reset();
    mappings_.clear();
    spilled_ = 0;
    n_past_ = 0;
}

uint8_t* KvCache::writable(int layer, int64_t b) {
    Page& p = slot(layer, b);
    if (p.ram) return p.ram;
    if (opt_.budget_bytes > 0 && (ram_pages_ + 1) * page_bytes_ > static_cast<size_t>(opt_.budget_bytes)) maintain();
    p.ram = alloc_page(page_bytes_);
    ++ram_pages_;
    if (p.mapped) {
        check(p, layer, b);
        std::memcpy(p.ram, p.mapped, page_bytes_);
    } else {
        std::memset(p.ram, 0, page_bytes_);
    }
    p.mapped = nullptr;
    p.unchecked = 0;
    return p.ram;
}

void KvCache::write(int layer, int64_t pos, const float* k, const float* v) {
    if (layer < 0 || layer >= n_layer_ || pos < 0 || pos >= n_ctx_)
        throw Error("KV cache: write of layer " + std::to_string(layer) + " position " + std::to_string(pos) +
                    " outside " + std::to_string(n_layer_) + " layers x " + std::to_string(n_ctx_) + " positions");
    const auto hd = static_cast<size_t>(head_dim_);
    for (int h = 0; h < n_kv_head_; ++h) write_rows(layer, h, pos, 1, k + static_cast<size_t>(h) * hd, v + static_cast<size_t>(h) * hd);
}

void KvCache::write_rows(int layer, int head, int64_t pos, int n, const float* k, const float* v) {
    if (layer < 0 || layer >= n_layer_ || head < 0 || head >= n_kv_head_ || n <= 0 || pos < 0 || pos + n > n_ctx_ ||
        pos / block_ != (pos + n - 1) / block_)
        throw Error("KV cache: write of layer " + std::to_string(layer) + " head " + std::to_string(head) + " positions [" +
                    std::to_string(pos) + ", " + std::to_string(pos + n) + "): not within one page of " +
                    std::to_string(n_layer_) + " layers x " + std::to_string(n_kv_head_) + " heads x " +
                    std::to_string(n_ctx_) + " positions");
    const int64_t b = pos / block_;
    encode_rows(writable(layer, b), head, static_cast<int>(pos - b * block_), n, k, v);
}

void KvCache::encode_rows(uint8_t* page, int head, int j0, int n, const float* k, const float* v) const {
    const auto j = static_cast<size_t>(j0);
    uint8_t* base = page + static_cast<size_t>(head) * head_bytes_;
    const auto hd = static_cast<size_t>(head_dim_);
    const size_t rows = static_cast<size_t>(block_) * hd;
    const size_t count = static_cast<size_t>(n) * hd;
    switch (opt_.type) {
        case KvType::F32:
            std::memcpy(base + j * hd * 4, k, count * 4);
            std::memcpy(base + (rows + j * hd) * 4, v, count * 4);
            break;
        case KvType::F16:
            kernels::f32_to_f16(reinterpret_cast<uint16_t*>(base) + j * hd, k, count);
            kernels::f32_to_f16(reinterpret_cast<uint16_t*>(base) + rows + j * hd, v, count);
            break;
        case KvType::Int8: {
            auto* q = reinterpret_cast<int8_t*>(base);
            auto* scales = reinterpret_cast<float*>(base + 2 * rows);
            for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
                scales[j + r] = kernels::quantize_row_i8(q + (j + r) * hd, k + r * hd, static_cast<int64_t>(hd));
                scales[static_cast<size_t>(block_) + j + r] =
                    kernels::quantize_row_i8(q + rows + (j + r) * hd, v + r * hd, static_cast<int64_t>(hd));
            }
            break;
        }
    }
}

const uint8_t* KvCache::page(int layer, int64_t b) const {
    if (layer < 0 || layer >= n_layer_ || b < 0 || b >= max_pages_) return nullptr;
    const Page& p = slot(layer, b);
    if (p.ram) return p.ram;
    if (p.mapped) check(p, layer, b);
    return p.mapped;
}

void KvCache::check(const Page& p, int layer, int64_t b) const {
    std::atomic_ref<uint8_t> unchecked(const_cast<uint8_t&>(p.unchecked));
    if (unchecked.load(std::memory_order_relaxed) == 0) return;
    // Two readers may check a page at once: the same answer, recorded once.
    if (kv_hash(p.mapped, page_bytes_) != p.checksum) {
        int64_t none = 0;
        std::atomic_ref<int64_t>(damaged_).compare_exchange_strong(none, static_cast<int64_t>(layer) * max_pages_ + b + 1,
                                                                   std::memory_order_relaxed);
    }
    unchecked.store(0, std::memory_order_relaxed);
}

std::optional<std::pair<int, int64_t>> KvCache::damaged() const {
    const int64_t d = std::atomic_ref<int64_t>(damaged_).load(std::memory_order_relaxed);
    if (d == 0) return std::nullopt;
    return std::make_pair(static_cast<int>((d - 1) / max_pages_), (d - 1) % max_pages_);
}

int64_t KvCache::unchecked_pages() const {
    int64_t n = 0;
    for (const auto& p : pages_) n += std::atomic_ref<uint8_t>(const_cast<uint8_t&>(p.unchecked)).load(std::memory_order_relaxed);
    return n;
}

const uint8_t* KvCache::read_page(int layer, int64_t b) const {
    const Page& p = slot(layer, b);
    std::atomic_ref<uint32_t>(const_cast<uint32_t&>(p.uses)).fetch_add(1, std::memory_order_relaxed);
    if (p.ram) return p.ram;
    if (p.mapped) {
        check(p, layer, b);
        std::atomic_ref<int64_t>(mapped_reads_[0]).fetch_add(1, std::memory_order_relaxed);
        // Under a budget, pages read from maps must not pile up as resident memory within a step:
        // after every budget/4 bytes so read, drop the maps' resident pages (safe while others read:
        // they fault back in from the file).
        if (opt_.budget_bytes > 0) {
            const auto every = std::max<int64_t>(opt_.budget_bytes / 4, static_cast<int64_t>(page_bytes_));
            std::atomic_ref<int64_t> since(mapped_reads_[8]);
            if (since.fetch_add(static_cast<int64_t>(page_bytes_), std::memory_order_relaxed) + static_cast<int64_t>(page_bytes_) >= every) {
                since.store(0, std::memory_order_relaxed);
                release_maps();
            }
        }
        return p.mapped;
    }
    throw Error("KV cache: read of layer " + std::to_string(layer) + " block " + std::to_string(b) + ", never written");
}

int64_t KvCache::mapped_reads() const {
    return std::atomic_ref<int64_t>(mapped_reads_[0]).load(std::memory_order_relaxed);
}

const float* KvCache::rows(bool value, int layer, int head, int64_t pos, int n, float* scratch) const {
    const int64_t b = pos / block_;
    const auto j = static_cast<size_t>(pos - b * block_);
    const auto hd = static_cast<size_t>(head_dim_);
    const size_t block_rows = static_cast<size_t>(block_) * hd;
    const uint8_t* base = read_page(layer, b) + static_cast<size_t>(head) * head_bytes_;
    const size_t off = (value ? block_rows : 0) + j * hd;
    const size_t count = static_cast<size_t>(n) * hd;
    switch (opt_.type) {
        case KvType::F32: return reinterpret_cast<const float*>(base) + off;
        case KvType::F16:
            kernels::f16_to_f32(scratch, reinterpret_cast<const uint16_t*>(base) + off, count);
            return scratch;
        case KvType::Int8: {
            const auto* q = reinterpret_cast<const int8_t*>(base) + off;
            const auto* scales = reinterpret_cast<const float*>(base + 2 * block_rows) + (value ? block_ : 0) + j;
            for (int r = 0; r < n; ++r)
                kernels::dequantize_row_i8(scratch + static_cast<size_t>(r) * hd, q + static_cast<size_t>(r) * hd, scales[r],
                                           static_cast<int64_t>(hd));
            return scratch;
        }
    }
    return scratch;
}

const float* KvCache::k_rows(int layer, int head, int64_t pos, int n, float* scratch) const {
    return rows(false, layer, head, pos, n, scratch);
}

const float* KvCache::v_rows(int layer, int head, int64_t pos, int n, float* scratch) const {
    return rows(true, layer, head, pos, n, scratch);
}

namespace {

template <class RowsFn>
const float* span_of(const KvCache& kv, RowsFn&& rows_fn, int64_t pos, int64_t n, float* scratch) {
    const int B = kv.block_size();
    if (n <= 0) return scratch;
    if (pos / B == (pos + n - 1) / B) return rows_fn(pos, static_cast<int>(n), scratch);
    const auto hd = static_cast<size_t>(kv.head_dim());
    for (int64_t p = pos; p < pos + n;) {
        const int64_t e = std::min(pos + n, (p / B + 1) * B);
        float* dst = scratch + static_cast<size_t>(p - pos) * hd;
        const float* src = rows_fn(p, static_cast<int>(e - p), dst);
        if (src != dst) std::memcpy(dst, src, static_cast<size_t>(e - p) * hd * sizeof(float));
        p = e;
    }
    return scratch;
}

}  // namespace

const float* KvCache::k_span(int layer, int head, int64_t pos, int64_t n, float* scratch) const {
    return span_of(*this, [&](int64_t p, int m, float* s) { return k_rows(layer, head, p, m, s); }, pos, n, scratch);
}

const float* KvCache::v_span(int layer, int head, int64_t pos, int64_t n, float* scratch) const {
    return span_of(*this, [&](int64_t p, int m, float* s) { return v_rows(layer, head, p, m, s); }, pos, n, scratch);
}

void KvCache::read(int layer, int64_t pos, float* k, float* v) const {
    const auto hd = static_cast<size_t>(head_dim_);
    std::vector<float> tmp(hd);
    for (int h = 0; h < n_kv_head_; ++h) {
        const float* kr = k_rows(layer, h, pos, 1, tmp.data());
        std::memcpy(k + static_cast<size_t>(h) * hd, kr, hd * sizeof(float));
        const float* vr = v_rows(layer, h, pos, 1, tmp.data());
        std::memcpy(v + static_cast<size_t>(h) * hd, vr, hd * sizeof(float));
    }
}

void KvCache::set_n_past(int64_t n) {
    n_past_ = n;
    maintain();
}

void KvCache::attach(int layer, int64_t b, const uint8_t* bytes, const std::shared_ptr<const MappedFile>& mapping) {
    if (layer < 0 || layer >= n_layer_ || b < 0 || b >= max_pages_)
        throw Error("KV cache: attach of layer " + std::to_string(layer) + " block " + std::to_string(b) + " out of range");
    Page& p = slot(layer, b);
    free_ram(p);
    p.mapped = bytes;
    p.uses = 0;
    p.unchecked = 0;
    if (mapping && (mappings_.empty() || mappings_.back() != mapping)) mappings_.push_back(mapping);
}

void KvCache::attach(int layer, int64_t b, const uint8_t* bytes, const std::shared_ptr<const MappedFile>& mapping,
                     uint64_t checksum) {
    attach(layer, b, bytes, mapping);
    Page& p = slot(layer, b);
    p.checksum = checksum;
    p.unchecked = 1;
}

bool KvCache::reserve(int layer, int64_t b0, int64_t b1, ThreadPool* pool) {
    if (layer < 0 || layer >= n_layer_ || b0 < 0 || b1 > max_pages_ || b0 > b1)
        throw Error("KV cache: reserve of layer " + std::to_string(layer) + " pages [" + std::to_string(b0) + ", " +
                    std::to_string(b1) + ") out of range");
    if (opt_.budget_bytes > 0) return false;
    // Allocated here (untouched); copied or zeroed below, on the pool when there is one.
    struct Fresh {
        uint8_t* ram;
        Page copy;  // the page as it was (its map copy, unchecked or not)
        int64_t b;
    };
    std::vector<Fresh> fresh;
    fresh.reserve(static_cast<size_t>(b1 - b0));
    auto fill = [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
            const Fresh& f = fresh[static_cast<size_t>(i)];
            if (f.copy.mapped) {
                check(f.copy, layer, f.b);
                std::memcpy(f.ram, f.copy.mapped, page_bytes_);
            } else {
                std::memset(f.ram, 0, page_bytes_);
            }
        }
    };
    try {
        for (int64_t b = b0; b < b1; ++b) {
            Page& p = slot(layer, b);
            if (p.ram) continue;
            p.ram = alloc_page(page_bytes_);
            ++ram_pages_;
            fresh.push_back({p.ram, p, b});
            p.mapped = nullptr;
            p.unchecked = 0;
        }
    } catch (...) {  // out of memory: the pages allocated so far hold what they should first
        fill(0, static_cast<int64_t>(fresh.size()), 0);
        throw;
    }
    const auto n = static_cast<int64_t>(fresh.size());
    if (pool && pool->size() > 1 && n > 1) pool->parallel_for(n, fill);
    else fill(0, n, 0);
    return true;
}

void KvCache::release_unused() {
    const int64_t live = (n_past_ + block_ - 1) / block_;
    std::vector<bool> used(mappings_.size(), false);
    for (int l = 0; l < n_layer_; ++l)
        for (int64_t b = 0; b < max_pages_; ++b) {
            Page& p = slot(l, b);
            if (b >= live) {  // past the context: never read again before it is written
                free_ram(p);
                p.mapped = nullptr;
                p.uses = 0;
                p.unchecked = 0;
                continue;
            }
            if (!p.mapped) continue;
            for (size_t i = 0; i < mappings_.size(); ++i) {
                const MappedFile& m = *mappings_[i];
                if (p.mapped >= m.data() && p.mapped < m.data() + m.size()) {
                    used[i] = true;
                    break;
                }
            }
        }
    size_t keep = 0;
    for (size_t i = 0; i < mappings_.size(); ++i)
        if (used[i]) mappings_[keep++] = std::move(mappings_[i]);
    mappings_.resize(keep);
}

void KvCache::release_maps() const {
    if (spill_) spill_->release_resident();
    for (const auto& m : mappings_)
        if (m->size()) ::madvise(const_cast<uint8_t*>(m->data()), m->size(), MADV_DONTNEED);
}

void KvCache::maintain() {
    if (opt_.budget_bytes <= 0) return;
    // Pages read from maps count as resident memory until dropped: drop them after each step.
    if (mapped_reads() > 0) release_maps();
    const auto budget = static_cast<size_t>(opt_.budget_bytes);
    if (ram_pages_ * page_bytes_ <= budget) return;
    // Evict down to 7/8 of the budget, coldest full pages first (fewest reads since the last pass).
    const size_t target = budget / 8 * 7;
    const int64_t full = n_past_ / block_;  // pages [0, full) of every layer are complete
    struct Cand { uint32_t uses; int layer; int64_t b; };
    std::vector<Cand> cand;
    for (int l = 0; l < n_layer_; ++l)
        for (int64_t b = 0; b < std::min(full, max_pages_); ++b) {
            const Page& p = slot(l, b);
            if (p.ram) cand.push_back({p.uses, l, b});
        }
    std::sort(cand.begin(), cand.end(), [](const Cand& a, const Cand& c) {
        return a.uses < c.uses || (a.uses == c.uses && (a.b < c.b || (a.b == c.b && a.layer < c.layer)));
    });
    for (const Cand& c : cand) {
        if (ram_pages_ * page_bytes_ <= target) break;
        Page& p = slot(c.layer, c.b);
        if (!p.mapped) {
            if (!spill_)
                spill_ = std::make_unique<Spill>(opt_.spill_dir, static_cast<size_t>(n_layer_) * static_cast<size_t>(max_pages_) * page_bytes_);
            p.mapped = spill_->put(p.ram, page_bytes_);
            ++spilled_;
        }
        free_ram(p);
    }
    for (auto& p : pages_) p.uses >>= 1;
}

size_t KvCache::bytes() const {
    size_t n = 0;
    for (const auto& p : pages_)
        if (p.ram || p.mapped) ++n;
    return n * page_bytes_;
}

}  // namespace sl
