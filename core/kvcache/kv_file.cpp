#include "core/kvcache/kv_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>
#include <vector>

#include "core/util/error.h"

namespace sl {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'K', 'V', 'C', 'A', 'C', 'H'};
constexpr uint32_t kRecordMagic = 0x524b4c53u;  // "SLKR"
constexpr uint32_t kPage = 1, kCommit = 2, kIndexKeys = 3, kSummaries = 4;
constexpr uint64_t kHeaderBytes = 512;
constexpr uint64_t kSlotOffset[2] = {128, 192};
constexpr uint64_t kRecordHeader = 64;
constexpr uint64_t kBaseOffset = 384, kBaseBytes = 80;  // name[64], tokens, hash; then the field's hash at 464

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
inline uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline void store32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline uint64_t pad64(uint64_t n) { return (n + 63) / 64 * 64; }

[[noreturn]] void bad(const std::string& name, const std::string& what) {
    throw FormatError(name + ": not a usable saved context: " + what);
}

struct Fd {
    int fd = -1;
    std::string path;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
    void write_at(const void* data, size_t n, uint64_t off) const {
        const auto* p = static_cast<const uint8_t*>(data);
        size_t done = 0;
        while (done < n) {
            const ssize_t w = ::pwrite(fd, p + done, n - done, static_cast<off_t>(off + done));
            if (w < 0) {
                if (errno == EINTR) continue;
                throw IoError(path + ": cannot write: " + std::strerror(errno));
            }
            done += static_cast<size_t>(w);
        }
    }
    void sync() const {
        if (::fdatasync(fd) != 0) throw IoError(path + ": cannot sync: " + std::strerror(errno));
    }
};

// Buffers records and writes them in large pieces from `off` on.
class RecordWriter {
public:
    RecordWriter(const Fd& fd, uint64_t off) : fd_(fd), off_(off) { buf_.reserve(kFlush + (1 << 20)); }
    // c, d: the header's u64 at 40 and 48 (index keys: the dim; summaries: S | F << 32, end; 0
    // otherwise).
    void record(uint32_t kind, uint64_t a, uint64_t b, std::span<const uint8_t> p1, std::span<const uint8_t> p2 = {},
                uint64_t c = 0, uint64_t d = 0) {
        uint64_t ph;
        if (p2.empty()) {
            ph = kv_hash(p1.data(), p1.size());
        } else {
            tmp_.assign(p1.begin(), p1.end());
            tmp_.insert(tmp_.end(), p2.begin(), p2.end());
            ph = kv_hash(tmp_.data(), tmp_.size());
        }
        hashed(kind, a, b, ph, p1, p2, c, d);
    }
    // As record() with the payload's hash given (`ph`: kv_hash of p1 then p2).
    void hashed(uint32_t kind, uint64_t a, uint64_t b, uint64_t ph, std::span<const uint8_t> p1,
                std::span<const uint8_t> p2 = {}, uint64_t c = 0, uint64_t d = 0) {
        const uint64_t n = p1.size() + p2.size();
        uint8_t h[kRecordHeader] = {};
        store32(h, kRecordMagic);
        store32(h + 4, kind);
        store64(h + 8, n);
        store64(h + 16, ph);
        store64(h + 24, a);
        store64(h + 32, b);
        store64(h + 40, c);
        store64(h + 48, d);
        store64(h + 56, kv_hash(h, 56));
        append(h, kRecordHeader);
        append(p1.data(), p1.size());
        append(p2.data(), p2.size());
        static const uint8_t zeros[64] = {};
        append(zeros, pad64(n) - n);
        if (buf_.size() >= kFlush) flush();
    }
    void flush() {
        if (buf_.empty()) return;
        fd_.write_at(buf_.data(), buf_.size(), off_);
        off_ += buf_.size();
        buf_.clear();
    }
    uint64_t end() const { return off_ + buf_.size(); }

private:
    static constexpr size_t kFlush = 8u << 20;
    void append(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        buf_.insert(buf_.end(), b, b + n);
    }
    const Fd& fd_;
    uint64_t off_;
    std::vector<uint8_t> buf_, tmp_;
};

void write_slot(const Fd& fd, int slot, uint64_t seq, uint64_t end, uint64_t n_tokens) {
    uint8_t s[64] = {};
    store64(s, seq);
    store64(s + 8, end);
    store64(s + 16, n_tokens);
    store64(s + 56, kv_hash(s, 56));
    fd.write_at(s, 64, kSlotOffset[slot]);
}

