// The saved-context file: a prefilled KV cache with its tokens, reopened without prefill
// (Session::save / Session::restore). Untrusted on read: every field is checked before use.
//
// Layout (little-endian; everything 64-byte aligned):
//   [0, 512)   header
//     0   "SLKVCACH"           8   u32 version (1)     12  u32 header bytes (512)
//     16  u32 n_layer  20 u32 n_kv_head  24 u32 head_dim  28 u32 block size  32 u32 storage type
//     36  u32 n_vocab  40 u64 page bytes  48 char[64] model fingerprint (hex)  112 u64 hash of [0, 112)
//     256 char[64] attention signature (what computed the K/V: "dense", "msa b128 k16 ..."),
//     320 u64 hash of [256, 320)
//     384 char[64] base file name, 448 u64 base tokens p, 456 u64 kv_hash of the base's first p
//     token ids (i32), 464 u64 hash of [384, 464): all zero for a whole file; set for a delta file,
//     which holds the context's tokens and pages from position p on and takes positions [0, p)
//     from the base (a whole file in the same folder; KvFileContents::base)
//     all other bytes up to 512 are zero
//     128, 192: two commit slots of 64 bytes: u64 seq, u64 committed end, u64 n_tokens, 4 x u64 0,
//               u64 hash of the slot's first 56 bytes. The valid slot with the higher seq is current.
//   [512, committed end)  records, each a 64-byte header + payload padded to 64:
//     header: u32 'SLKR', u32 kind, u64 payload bytes, u64 payload hash, u64 a, u64 b, 3 x u64 0,
//             u64 hash of the header's first 56 bytes
//     kind 1, page:   a = layer, b = block; payload = the KvCache page (page bytes): K/V of every
//                     KV head for positions [b*B, (b+1)*B) (kv_cache.h). A later record of the same
//                     page replaces an earlier one (the partial last page is rewritten as it fills).
//     kind 2, commit: a = tokens in the context after it, b = tokens it adds; payload = the added
//                     token ids (i32) then the logits after the last token (n_vocab f32). A delta
//                     file's first commit continues from the base's p tokens; its pages start at
//                     block p / B (that block is the delta's own copy).
//     kind 3, index keys (optional; MSA native mode, attention.h IndexKeys): a = layer, b = first
//                     position p0, header u64 at 40 = dim; payload = the keys of positions
//                     [p0, p0 + count), (count, dim) f32. A layer's keys are usable when its records,
//                     in file order, cover [0, tokens) without a gap (a record may rewrite positions
//                     an earlier one held); the dim must not change within a layer. A delta
//                     file's keys cover [0, tokens) by themselves.
//     kind 4, block summaries (optional; MSA's block index, block_index.h): a = layer, b = first
//                     block b0, header u64 at 40 = S (the index's block size) | F << 32 (floats per
//                     block), u64 at 48 = end; payload = the summaries of blocks [b0, ceil(end / S))
//                     of positions [0, end), F f32 each (BlockIndex::export_block). A layer's are
//                     usable when its records, in file order, each start at or before the end of
//                     the one before (the first at or before a delta's base tokens) and the last
//                     ends at the saved tokens; a record of another S or F starts the layer over.
//                     A delta file's cover its blocks from base tokens / S on; the base's the rest.
//                     F = n_kv_head x head_dim: the blocks' mean keys alone (a save on a device,
//                     DeviceRunner::key_means), which a CPU's index does not take (it builds its
//                     own from the keys) and a lazy restore on a device does (BlockIndex::
//                     summary_means reads the means of either layout).
//   Anything after the committed end is ignored (an interrupted save).
//
// Saving appends pages and a commit record, syncs, then rewrites the older slot and syncs: a kill at
// any point leaves the previous commit readable. A layer without usable block summaries has them
// rebuilt from the keys (reading every key: ~11 GB at a million tokens).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/kvcache/kv_cache.h"

