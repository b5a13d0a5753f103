// The paged KV cache: per layer, the keys and values of every position, in pages of B positions
// (default 128). A page holds, for each KV head h in turn, K (B, head_dim) then V (B, head_dim) in
// the storage type, then (int8 only) the per-position scales of K (B floats) and V (B floats):
//   F32  — exact; readers get pointers straight into the page.
//   F16  — IEEE half, rounded once when written; readers dequantize into their scratch.
//   Int8 — symmetric int8 with one scale per (position, head) for K and for V (amax / 127), so a
//          row is quantized when written, with no re-quantization as a page fills.
// Pages are allocated when first written (n_ctx only caps positions).
//
// Tiers: pages live in RAM, or are backed by a read-only memory map — a spill file (anonymous,
// unlinked temp file) or a saved cache file attached by restore (kv_file.h). With a byte budget,
// maintain() (called by set_n_past and when a page is allocated) keeps the RAM pages under it:
// full pages with the fewest recent reads leave RAM first (written to the spill file unless a
// mapped copy exists); readers read spilled pages from the map. The partial last page of a layer
// always stays in RAM. Writing into a mapped page copies it back to RAM first.
//
// Threading: writers (write, set_n_past, maintain, attach, clear) run on one thread with no reader
// in flight (the forward pass writes a layer's K/V before its attention call). Readers (k_rows,
// v_rows, k_span, v_span, read) may run on many threads at once; they only bump use counters
// (relaxed atomics). Exception: after reserve() (no budget), write_rows to rows of the reserved
// pages may run on many threads at once, each row written by one (kv_download).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sl {

class ThreadPool;

class MappedFile;

enum class KvType : uint32_t { F32 = 0, F16 = 1, Int8 = 2 };

const char* kv_type_name(KvType t);  // "f32", "f16", "int8"
std::optional<KvType> parse_kv_type(std::string_view name);
// Bytes per element of the storage type.
size_t kv_type_size(KvType t);

struct KvCacheOptions {
    KvType type = KvType::F32;
    int block_size = 128;        // B: positions per page
    int64_t budget_bytes = 0;    // RAM for pages; 0: unlimited (nothing spills)
    std::string spill_dir;       // where the spill file is made; empty: the system temp dir
};

// Parses "512M", "2G", "1.5G", "300K", "1000000" (bytes; K/M/G/T are powers of 1024). Throws
// sl::Error naming the text when it is not a size.
int64_t parse_byte_size(std::string_view text);

class KvCache {
public:
    KvCache(int n_layer, int n_ctx, int n_kv_head, int head_dim, KvCacheOptions options = {});
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    int n_layer() const { return n_layer_; }
    int n_ctx() const { return n_ctx_; }
    int n_kv_head() const { return n_kv_head_; }
    int head_dim() const { return head_dim_; }
    int block_size() const { return block_; }
    KvType type() const { return opt_.type; }
    const KvCacheOptions& options() const { return opt_; }
    // Floats per position and layer over all KV heads (n_kv_head * head_dim).
    int64_t row() const { return row_; }

    // Stores the K and V rows of position `pos` of `layer` (row() floats each, heads contiguous).
    // 0 <= pos < n_ctx.
    void write(int layer, int64_t pos, const float* k, const float* v);
    // Stores rows [pos, pos + n) of KV head `head` of `layer` (n * head_dim floats each, row after
    // row), the range within one page (pos / B == (pos + n - 1) / B): what `write` stores of them,
    // one page lookup and one conversion per head instead of one per position.
    void write_rows(int layer, int head, int64_t pos, int n, const float* k, const float* v);
    // What write_rows stores, into `page` (page_bytes(), this cache's page layout, not one of its
    // pages): rows [j, j + n) of the page (0 <= j, j + n <= B) of KV head `head`. Touches nothing
    // of the cache: callable on many threads at once (a save straight from the device,
    // kv_transfer.h KvStorePages).
    void encode_rows(uint8_t* page, int head, int j, int n, const float* k, const float* v) const;

    // Rows [pos, pos + n) of KV head `head` as f32, row after row (head_dim floats apart). The
    // range must lie in one page (pos / B == (pos + n - 1) / B) and have been written. Returns a
    // pointer into the page (F32) or into `scratch` (>= n * head_dim floats) after dequantizing.
    const float* k_rows(int layer, int head, int64_t pos, int n, float* scratch) const;
    const float* v_rows(int layer, int head, int64_t pos, int n, float* scratch) const;
    // As k_rows / v_rows for any range: pieces from several pages are gathered into `scratch`
    // (>= n * head_dim floats).
    const float* k_span(int layer, int head, int64_t pos, int64_t n, float* scratch) const;
    const float* v_span(int layer, int head, int64_t pos, int64_t n, float* scratch) const;
    // The K and V rows of one position, all heads (row() floats each), as f32. For tests and tools.
    void read(int layer, int64_t pos, float* k, float* v) const;

    // Positions [0, n_past) hold valid entries. Setting it also enforces the budget.
    int64_t n_past() const { return n_past_; }
    void set_n_past(int64_t n);
    // Drops every page (RAM, spill and attached maps) and sets n_past to 0.
    void clear();