// Pages [b0, ceil(n / B)) of every layer, the index keys of positions [n0, n) (of [0, n) for a
// layer `saved` holds none of, or none that fit), the block summaries from block n0 / S on (from
// the file's first block for a layer `saved` holds none of, or other ones), then the commit
// record of tokens[n0, n).
void write_records(RecordWriter& w, const KvFileInfo& info, KvPageSource& pages, std::span<const int32_t> tokens, size_t n0,
                   std::span<const float> logits, std::span<const KvIndexKeys> index_keys, const KvFileContents* saved,
                   std::span<const KvBlockSummaries> summaries) {
    const int64_t B = info.block_size;
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t nb = (n + B - 1) / B;
    const int64_t b0 = static_cast<int64_t>(n0) / B;
    const auto n_layer = static_cast<int>(info.n_layer);
    for (int64_t b = b0; b < nb; ++b)
        for (int l = 0; l < n_layer; ++l) {
            const KvPage p = pages.page(l, b);
            w.hashed(kPage, static_cast<uint64_t>(l), static_cast<uint64_t>(b), p.hash, {p.bytes, info.page_bytes});
        }
    for (size_t l = 0; l < index_keys.size() && l < static_cast<size_t>(n_layer); ++l) {
        const KvIndexKeys& ik = index_keys[l];
        if (!ik.data || ik.dim <= 0 || ik.n < n) continue;
        const int il = static_cast<int>(l);
        const bool continues = saved && saved->has_index_keys(il) && saved->index_dim[l] == static_cast<uint32_t>(ik.dim);
        const auto dim = static_cast<uint64_t>(ik.dim);
        // Records of about 4 MiB, so that one never needs a buffer of a whole layer's keys.
        const int64_t per = std::max<int64_t>(1, (int64_t{4} << 20) / static_cast<int64_t>(dim * 4));
        for (int64_t p = continues ? static_cast<int64_t>(n0) : 0; p < n; p += per) {
            const int64_t cnt = std::min(per, n - p);
            const auto* bytes = reinterpret_cast<const uint8_t*>(ik.data + static_cast<uint64_t>(p) * dim);
            w.record(kIndexKeys, l, static_cast<uint64_t>(p), {bytes, static_cast<size_t>(cnt) * dim * 4}, {}, dim);
        }
    }
    // The file's first position: a delta file's base tokens (its summaries start at the block
    // holding them).
    const uint64_t start = saved ? saved->base.tokens : n0;
    std::vector<float> buf;
    for (size_t l = 0; l < summaries.size() && l < static_cast<size_t>(n_layer); ++l) {
        const KvBlockSummaries& s = summaries[l];
        // Shapes the reader takes only (a file it refuses would lose the whole context).
        if (!s.get || s.block_size <= 0 || s.block_size > 65536 || s.floats <= 0 || s.floats > (1 << 24) || s.n < n) continue;
        const auto S = static_cast<uint64_t>(s.block_size), F = static_cast<uint64_t>(s.floats);
        const int il = static_cast<int>(l);
        const bool continues = saved && saved->has_summaries(il) && saved->summary_block[l] == S && saved->summary_floats[l] == F;
        const int64_t sb = static_cast<int64_t>(S);
        const int64_t end_block = (n + sb - 1) / sb;
        // Records of about 4 MiB.
        const int64_t per = std::max<int64_t>(1, (int64_t{4} << 20) / static_cast<int64_t>(F * 4));
        for (int64_t b = static_cast<int64_t>((continues ? n0 : start) / S); b < end_block; b += per) {
            const int64_t cnt = std::min(per, end_block - b);
            buf.resize(static_cast<size_t>(cnt) * F);
            for (int64_t i = 0; i < cnt; ++i) s.get(b + i, buf.data() + static_cast<size_t>(i) * F);
            const auto end = static_cast<uint64_t>(std::min(n, (b + cnt) * sb));
            w.record(kSummaries, l, static_cast<uint64_t>(b), {reinterpret_cast<const uint8_t*>(buf.data()), buf.size() * 4}, {},
                     S | F << 32, end);
        }
    }
    const auto added = tokens.subspan(n0);
    w.record(kCommit, static_cast<uint64_t>(n), added.size(),
             {reinterpret_cast<const uint8_t*>(added.data()), added.size_bytes()},
             {reinterpret_cast<const uint8_t*>(logits.data()), logits.size_bytes()});
    w.flush();
}