namespace sl {

inline constexpr uint32_t kKvFileVersion = 1;

// What a file was saved with; must match the restoring session.
struct KvFileInfo {
    uint32_t version = kKvFileVersion;
    std::string fingerprint;     // model_fingerprint() of the model (64 hex chars)
    std::string attention;       // Attention::signature() that computed the K/V (<= 64 chars)
    uint32_t n_layer = 0, n_kv_head = 0, head_dim = 0, block_size = 0, n_vocab = 0;
    KvType type = KvType::F16;
    uint64_t page_bytes = 0;
};

// A delta file's base: positions [0, tokens) come from `name` (a file in the same folder, not a
// delta itself) when its first `tokens` token ids hash to `hash` (kv_hash of the i32s).
struct KvFileBase {
    std::string name;
    uint64_t tokens = 0;
    uint64_t hash = 0;
    bool empty() const { return name.empty(); }
};

struct KvFileContents {
    KvFileInfo info;
    KvFileBase base;                // empty: a whole file
    std::vector<int32_t> tokens;    // the saved context (a delta file: its tokens from base.tokens on)
    std::vector<float> logits;      // after its last token (n_vocab); empty when parsed with Headers
    int64_t n_blocks = 0;           // ceil(tokens / block size)
    std::vector<uint64_t> page_offset;  // (n_layer, n_blocks): file offset of each page's payload
    uint64_t committed_end = 0;     // where the next record goes
    uint64_t seq = 0;               // the current slot's seq
    int slot = 0;                   // the current slot (0 or 1)
    // Index keys (kind 3), per layer: dim (0: none), positions [0, index_n) covered, and the
    // records in file order.
    struct IndexKeyRecord {
        uint64_t pos0 = 0, count = 0, offset = 0;  // offset: of the payload in the file
    };
    std::vector<uint32_t> index_dim;
    std::vector<uint64_t> index_n;
    std::vector<std::vector<IndexKeyRecord>> index_records;
    // Block summaries (kind 4), per layer: the index's block size S and floats per block F (0:
    // none), positions [0, summary_n) covered (from the base's whole blocks on, in a delta file),
    // and the records in file order.
    struct SummaryRecord {
        uint64_t block0 = 0, count = 0, offset = 0;  // blocks [block0, block0 + count); payload offset
    };
    std::vector<uint32_t> summary_block, summary_floats;
    std::vector<uint64_t> summary_n;
    std::vector<std::vector<SummaryRecord>> summary_records;
    // Whether layer l's block summaries cover every saved token.
    bool has_summaries(int l) const {
        return l >= 0 && static_cast<size_t>(l) < summary_n.size() && summary_floats[static_cast<size_t>(l)] > 0 &&
               summary_n[static_cast<size_t>(l)] >= n_tokens();
    }
    // Whether layer l's index keys cover every saved token.
    bool has_index_keys(int l) const {
        return l >= 0 && static_cast<size_t>(l) < index_n.size() && index_dim[static_cast<size_t>(l)] > 0 &&
               index_n[static_cast<size_t>(l)] >= n_tokens();
    }
    // Tokens in the whole context (a delta file's base tokens included).
    uint64_t n_tokens() const { return base.tokens + tokens.size(); }
};

// One layer's index keys handed to a save: positions [0, n), (n, dim) floats; null: none.
struct KvIndexKeys {
    const float* data = nullptr;
    int64_t n = 0;
    int dim = 0;
};

// One layer's MSA block summaries handed to a save (BlockIndex's): positions [0, n) in blocks of
// `block_size`, `floats` f32 a block; get(b, out) writes block b's. Saved for a layer whose
// summaries cover every token; none when `get` is empty.
struct KvBlockSummaries {
    int64_t n = 0;
    int block_size = 0;
    int floats = 0;
    std::function<void(int64_t b, float* out)> get;
};

// A page handed to a save: its bytes (KvFileInfo::page_bytes) and their kv_hash.
struct KvPage {
    const uint8_t* bytes = nullptr;
    uint64_t hash = 0;
};

// Where a save takes its pages from: a host KvCache (below), or a device's blocks converted on the
// way (kv_transfer.h KvStorePages: a save on the GPU writes the file without a host copy of the
// context). Asked, on the saving thread, for the pages of blocks [b0, ceil(tokens / B)) in the
// file's order: block after block, every layer of a block (0, 1, ...) before the next block. A
// page stays valid until the next call. Throws sl::Error naming what is missing (DeviceError when
// a device failed).
class KvPageSource {
public:
    virtual ~KvPageSource() = default;
    virtual KvPage page(int layer, int64_t block) = 0;
};

// A host cache's pages (every one written), hashed as they are handed out; under a RAM budget the
// maps' resident pages are dropped every 256 pages. Throws sl::Error naming `path` when the cache
// holds fewer positions than `tokens` or another layout than `info`'s, or a page was never written.
class KvCachePages final : public KvPageSource {
public:
    KvCachePages(const KvFileInfo& info, const KvCache& kv, std::span<const int32_t> tokens, const std::string& path);
    KvPage page(int layer, int64_t block) override;

private:
    const KvCache& kv_;
    std::string path_;
    int64_t handed_ = 0;
};

enum class KvVerify {
    Full,      // every payload's hash
    Deferred,  // every payload's hash but the pages': a restore attaches each page with the
               // checksum its record holds (kv_page_checksum; KvCache::attach checks it on the
               // page's first use), so that only the pages read are ever hashed
    Headers,   // record headers and the last commit only (finding where to append)
};

// Parses a saved-context file. Throws FormatError starting with `name` and saying what is wrong
// (truncated, bad magic, wrong version, checksum mismatch, absurd counts, missing pages). Full:
// the pages', index keys' and block summaries' hashes are checked last, once everything else is,
// on `threads` threads (0: the machine's cores, one per 64 MiB of payload at most): at a million
// tokens a file holds ~23 GB. Their first mismatch in file order is the one reported, however many
// threads (a commit record's payload is checked as it is read, before them). Deferred: the same
// but the pages' (~1/20 of Full's bytes with MSA's summaries). Full and Deferred fill `logits`.
KvFileContents parse_kv_file(std::span<const uint8_t> bytes, const std::string& name, KvVerify verify, int threads = 0);

// Whether page (layer, block) of the file's bytes parsed as `c` (with Headers: its payloads not
// checked) matches the checksum its record holds; false when the file has no such page. For a
// few pages of a file not verified whole.
bool kv_page_intact(std::span<const uint8_t> bytes, const KvFileContents& c, int layer, int64_t block);

// The checksum page (layer, block)'s record holds (what its bytes must hash to); 0 when the file
// has no such page.
uint64_t kv_page_checksum(std::span<const uint8_t> bytes, const KvFileContents& c, int layer, int64_t block);

// Layer l's saved index keys, (tokens, dim) floats, from the file's bytes parsed as `c`; empty
// unless c.has_index_keys(l).
std::vector<float> read_index_keys(std::span<const uint8_t> bytes, const KvFileContents& c, int l);

// Layer l's saved block summaries of blocks [from, ceil(tokens / S)) (or [from, to) when to >= 0
// is less), F floats each (kind 4's layout), from the file's bytes parsed as `c`; empty unless
// c.has_summaries(l), and for a delta file unless from >= its base tokens / S (the blocks before
// are its base's), or when from >= the end. At most the bytes of the records read.
std::vector<float> read_block_summaries(std::span<const uint8_t> bytes, const KvFileContents& c, int l, int64_t from = 0,
                                        int64_t to = -1);

// Writes `kv`'s pages for `tokens` with `logits` as a new file at `path` (via a temp file renamed
// over it: the old file stays intact until the new one is complete). `index_keys`, `summaries`:
// per layer (or empty), saved for the layers whose keys or summaries cover every token. With a
// non-empty `base` (base.tokens < tokens.size(), base.hash of tokens' first base.tokens), a delta
// file: only the pages from block base.tokens / B on, the summaries from block base.tokens / S on
// and the tokens from base.tokens on. Throws IoError.
void write_kv_file(const std::string& path, const KvFileInfo& info, const KvCache& kv, std::span<const int32_t> tokens,
                   std::span<const float> logits, std::span<const KvIndexKeys> index_keys = {},
                   const KvFileBase& base = {}, std::span<const KvBlockSummaries> summaries = {});

// As above with the pages from `pages` (n_layer, block_size and page_bytes as `info` says). Throws
// IoError, or what `pages` throws (nothing is left at `path` but what was there).
void write_kv_file(const std::string& path, const KvFileInfo& info, KvPageSource& pages, std::span<const int32_t> tokens,
                   std::span<const float> logits, std::span<const KvIndexKeys> index_keys = {},
                   const KvFileBase& base = {}, std::span<const KvBlockSummaries> summaries = {});

// The base of the file at `path` (reads its header only); empty for a whole file or one that
// cannot be read.
KvFileBase kv_file_base(const std::string& path);

// kv_hash of the first n token ids (i32), as KvFileBase::hash records them.
uint64_t kv_tokens_hash(std::span<const int32_t> tokens, size_t n);

// Appends to `path`, which holds `saved` (parsed from it; a prefix of `tokens`, a delta file's
// tokens from saved.base.tokens on), the pages from block saved.n_tokens() / B on, the index keys
// of the new positions (of every position for a layer the file had none of), the block summaries
// from block saved.n_tokens() / S on (from the file's first block for a layer it had none of, or
// other ones), and a commit record, then switches the slot. Throws IoError.
void append_kv_file(const std::string& path, const KvFileContents& saved, const KvCache& kv,
                    std::span<const int32_t> tokens, std::span<const float> logits,
                    std::span<const KvIndexKeys> index_keys = {}, std::span<const KvBlockSummaries> summaries = {});

// As above with the pages from `pages` (saved.info's layout). What `pages` throws leaves the file
// as it was (records written past its committed end are ignored).
void append_kv_file(const std::string& path, const KvFileContents& saved, KvPageSource& pages,
                    std::span<const int32_t> tokens, std::span<const float> logits,
                    std::span<const KvIndexKeys> index_keys = {}, std::span<const KvBlockSummaries> summaries = {});

// The 64-bit checksum used by the file (not cryptographic).
uint64_t kv_hash(const void* data, size_t n);

}  // namespace sl