    // --- Pages (persistence) ---
    size_t page_bytes() const { return page_bytes_; }
    static size_t page_bytes_for(KvType type, int block_size, int n_kv_head, int head_dim);
    int64_t max_pages() const { return max_pages_; }  // per layer: ceil(n_ctx / B)
    // Page (layer, b)'s bytes wherever they are (RAM or map), or null when never written.
    const uint8_t* page(int layer, int64_t b) const;
    // Whether page (layer, b) was written (or attached), without reading it (no check: a caller
    // that only asks before handing the reads to a pool).
    bool written(int layer, int64_t b) const {
        if (layer < 0 || layer >= n_layer_ || b < 0 || b >= max_pages_) return false;
        const Page& p = slot(layer, b);
        return p.ram || p.mapped;
    }
    // Makes page (layer, b) read from `bytes` (page_bytes() inside `mapping`, which the cache keeps
    // alive while it refers to it), dropping any RAM copy. For restore.
    void attach(int layer, int64_t b, const uint8_t* bytes, const std::shared_ptr<const MappedFile>& mapping);
    // As above, the bytes checked against `checksum` (kv_file.h kv_hash) when first used — by the
    // first reader (k_rows ... read, on any thread), page(), or a copy into RAM (a write, reserve)
    // — so that a restore need not hash the whole file before its first token (23 GB at a million
    // tokens), only the pages it reads. A mismatch is recorded (damaged()) and the bytes are
    // served as they are: whoever reads them checks damaged() afterwards (Session: after every
    // forward call, upload and save) and discards what it computed.
    void attach(int layer, int64_t b, const uint8_t* bytes, const std::shared_ptr<const MappedFile>& mapping, uint64_t checksum);
    // The first page (layer, block) found not to match its checksum since the last clear().
    // Any thread.
    std::optional<std::pair<int, int64_t>> damaged() const;
    // Pages attached with a checksum not checked yet.
    int64_t unchecked_pages() const;

    // Makes pages [b0, b1) of `layer` RAM pages now (copied from their map, or zeroed when new),
    // the first touch of new pages split over `pool` when given: afterwards write_rows to
    // positions in them may run on many threads at once, each row written by one (they allocate
    // nothing). Without a budget only; with one it returns false and does nothing (write serially).
    bool reserve(int layer, int64_t b0, int64_t b1, ThreadPool* pool = nullptr);

    // Drops the pages past the context (blocks from ceil(n_past / B) on: RAM copies and map
    // references) and lets go of the attached maps no page reads any more (their file space and
    // memory are given back): for a context cut back and continued from another file's pages
    // (Session::restore_delta).
    void release_unused();

    // Enforces the budget now (see the header comment).
    void maintain();
    // Drops the resident pages of every map (spill file, attached files): they count as RSS until
    // then. Thread-safe, also while others read (pages fault back in from the file).
    void release_maps() const;

    // --- Accounting ---
    size_t bytes() const;       // bytes of all pages written (RAM + mapped)
    size_t ram_bytes() const { return ram_pages_ * page_bytes_; }
    int64_t pages_spilled() const { return spilled_; }   // pages written to the spill file so far
    int64_t mapped_reads() const;                       // page reads served from a map so far

private:
    struct Page {
        uint8_t* ram = nullptr;             // owned (aligned), or null
        const uint8_t* mapped = nullptr;    // read-only copy in a map, or null
        uint32_t uses = 0;                  // reads since the last budget pass (atomic_ref)
        uint8_t unchecked = 0;              // 1: `mapped` is to match `checksum` at its first use (atomic_ref)
        uint64_t checksum = 0;
    };
    class Spill;

    Page& slot(int layer, int64_t b) { return pages_[static_cast<size_t>(layer) * static_cast<size_t>(max_pages_) + static_cast<size_t>(b)]; }
    const Page& slot(int layer, int64_t b) const { return pages_[static_cast<size_t>(layer) * static_cast<size_t>(max_pages_) + static_cast<size_t>(b)]; }
    const uint8_t* read_page(int layer, int64_t b) const;
    void check(const Page& p, int layer, int64_t b) const;  // the first use of an unchecked page
    uint8_t* writable(int layer, int64_t b);
    const float* rows(bool value, int layer, int head, int64_t pos, int n, float* scratch) const;
    void free_ram(Page& p);

    int n_layer_, n_ctx_, n_kv_head_, head_dim_, block_;
    KvCacheOptions opt_;
    int64_t row_;
    int64_t n_past_ = 0;
    int64_t max_pages_;
    size_t esize_;          // bytes per element
    size_t head_bytes_;     // bytes per head in a page
    size_t page_bytes_;
    std::vector<Page> pages_;          // (n_layer, max_pages)
    size_t ram_pages_ = 0;
    int64_t spilled_ = 0;
    mutable std::vector<int64_t> mapped_reads_;  // [0]: page reads from maps, [8]: bytes since the last release (atomic_ref)
    mutable int64_t damaged_ = 0;       // layer * max_pages + block + 1 of the first damaged page; 0: none (atomic_ref)
    std::unique_ptr<Spill> spill_;
    std::vector<std::shared_ptr<const MappedFile>> mappings_;
};

}  // namespace sl