// The header's base field (all zero: none). Throws FormatError naming the file when it is damaged.
KvFileBase read_base(const uint8_t* f, const std::string& name) {
    KvFileBase b;
    bool any = false;
    for (uint64_t i = kBaseOffset; i < kBaseOffset + kBaseBytes + 8; ++i) any = any || f[i] != 0;
    if (!any) return b;
    if (kv_hash(f + kBaseOffset, kBaseBytes) != load64(f + kBaseOffset + kBaseBytes))
        bad(name, "header checksum mismatch (base)");
    const char* s = reinterpret_cast<const char*>(f + kBaseOffset);
    const size_t len = strnlen(s, 64);
    if (len == 0 || len == 64) bad(name, "bad base file name");
    for (size_t i = len; i < 64; ++i)
        if (s[i] != 0) bad(name, "bad base file name");
    b.name.assign(s, len);
    if (b.name.find('/') != std::string::npos || b.name == "." || b.name == "..") bad(name, "bad base file name");
    b.tokens = load64(f + kBaseOffset + 64);
    b.hash = load64(f + kBaseOffset + 72);
    if (b.tokens == 0) bad(name, "base of no tokens");
    return b;
}

}  // namespace

uint64_t kv_hash(const void* data, size_t n) {
    // Four independent lanes over 32-byte stripes, then the tail; multiply-rotate mixing.
    constexpr uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull;
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t v[4] = {P1 + P2, P2, 0, 0 - P1};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; ++l) v[l] = rotl(v[l] + load64(p + i + 8 * l) * P2, 31) * P1;
    uint64_t h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18) + static_cast<uint64_t>(n) * P3;
    for (; i + 8 <= n; i += 8) h = rotl(h ^ (rotl(load64(p + i) * P2, 31) * P1), 27) * P1 + P3;
    for (; i < n; ++i) h = rotl(h ^ (p[i] * P3), 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

namespace {

// Hashes the payloads of the records at `records` (file offsets of their headers, already checked:
// u64 payload bytes at 8, its hash at 16), split by bytes over `threads` threads (0: the machine's
// cores, a thread per 64 MiB at most; fewer when no more can be started); the index in `records`
// of the first mismatch in file order, or -1.
int64_t first_mismatch(const uint8_t* f, const std::vector<uint64_t>& records, int threads) {
    auto bytes = [&](size_t i) { return load64(f + records[i] + 8); };
    auto ok = [&](size_t i) { return kv_hash(f + records[i] + kRecordHeader, bytes(i)) == load64(f + records[i] + 16); };
    uint64_t total = 0;
    for (size_t i = 0; i < records.size(); ++i) total += bytes(i);
    const uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
    const uint64_t t = threads > 0 ? std::clamp<uint64_t>(static_cast<uint64_t>(threads), 1, std::max<size_t>(records.size(), 1))
                                   : std::clamp<uint64_t>(total / (uint64_t{64} << 20), 1, cores);
    std::vector<int64_t> found(static_cast<size_t>(t), -1);
    auto run = [&](size_t part, size_t i0, size_t i1) {
        for (size_t i = i0; i < i1; ++i)
            if (!ok(i)) {
                found[part] = static_cast<int64_t>(i);
                return;
            }
    };
    // Contiguous ranges of about equal bytes (total / t per range: no product that overflows).
    std::vector<size_t> cut{0};
    const uint64_t share = std::max<uint64_t>(total / t, 1);
    uint64_t acc = 0;
    for (size_t i = 0; i < records.size() && cut.size() < t; ++i) {
        acc += bytes(i);
        if (acc >= share * cut.size()) cut.push_back(i + 1);
    }
    while (cut.size() <= t) cut.push_back(records.size());
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(t - 1));
    size_t started = 1;  // ranges [1, started) run on their own threads; the rest here
    try {
        for (; started < t; ++started) pool.emplace_back(run, started, cut[started], cut[started + 1]);
    } catch (const std::system_error&) {
        // No more threads: what did not start runs on this one.
    }
    run(0, cut[0], cut[1]);
    for (size_t p = started; p < t; ++p) run(p, cut[p], cut[p + 1]);
    for (auto& th : pool) th.join();
    for (const int64_t i : found)
        if (i >= 0) return i;
    return -1;
}

}  // namespace

KvFileContents parse_kv_file(std::span<const uint8_t> bytes, const std::string& name, KvVerify verify, int threads) {
    const uint8_t* f = bytes.data();
    const uint64_t size = bytes.size();
    if (size < kHeaderBytes) bad(name, "truncated header (" + std::to_string(size) + " bytes)");
    if (std::memcmp(f, kMagic, 8) != 0) bad(name, "bad magic (not a Sightline KV cache file)");
    KvFileContents c;
    KvFileInfo& in = c.info;
    in.version = load32(f + 8);
    if (in.version != kKvFileVersion)
        bad(name, "file version " + std::to_string(in.version) + ", this build reads version " + std::to_string(kKvFileVersion));
    if (kv_hash(f, 112) != load64(f + 112)) bad(name, "header checksum mismatch");
    if (load32(f + 12) != kHeaderBytes) bad(name, "bad header size");
    if (kv_hash(f + 256, 64) != load64(f + 320)) bad(name, "header checksum mismatch (attention signature)");
    for (uint64_t i = 120; i < kHeaderBytes; ++i)
        if ((i < kSlotOffset[0] || (i >= 328 && (i < kBaseOffset || i >= kBaseOffset + kBaseBytes + 8))) && f[i] != 0)
            bad(name, "header padding is not zero");
    c.base = read_base(f, name);
    in.attention.assign(reinterpret_cast<const char*>(f + 256), strnlen(reinterpret_cast<const char*>(f + 256), 64));
    in.n_layer = load32(f + 16);
    in.n_kv_head = load32(f + 20);
    in.head_dim = load32(f + 24);
    in.block_size = load32(f + 28);
    const uint32_t type = load32(f + 32);
    in.n_vocab = load32(f + 36);
    in.page_bytes = load64(f + 40);
    in.fingerprint.assign(reinterpret_cast<const char*>(f + 48), 64);
    if (in.n_layer < 1 || in.n_layer > 4096 || in.n_kv_head < 1 || in.n_kv_head > 1024 || in.head_dim < 1 ||
        in.head_dim > 4096 || in.block_size < 1 || in.block_size > 65536 || type > 2 || in.n_vocab < 1 ||
        in.n_vocab > (1u << 24))
        bad(name, "absurd cache settings in the header");
    in.type = static_cast<KvType>(type);
    if (in.page_bytes != KvCache::page_bytes_for(in.type, static_cast<int>(in.block_size), static_cast<int>(in.n_kv_head),
                                                 static_cast<int>(in.head_dim)))
        bad(name, "page size does not match the cache settings");

    // The current commit slot.
    int slot = -1;
    uint64_t seq = 0, end = 0, n_tokens = 0;
    for (int s = 0; s < 2; ++s) {
        const uint8_t* p = f + kSlotOffset[s];
        if (kv_hash(p, 56) != load64(p + 56)) continue;
        const uint64_t sq = load64(p), e = load64(p + 8);
        if (sq == 0 || e < kHeaderBytes || e % 64 != 0) continue;
        if (slot < 0 || sq > seq) {
            slot = s;
            seq = sq;
            end = e;
            n_tokens = load64(p + 16);
        }
    }
    if (slot < 0) bad(name, "no complete save (both commit slots are invalid)");
    if (end > size)
        bad(name, "truncated: the last save ends at byte " + std::to_string(end) + " but the file has " + std::to_string(size));
    const uint64_t B = in.block_size;
    if (n_tokens == 0 || n_tokens > (1ull << 31)) bad(name, "absurd token count " + std::to_string(n_tokens));
    const uint64_t nb = (n_tokens + B - 1) / B;
    const uint64_t p0 = c.base.tokens;  // a delta file: tokens and pages from p0 on
    if (p0 >= n_tokens) bad(name, "base of " + std::to_string(p0) + " tokens, not fewer than the context's " + std::to_string(n_tokens));
    const uint64_t b0 = p0 / B;
    // Every page must be present once: the pages alone must fit in the file.
    if ((nb - b0) * in.n_layer > size / in.page_bytes) bad(name, "token count " + std::to_string(n_tokens) + " needs more pages than the file holds");
    c.n_blocks = static_cast<int64_t>(nb);
    c.page_offset.assign(static_cast<size_t>(nb * in.n_layer), 0);
    c.committed_end = end;
    c.seq = seq;
    c.slot = slot;
    c.tokens.reserve(static_cast<size_t>(n_tokens - p0));
    c.index_dim.assign(in.n_layer, 0);
    c.index_n.assign(in.n_layer, 0);
    c.index_records.assign(in.n_layer, {});
    c.summary_block.assign(in.n_layer, 0);
    c.summary_floats.assign(in.n_layer, 0);
    c.summary_n.assign(in.n_layer, 0);
    c.summary_records.assign(in.n_layer, {});

    std::vector<uint64_t> checks;  // Full: the page and index-key records hashed after the walk, in parallel
    uint64_t pos = kHeaderBytes;
    uint64_t last_commit_payload = 0, last_commit_bytes = 0;
    bool last_is_commit = false;
    while (pos < end) {
        const std::string at = " (record at byte " + std::to_string(pos) + ")";
        if (end - pos < kRecordHeader) bad(name, "truncated record" + at);
        const uint8_t* h = f + pos;
        if (load32(h) != kRecordMagic) bad(name, "bad record magic" + at);
        if (kv_hash(h, 56) != load64(h + 56)) bad(name, "record header checksum mismatch" + at);
        const uint32_t kind = load32(h + 4);
        const uint64_t n = load64(h + 8), hash = load64(h + 16), a = load64(h + 24), b = load64(h + 32);
        if (n > end - pos - kRecordHeader || pad64(n) > end - pos - kRecordHeader) bad(name, "record runs past the save's end" + at);
        const uint8_t* payload = h + kRecordHeader;
        if (kind == kPage) {
            if (n != in.page_bytes) bad(name, "page record of the wrong size" + at);
            if (a >= in.n_layer) bad(name, "page of layer " + std::to_string(a) + " in a model of " + std::to_string(in.n_layer) + at);
            if (b >= nb) bad(name, "page of block " + std::to_string(b) + " beyond the saved tokens" + at);
            if (b < b0) bad(name, "page of block " + std::to_string(b) + ", which the base holds" + at);
            if (verify == KvVerify::Full) checks.push_back(pos);  // Deferred: checked as the pages are first read
            c.page_offset[static_cast<size_t>(a * nb + b)] = pos + kRecordHeader;
            last_is_commit = false;
        } else if (kind == kCommit) {
            if (b > a || a - b != p0 + c.tokens.size() || a > n_tokens) bad(name, "commit record does not continue the previous one" + at);
            if (n != (b + in.n_vocab) * 4) bad(name, "commit record of the wrong size" + at);
            if (verify != KvVerify::Headers && kv_hash(payload, n) != hash) bad(name, "commit checksum mismatch" + at);  // its tokens are read next
            const size_t old = c.tokens.size();
            c.tokens.resize(old + static_cast<size_t>(b));
            std::memcpy(c.tokens.data() + old, payload, static_cast<size_t>(b) * 4);
            last_commit_payload = pos + kRecordHeader;
            last_commit_bytes = n;
            last_is_commit = true;
        } else if (kind == kIndexKeys) {
            const uint64_t dim = load64(h + 40);
            if (a >= in.n_layer) bad(name, "index keys of layer " + std::to_string(a) + " in a model of " + std::to_string(in.n_layer) + at);
            if (dim < 1 || dim > 4096) bad(name, "index keys of absurd dim " + std::to_string(dim) + at);
            if (n == 0 || n % (dim * 4) != 0) bad(name, "index-key record of " + std::to_string(n) + " bytes for keys of dim " + std::to_string(dim) + at);
            const uint64_t count = n / (dim * 4);
            if (b > n_tokens || count > n_tokens - b) bad(name, "index keys of positions beyond the saved tokens" + at);
            if (verify != KvVerify::Headers) checks.push_back(pos);
            uint32_t& d = c.index_dim[static_cast<size_t>(a)];
            if (d != 0 && d != dim) bad(name, "index keys of layer " + std::to_string(a) + " change dim from " + std::to_string(d) + " to " + std::to_string(dim) + at);
            d = static_cast<uint32_t>(dim);
            uint64_t& covered = c.index_n[static_cast<size_t>(a)];
            if (b <= covered) {  // after a gap a record cannot extend the keys from position 0
                covered = std::max(covered, b + count);
                c.index_records[static_cast<size_t>(a)].push_back({b, count, pos + kRecordHeader});
            }
            last_is_commit = false;
        } else if (kind == kSummaries) {
            const uint64_t S = load64(h + 40) & 0xffffffffu, F = load64(h + 40) >> 32, e = load64(h + 48);
            if (a >= in.n_layer) bad(name, "block summaries of layer " + std::to_string(a) + " in a model of " + std::to_string(in.n_layer) + at);
            if (S < 1 || S > 65536 || F < 1 || F > (1u << 24)) bad(name, "block summaries of absurd shape" + at);
            if (e > n_tokens || b >= (e + S - 1) / S) bad(name, "block summaries of positions beyond the saved tokens" + at);
            const uint64_t count = (e + S - 1) / S - b;
            if (n != count * F * 4) bad(name, "block-summary record of " + std::to_string(n) + " bytes for " + std::to_string(count) + " blocks" + at);
            if (verify != KvVerify::Headers) checks.push_back(pos);
            const auto l = static_cast<size_t>(a);
            auto& recs = c.summary_records[l];
            // Another shape starts the layer over; a record continues the layer's summaries when it
            // starts at or before where they end (the first: at or before the base's tokens).
            if (c.summary_block[l] != S || c.summary_floats[l] != F) {
                c.summary_block[l] = static_cast<uint32_t>(S);
                c.summary_floats[l] = static_cast<uint32_t>(F);
                c.summary_n[l] = p0 / S * S;
                recs.clear();
            }
            if (b * S <= c.summary_n[l]) {
                c.summary_n[l] = e;
                recs.push_back({b, count, pos + kRecordHeader});
            }
            last_is_commit = false;
        } else {
            bad(name, "unknown record kind " + std::to_string(kind) + at);
        }
        for (uint64_t i = n; i < pad64(n); ++i)
            if (payload[i] != 0) bad(name, "record padding is not zero" + at);
        pos += kRecordHeader + pad64(n);
    }
    if (!last_is_commit) bad(name, "the last save does not end with a commit record");
    if (p0 + c.tokens.size() != n_tokens) bad(name, "commit records hold " + std::to_string(p0 + c.tokens.size()) + " tokens, the slot says " + std::to_string(n_tokens));
    if (verify == KvVerify::Headers &&
        kv_hash(f + last_commit_payload, last_commit_bytes) != load64(f + last_commit_payload - kRecordHeader + 16))
        bad(name, "commit checksum mismatch");
    for (uint64_t l = 0; l < in.n_layer; ++l)
        for (uint64_t b = b0; b < nb; ++b)
            if (c.page_offset[static_cast<size_t>(l * nb + b)] == 0)
                bad(name, "missing page of layer " + std::to_string(l) + ", block " + std::to_string(b));
    // -1 is LlamaModel::kEmbeddingToken: an image-patch position (its row came from a vision tower).
    for (const int32_t t : c.tokens)
        if (t < -1 || (t >= 0 && static_cast<uint32_t>(t) >= in.n_vocab))
            bad(name, "token id " + std::to_string(t) + " outside the vocabulary");
    // Last, once everything cheap has been checked: the payloads' hashes (gigabytes).
    if (const int64_t i = verify != KvVerify::Headers ? first_mismatch(f, checks, threads) : -1; i >= 0) {
        const uint8_t* h = f + checks[static_cast<size_t>(i)];
        const std::string at = " (record at byte " + std::to_string(checks[static_cast<size_t>(i)]) + ")";
        if (load32(h + 4) == kPage)
            bad(name, "page checksum mismatch (layer " + std::to_string(load64(h + 24)) + ", block " + std::to_string(load64(h + 32)) + ")" + at);
        if (load32(h + 4) == kSummaries)
            bad(name, "block-summary checksum mismatch (layer " + std::to_string(load64(h + 24)) + ")" + at);
        bad(name, "index-key checksum mismatch (layer " + std::to_string(load64(h + 24)) + ")" + at);
    }
    if (verify != KvVerify::Headers) {
        c.logits.resize(in.n_vocab);
        std::memcpy(c.logits.data(), f + last_commit_payload + (last_commit_bytes - in.n_vocab * 4ull), in.n_vocab * 4ull);
    }
    return c;
}

bool kv_page_intact(std::span<const uint8_t> bytes, const KvFileContents& c, int layer, int64_t block) {
    if (layer < 0 || static_cast<uint32_t>(layer) >= c.info.n_layer || block < 0 || block >= c.n_blocks) return false;
    const uint64_t off = c.page_offset[static_cast<size_t>(layer * c.n_blocks + block)];
    // parse checked that a page's record lies within the file
    if (off < kRecordHeader || off + c.info.page_bytes > bytes.size()) return false;
    return kv_hash(bytes.data() + off, c.info.page_bytes) == load64(bytes.data() + off - kRecordHeader + 16);
}

uint64_t kv_page_checksum(std::span<const uint8_t> bytes, const KvFileContents& c, int layer, int64_t block) {
    if (layer < 0 || static_cast<uint32_t>(layer) >= c.info.n_layer || block < 0 || block >= c.n_blocks) return 0;
    const uint64_t off = c.page_offset[static_cast<size_t>(layer * c.n_blocks + block)];
    if (off < kRecordHeader || off > bytes.size()) return 0;
    return load64(bytes.data() + off - kRecordHeader + 16);
}

std::vector<float> read_index_keys(std::span<const uint8_t> bytes, const KvFileContents& c, int l) {
    std::vector<float> out;
    if (!c.has_index_keys(l)) return out;
    const auto dim = static_cast<uint64_t>(c.index_dim[static_cast<size_t>(l)]);
    const uint64_t n = c.n_tokens();
    out.resize(static_cast<size_t>(n * dim));
    for (const auto& r : c.index_records[static_cast<size_t>(l)]) {  // parse: pos0 + count <= n
        if (r.offset + r.count * dim * 4 > bytes.size()) throw FormatError("saved context: index keys past the end of the file");
        std::memcpy(out.data() + r.pos0 * dim, bytes.data() + r.offset, static_cast<size_t>(r.count * dim * 4));
    }
    return out;
}

std::vector<float> read_block_summaries(std::span<const uint8_t> bytes, const KvFileContents& c, int l, int64_t from, int64_t to) {
    std::vector<float> out;
    if (!c.has_summaries(l) || from < 0) return out;
    const auto li = static_cast<size_t>(l);
    const uint64_t S = c.summary_block[li], F = c.summary_floats[li];
    uint64_t nb = (c.n_tokens() + S - 1) / S;
    if (to >= 0) nb = std::min(nb, static_cast<uint64_t>(to));
    const uint64_t b0 = static_cast<uint64_t>(from);
    if (b0 >= nb || b0 < c.base.tokens / S) return out;  // a delta file holds none of its base's blocks
    out.resize(static_cast<size_t>((nb - b0) * F));
    for (const auto& r : c.summary_records[li]) {  // parse: block0 + count <= nb
        const uint64_t lo = std::max(r.block0, b0), hi = std::min(r.block0 + r.count, nb);
        if (lo >= hi) continue;
        const uint64_t off = r.offset + (lo - r.block0) * F * 4;
        if (off + (hi - lo) * F * 4 > bytes.size()) throw FormatError("saved context: block summaries past the end of the file");
        std::memcpy(out.data() + (lo - b0) * F, bytes.data() + off, static_cast<size_t>((hi - lo) * F * 4));
    }
    return out;
}

namespace {

void check_writable(const KvFileInfo& info, std::span<const int32_t> tokens, std::span<const float> logits, const std::string& path) {
    if (tokens.empty()) throw Error(path + ": cannot save an empty context");
    if (logits.size() != info.n_vocab) throw Error(path + ": cannot save: no logits for the last token");
    if (info.n_layer == 0 || info.block_size == 0 || info.page_bytes == 0) throw Error(path + ": cannot save: no page layout");
}

}  // namespace

KvCachePages::KvCachePages(const KvFileInfo& info, const KvCache& kv, std::span<const int32_t> tokens, const std::string& path)
    : kv_(kv), path_(path) {
    if (static_cast<int64_t>(tokens.size()) > kv.n_past())
        throw Error(path + ": cannot save: the cache holds fewer positions than the context has tokens");
    if (info.page_bytes != kv.page_bytes() || info.n_layer != static_cast<uint32_t>(kv.n_layer()) ||
        info.block_size != static_cast<uint32_t>(kv.block_size()))
        throw Error(path + ": cannot save: file settings differ from the cache's");
}

KvPage KvCachePages::page(int l, int64_t b) {
    const uint8_t* p = kv_.page(l, b);
    if (!p) throw Error(path_ + ": cannot save: layer " + std::to_string(l) + " block " + std::to_string(b) + " was never written");
    const KvPage out{p, kv_hash(p, kv_.page_bytes())};
    if (kv_.options().budget_bytes > 0 && ++handed_ % 256 == 0) kv_.release_maps();  // keep RSS bounded
    return out;
}

void write_kv_file(const std::string& path, const KvFileInfo& info, const KvCache& kv, std::span<const int32_t> tokens,
                   std::span<const float> logits, std::span<const KvIndexKeys> index_keys, const KvFileBase& base,
                   std::span<const KvBlockSummaries> summaries) {
    KvCachePages pages(info, kv, tokens, path);
    write_kv_file(path, info, pages, tokens, logits, index_keys, base, summaries);
}

void write_kv_file(const std::string& path, const KvFileInfo& info, KvPageSource& pages, std::span<const int32_t> tokens,
                   std::span<const float> logits, std::span<const KvIndexKeys> index_keys, const KvFileBase& base,
                   std::span<const KvBlockSummaries> summaries) {
    check_writable(info, tokens, logits, path);
    if (info.fingerprint.size() != 64) throw Error(path + ": cannot save: bad model fingerprint");
    if (!base.empty()) {
        if (base.tokens == 0 || base.tokens >= tokens.size())
            throw Error(path + ": cannot save over a base of " + std::to_string(base.tokens) + " tokens: the context has " +
                        std::to_string(tokens.size()));
        if (base.name.size() > 63 || base.name.find('/') != std::string::npos || base.name == "." || base.name == "..")
            throw Error(path + ": cannot save over base '" + base.name + "': not a file name of at most 63 bytes");
        if (kv_tokens_hash(tokens, base.tokens) != base.hash) throw Error(path + ": the base does not hold this context's first tokens");
    }
    const std::string tmp = path + ".tmp";
    Fd fd;
    fd.path = tmp;
    fd.fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd.fd < 0) throw IoError(tmp + ": cannot create: " + std::strerror(errno));
    // A save that fails (a full disk, an I/O error) leaves no partial .tmp behind.
    struct RemoveUnlessDone {
        const std::string& p;
        bool done = false;
        ~RemoveUnlessDone() {
            if (!done) ::unlink(p.c_str());
        }
    } cleanup{tmp};
    uint8_t h[kHeaderBytes] = {};
    std::memcpy(h, kMagic, 8);
    store32(h + 8, info.version);
    store32(h + 12, kHeaderBytes);
    store32(h + 16, info.n_layer);
    store32(h + 20, info.n_kv_head);
    store32(h + 24, info.head_dim);
    store32(h + 28, info.block_size);
    store32(h + 32, static_cast<uint32_t>(info.type));
    store32(h + 36, info.n_vocab);
    store64(h + 40, info.page_bytes);
    std::memcpy(h + 48, info.fingerprint.data(), 64);
    store64(h + 112, kv_hash(h, 112));
    std::memcpy(h + 256, info.attention.data(), std::min<size_t>(64, info.attention.size()));
    store64(h + 320, kv_hash(h + 256, 64));
    if (!base.empty()) {
        std::memcpy(h + kBaseOffset, base.name.data(), base.name.size());
        store64(h + kBaseOffset + 64, base.tokens);
        store64(h + kBaseOffset + 72, base.hash);
        store64(h + kBaseOffset + kBaseBytes, kv_hash(h + kBaseOffset, kBaseBytes));
    }
    fd.write_at(h, kHeaderBytes, 0);
    RecordWriter w(fd, kHeaderBytes);
    write_records(w, info, pages, tokens, static_cast<size_t>(base.tokens), logits, index_keys, nullptr, summaries);
    write_slot(fd, 0, 1, w.end(), tokens.size());
    fd.sync();
    if (::rename(tmp.c_str(), path.c_str()) != 0)
        throw IoError(path + ": cannot replace with " + tmp + ": " + std::strerror(errno));
    cleanup.done = true;
    // Make the rename durable.
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void append_kv_file(const std::string& path, const KvFileContents& saved, const KvCache& kv,
                    std::span<const int32_t> tokens, std::span<const float> logits,
                    std::span<const KvIndexKeys> index_keys, std::span<const KvBlockSummaries> summaries) {
    KvCachePages pages(saved.info, kv, tokens, path);
    append_kv_file(path, saved, pages, tokens, logits, index_keys, summaries);
}

void append_kv_file(const std::string& path, const KvFileContents& saved, KvPageSource& pages,
                    std::span<const int32_t> tokens, std::span<const float> logits,
                    std::span<const KvIndexKeys> index_keys, std::span<const KvBlockSummaries> summaries) {
    check_writable(saved.info, tokens, logits, path);
    const uint64_t p0 = saved.base.tokens;
    if (saved.n_tokens() > tokens.size() || !std::equal(saved.tokens.begin(), saved.tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(p0)) ||
        (p0 > 0 && kv_tokens_hash(tokens, p0) != saved.base.hash))
        throw Error(path + ": cannot append: the file does not hold a prefix of this context");
    Fd fd;
    fd.path = path;
    fd.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd.fd < 0) throw IoError(path + ": cannot open for appending: " + std::strerror(errno));
    RecordWriter w(fd, saved.committed_end);
    write_records(w, saved.info, pages, tokens, static_cast<size_t>(saved.n_tokens()), logits, index_keys, &saved, summaries);
    if (::ftruncate(fd.fd, static_cast<off_t>(w.end())) != 0) throw IoError(path + ": cannot truncate: " + std::strerror(errno));
    fd.sync();
    write_slot(fd, 1 - saved.slot, saved.seq + 1, w.end(), tokens.size());
    fd.sync();
}

uint64_t kv_tokens_hash(std::span<const int32_t> tokens, size_t n) {
    n = std::min(n, tokens.size());
    return kv_hash(tokens.data(), n * sizeof(int32_t));
}

KvFileBase kv_file_base(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    uint8_t h[kHeaderBytes];
    const ssize_t got = ::pread(fd, h, kHeaderBytes, 0);
    ::close(fd);
    if (got != static_cast<ssize_t>(kHeaderBytes) || std::memcmp(h, kMagic, 8) != 0) return {};
    try {
        return read_base(h, path);
    } catch (const FormatError&) {
        return {};
    }
}

}  // namespace sl
