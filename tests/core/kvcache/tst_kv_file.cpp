// The saved-context file (core/kvcache/kv_file.h) on its own: round trip, append, an interrupted
// append leaves the previous save readable, and hostile files (truncated at every record boundary
// and at random points, flipped bytes, wrong version, absurd counts, garbage, bad index-key
// and block-summary records) are refused with a FormatError naming the file; index keys (MSA
// native) and block summaries (MSA's block index) round trip;
// delta files (a base's name and token hash in the header, pages from the base's last block on)
// round trip, append, and are refused when their base field is damaged.
#include <QtTest>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

sl::KvCacheOptions kvopt(sl::KvType type, int block, int64_t budget = 0) {
    sl::KvCacheOptions o;
    o.type = type;
    o.block_size = block;
    o.budget_bytes = budget;
    return o;
}

constexpr int kLayers = 2, kHeads = 2, kDim = 8, kBlock = 16, kVocab = 50;

std::vector<uint8_t> slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

sl::KvFileInfo info_of(const sl::KvCache& kv) {
    sl::KvFileInfo in;
    in.fingerprint = std::string(64, 'a');
    in.n_layer = kLayers;
    in.n_kv_head = kHeads;
    in.head_dim = kDim;
    in.block_size = kBlock;
    in.n_vocab = kVocab;
    in.type = kv.type();
    in.page_bytes = kv.page_bytes();
    return in;
}

void fill(sl::KvCache& kv, int from, int to) {
    for (int l = 0; l < kLayers; ++l)
        for (int p = from; p < to; ++p) {
            const auto k = sl::test::random_floats(kHeads * kDim), v = sl::test::random_floats(kHeads * kDim);
            kv.write(l, p, k.data(), v.data());
        }
    kv.set_n_past(to);
}

std::vector<int32_t> tokens(int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 7 + 3) % kVocab);
    return t;
}

bool refused(const std::vector<uint8_t>& bytes, QString* why = nullptr) {
    try {
        sl::parse_kv_file(bytes, "hostile.slkv", sl::KvVerify::Full);
    } catch (const sl::FormatError& e) {
        if (why) *why = QString::fromUtf8(e.what());
        return QString::fromUtf8(e.what()).startsWith(QStringLiteral("hostile.slkv: "));
    }
    return false;
}

// File offsets of the records of `kind` in a saved context's bytes, in file order.
std::vector<size_t> records_of_kind(const std::vector<uint8_t>& bytes, uint32_t kind) {
    std::vector<size_t> at;
    for (size_t pos = 512; pos + 64 <= bytes.size();) {
        uint32_t k;
        uint64_t n;
        std::memcpy(&k, bytes.data() + pos + 4, 4);
        std::memcpy(&n, bytes.data() + pos + 8, 8);
        if (k == kind) at.push_back(pos);
        pos += 64 + (n + 63) / 64 * 64;
    }
    return at;
}

// `bytes` with the u64 at `field` of the record header at `rec` set to `v`, the header
// re-checksummed (so that the field itself is judged).
std::vector<uint8_t> with_field(std::vector<uint8_t> bytes, size_t rec, size_t field, uint64_t v) {
    std::memcpy(bytes.data() + rec + field, &v, 8);
    const uint64_t h = sl::kv_hash(bytes.data() + rec, 56);
    std::memcpy(bytes.data() + rec + 56, &h, 8);
    return bytes;
}

}  // namespace

class TstKvFile : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void roundTripAndAppend();
    void interruptedAppendKeepsPrevious();
    void hostileFiles();
    void indexKeys();
    void blockSummaries();
    void deltaFiles();
    void failedSaveLeavesNoTemporary();
    void checksOnThreads();
    void sourceFailureLeavesTheFile();
    void writeFuzzSeeds();

private:
    QTemporaryDir dir_;
};

void TstKvFile::roundTripAndAppend() {
    const std::string path = dir_.filePath(QStringLiteral("ctx.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F16, kBlock));
    fill(kv, 0, 37);
    const auto logits = sl::test::random_floats(kVocab);
    auto t = tokens(37);
    sl::write_kv_file(path, info_of(kv), kv, t, logits);
    const auto first = slurp(path);
    auto c = sl::parse_kv_file(first, path, sl::KvVerify::Full);
    QCOMPARE(c.tokens, t);
    QCOMPARE(c.logits, logits);
    QCOMPARE(c.n_blocks, int64_t{3});
    for (int l = 0; l < kLayers; ++l)
        for (int b = 0; b < 3; ++b)
            QVERIFY(std::memcmp(first.data() + c.page_offset[static_cast<size_t>(l * 3 + b)], kv.page(l, b), kv.page_bytes()) == 0);
    // Append 30 more tokens: the old bytes stay as they were (only the slot changes).
    fill(kv, 37, 67);
    const auto logits2 = sl::test::random_floats(kVocab);
    t = tokens(67);
    sl::append_kv_file(path, sl::parse_kv_file(first, path, sl::KvVerify::Headers), kv, t, logits2);
    const auto second = slurp(path);
    QVERIFY(second.size() > first.size());
    QVERIFY(std::memcmp(first.data() + 256, second.data() + 256, first.size() - 256) == 0);
    QVERIFY(std::memcmp(first.data(), second.data(), 128) == 0);
    c = sl::parse_kv_file(second, path, sl::KvVerify::Full);
    QCOMPARE(c.tokens, t);
    QCOMPARE(c.logits, logits2);
    QCOMPARE(c.n_blocks, int64_t{5});
    for (int l = 0; l < kLayers; ++l)
        for (int b = 0; b < 5; ++b)
            QVERIFY(std::memcmp(second.data() + c.page_offset[static_cast<size_t>(l * 5 + b)], kv.page(l, b), kv.page_bytes()) == 0);
    // A prefix that is not ours is refused by append.
    auto other = t;
    other[3] ^= 1;
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::append_kv_file(path, c, kv, std::vector<int32_t>(other.begin(), other.begin() + 10), logits2));
}

// A save that runs out of room (here: a file size limit, as a full disk would) throws and leaves
// neither the file nor its .tmp behind. Run in a child process, whose limit does not touch the test.
void TstKvFile::failedSaveLeavesNoTemporary() {
    const std::string path = dir_.filePath(QStringLiteral("full.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F32, kBlock));
    fill(kv, 0, 150);
    const auto logits = sl::test::random_floats(kVocab);
    const auto t = tokens(150);
    const pid_t pid = ::fork();
    QVERIFY(pid >= 0);
    if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
        const rlimit lim{4096, 4096};
        ::setrlimit(RLIMIT_FSIZE, &lim);
        int code = 3;
        try {
            sl::write_kv_file(path, info_of(kv), kv, t, logits);
            code = 1;  // it fit: the test is wrong
        } catch (const sl::IoError&) {
            code = 0;
        } catch (...) {
            code = 2;
        }
        ::_exit(code);
    }
    int status = 0;
    QCOMPARE(::waitpid(pid, &status, 0), pid);
    QVERIFY(WIFEXITED(status));
    QCOMPARE(WEXITSTATUS(status), 0);
    QVERIFY(!std::filesystem::exists(path));
    QVERIFY(!std::filesystem::exists(path + ".tmp"));
}

// A page source (a device's blocks: kv_transfer.h KvStorePages) that fails once more than 8 MiB
// of pages went out, after the writer flushed some of them to the file: a new file is not created
// (no temporary left), an append leaves the previous save readable as it was, and the next
// append over it works.
void TstKvFile::sourceFailureLeavesTheFile() {
    class Failing final : public sl::KvPageSource {
    public:
        Failing(const sl::KvCache& kv, int64_t fail_after) : kv_(kv), left_(fail_after) {}
        sl::KvPage page(int l, int64_t b) override {
            if (left_-- == 0) throw sl::DeviceError("simulated device failure");
            const uint8_t* p = kv_.page(l, b);
            return {p, sl::kv_hash(p, kv_.page_bytes())};
        }

    private:
        const sl::KvCache& kv_;
        int64_t left_;
    };
    // Pages of 128 KiB (128 positions x 4 heads x 32 dims, K and V, f32): 8 MiB is 64 pages.
    constexpr int L = 2, H = 4, D = 32, Bk = 128, N = 128 * 100;
    sl::KvCache kv(L, N, H, D, kvopt(sl::KvType::F32, Bk));
    std::vector<float> k(static_cast<size_t>(H * D), 0.5f), v(k.size(), -0.25f);
    for (int l = 0; l < L; ++l)
        for (int p = 0; p < N; ++p) kv.write(l, p, k.data(), v.data());
    kv.set_n_past(N);
    sl::KvFileInfo in;
    in.fingerprint = std::string(64, 'a');
    in.n_layer = L;
    in.n_kv_head = H;
    in.head_dim = D;
    in.block_size = Bk;
    in.n_vocab = kVocab;
    in.type = sl::KvType::F32;
    in.page_bytes = kv.page_bytes();
    QCOMPARE(kv.page_bytes(), size_t{131072});
    std::vector<int32_t> t(static_cast<size_t>(N));
    for (int i = 0; i < N; ++i) t[static_cast<size_t>(i)] = i % kVocab;
    const auto logits = sl::test::random_floats(kVocab);
    const std::string path = dir_.filePath(QStringLiteral("source.slkv")).toStdString();
    {
        Failing pages(kv, 150);
        QVERIFY_THROWS_EXCEPTION(sl::DeviceError, sl::write_kv_file(path, in, pages, t, logits));
        QVERIFY(!std::filesystem::exists(path));
        QVERIFY(!std::filesystem::exists(path + ".tmp"));
    }
    const std::span<const int32_t> first(t.data(), 1000);
    sl::write_kv_file(path, in, kv, first, logits);
    const auto before = slurp(path);
    {
        Failing pages(kv, 150);  // 150 of the 2 x 93 pages to append: 18.75 MiB, flushed twice
        QVERIFY_THROWS_EXCEPTION(sl::DeviceError,
                                 sl::append_kv_file(path, sl::parse_kv_file(before, path, sl::KvVerify::Headers), pages, t, logits));
    }
    const auto after = slurp(path);
    QVERIFY2(after.size() > before.size() + (size_t{8} << 20), qPrintable(QString::number(after.size())));  // records were written
    QVERIFY(std::equal(before.begin(), before.end(), after.begin()));  // past the committed end only
    QCOMPARE(sl::parse_kv_file(after, path, sl::KvVerify::Full).tokens, std::vector<int32_t>(first.begin(), first.end()));
    Failing pages(kv, -1);  // never fails
    sl::append_kv_file(path, sl::parse_kv_file(after, path, sl::KvVerify::Headers), pages, t, logits);
    const auto done = sl::parse_kv_file(slurp(path), path, sl::KvVerify::Full);
    QCOMPARE(done.tokens, t);
    QCOMPARE(done.logits, logits);
}

void TstKvFile::interruptedAppendKeepsPrevious() {
    const std::string path = dir_.filePath(QStringLiteral("crash.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::Int8, kBlock));
    fill(kv, 0, 40);
    const auto logits = sl::test::random_floats(kVocab);
    sl::write_kv_file(path, info_of(kv), kv, tokens(40), logits);
    const auto before = slurp(path);
    fill(kv, 40, 100);
    sl::append_kv_file(path, sl::parse_kv_file(before, path, sl::KvVerify::Headers), kv, tokens(100), sl::test::random_floats(kVocab));
    const auto after = slurp(path);
    // A kill before the slot was switched: the new records are there (whole or cut anywhere), the
    // slots are the old ones. The file reads as the previous save.
    for (size_t cut : {before.size(), before.size() + 64, before.size() + 1000, (before.size() + after.size()) / 2, after.size()}) {
        std::vector<uint8_t> crashed(after.begin(), after.begin() + static_cast<std::ptrdiff_t>(std::min(cut, after.size())));
        std::copy(before.begin() + 128, before.begin() + 256, crashed.begin() + 128);
        const auto c = sl::parse_kv_file(crashed, path, sl::KvVerify::Full);
        QCOMPARE(c.tokens, tokens(40));
        QCOMPARE(c.logits, logits);
    }
    // A kill while the slot itself was written (a torn slot): the other slot is used.
    std::vector<uint8_t> torn = after;
    const auto c_after = sl::parse_kv_file(after, path, sl::KvVerify::Full);
    torn[static_cast<size_t>(128 + 64 * c_after.slot + 9)] ^= 0x40;
    QCOMPARE(sl::parse_kv_file(torn, path, sl::KvVerify::Full).tokens, tokens(40));
}

void TstKvFile::hostileFiles() {
    const std::string path = dir_.filePath(QStringLiteral("good.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F32, kBlock));
    fill(kv, 0, 50);
    sl::write_kv_file(path, info_of(kv), kv, tokens(50), sl::test::random_floats(kVocab));
    const auto good = slurp(path);
    QVERIFY(!refused(good));
    QString why;
    // Truncated anywhere (every 64-byte boundary and a few odd lengths).
    for (size_t n = 0; n < good.size(); n += (n < 1024 ? 1 : 64))
        QVERIFY2(refused(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)), &why), qPrintable(QString::number(n)));
    qInfo("truncated: %s", qPrintable(why));
    // One flipped bit anywhere outside the slots: refused (inside a slot, the other slot is used;
    // the only slot of a fresh file: refused).
    int flips = 0;
    for (size_t i = 0; i < good.size(); i += 1 + sl::test::rng()() % 61) {
        auto bad = good;
        bad[i] ^= static_cast<uint8_t>(1u << (sl::test::rng()() % 8));
        const bool unused_bytes = i >= 192 && i < 256;  // the empty second slot
        if (unused_bytes) continue;
        QVERIFY2(refused(bad, &why), qPrintable(QStringLiteral("flip at %1 accepted").arg(i)));
        ++flips;
    }
    qInfo("%d flipped files refused; e.g. %s", flips, qPrintable(why));
    // Wrong version (with a valid header checksum).
    auto v2 = good;
    v2[8] = 2;
    const uint64_t h = sl::kv_hash(v2.data(), 112);
    std::memcpy(v2.data() + 112, &h, 8);
    QVERIFY(refused(v2, &why));
    QVERIFY2(why.contains(QStringLiteral("version 2")), qPrintable(why));
    // Absurd token count in a valid slot.
    for (uint64_t n : {uint64_t{0}, uint64_t{51}, uint64_t{1} << 40, ~uint64_t{0}}) {
        auto a = good;
        std::memcpy(a.data() + 128 + 16, &n, 8);
        const uint64_t sh = sl::kv_hash(a.data() + 128, 56);
        std::memcpy(a.data() + 128 + 56, &sh, 8);
        QVERIFY2(refused(a, &why), qPrintable(QString::number(n)));
    }
    // Absurd settings in a valid header.
    for (int field : {16, 20, 24, 28, 32, 36}) {
        auto a = good;
        const uint32_t big = 0x7fffffff;
        std::memcpy(a.data() + field, &big, 4);
        const uint64_t hh = sl::kv_hash(a.data(), 112);
        std::memcpy(a.data() + 112, &hh, 8);
        QVERIFY(refused(a, &why));
    }
    // Garbage and other files.
    QVERIFY(refused(std::vector<uint8_t>(4096, 0)));
    QVERIFY(refused(sl::test::random_floats(1000).empty() ? good : std::vector<uint8_t>(good.rbegin(), good.rend())));
}

void TstKvFile::indexKeys() {
    // Per layer index keys: layer 0 of dim 3, layer 1 of dim 5 (any dims: the file does not tie
    // them to the cache's); a layer whose keys miss a token is not saved.
    const std::string path = dir_.filePath(QStringLiteral("keys.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F16, kBlock));
    fill(kv, 0, 37);
    const int dims[kLayers] = {3, 5};
    std::vector<float> keys[kLayers];
    for (int l = 0; l < kLayers; ++l) keys[l] = sl::test::random_floats(static_cast<size_t>(67 * dims[l]));
    auto handed = [&](int n0, int n1) {  // layer 0 holds n0 positions, layer 1 n1
        return std::vector<sl::KvIndexKeys>{{keys[0].data(), n0, dims[0]}, {keys[1].data(), n1, dims[1]}};
    };
    auto expect = [&](const std::vector<uint8_t>& bytes, const sl::KvFileContents& c, int l, bool has) {
        QCOMPARE(c.has_index_keys(l), has);
        const std::vector<float> got = sl::read_index_keys(bytes, c, l);
        if (!has) {
            QVERIFY(got.empty());
            return;
        }
        QCOMPARE(got, std::vector<float>(keys[l].begin(), keys[l].begin() + static_cast<std::ptrdiff_t>(c.tokens.size()) * dims[l]));
    };
    sl::write_kv_file(path, info_of(kv), kv, tokens(37), sl::test::random_floats(kVocab), handed(36, 37));
    const auto first = slurp(path);
    auto c = sl::parse_kv_file(first, path, sl::KvVerify::Full);
    expect(first, c, 0, false);  // 36 of 37 positions: not saved
    expect(first, c, 1, true);
    // Append: layer 1 continues from 37, layer 0 (none in the file) is written from 0.
    fill(kv, 37, 67);
    sl::append_kv_file(path, sl::parse_kv_file(first, path, sl::KvVerify::Headers), kv, tokens(67), sl::test::random_floats(kVocab),
                       handed(67, 67));
    const auto second = slurp(path);
    c = sl::parse_kv_file(second, path, sl::KvVerify::Full);
    expect(second, c, 0, true);
    expect(second, c, 1, true);
    QCOMPARE(c.index_records[1].size(), size_t{2});
    QCOMPARE(c.index_records[1][1].pos0, uint64_t{37});
    // Appending without keys leaves the file's keys short of the tokens: none.
    fill(kv, 67, 70);
    sl::append_kv_file(path, c, kv, tokens(70), sl::test::random_floats(kVocab));
    const auto third = slurp(path);
    c = sl::parse_kv_file(third, path, sl::KvVerify::Full);
    expect(third, c, 0, false);
    expect(third, c, 1, false);

    // Hostile index-key records (headers re-checksummed, so the field itself is judged).
    const auto good = second;
    const std::vector<size_t> at = records_of_kind(good, 3);  // the index-key records
    QCOMPARE(at.size(), size_t{3});  // layer 1 [0, 37), layer 0 [0, 67), layer 1 [37, 67)
    auto patched = [&](size_t rec, size_t field, uint64_t v) { return with_field(good, rec, field, v); };
    QString why;
    const struct {
        size_t rec, field;
        uint64_t value;
        const char* says;
    } cases[] = {
        {at[0], 40, 0, "absurd dim"},
        {at[0], 40, 5000, "absurd dim"},
        {at[0], 40, 7, "bytes for keys of dim"},              // 37 * 5 floats are not rows of 7
        {at[0], 24, kLayers, "index keys of layer"},           // layer out of range
        {at[2], 32, 38, "beyond the saved tokens"},            // [38, 68) of 67 tokens
        {at[2], 24, 0, "change dim"},                          // layer 0's keys (dim 3) then dim 5
    };
    for (const auto& k : cases) {
        QVERIFY2(refused(patched(k.rec, k.field, k.value), &why), k.says);
        QVERIFY2(why.contains(QString::fromLatin1(k.says)), qPrintable(why));
    }
    // Layer 1's first record moved to [1, 38): a gap at 0, so its keys are read but not used.
    const auto gap = sl::parse_kv_file(patched(at[0], 32, 1), "hostile.slkv", sl::KvVerify::Full);
    QVERIFY(!gap.has_index_keys(1));
    QVERIFY(gap.has_index_keys(0));
    auto flipped = good;
    flipped[at[1] + 64 + 5] ^= 0x10;  // a key's bits
    QVERIFY(refused(flipped, &why));
    QVERIFY2(why.contains(QStringLiteral("index-key checksum")), qPrintable(why));
    qInfo("index-key records: e.g. %s", qPrintable(why));
}

// MSA block summaries (kind 4): per layer, blocks of S = 8 positions (not the pages' 16) of F
// floats; saved for a layer whose summaries cover every token; an append continues from the block
// holding the old end (that partial block's summary rewritten), or starts the layer over with
// another F; a delta's start at the block holding its base tokens; hostile records are refused
// naming the file; a gap or a layer left short is read but not usable.
void TstKvFile::blockSummaries() {
    constexpr int S = 8;
    const std::string path = dir_.filePath(QStringLiteral("sums.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F16, kBlock));
    fill(kv, 0, 37);
    // Block b's summary of layer l while the context holds n tokens: a partial block's changes as
    // it fills, so a stale one is told apart.
    auto value = [](int l, int64_t b, int64_t n, int i) {
        return static_cast<float>(l * 1000 + b * 10 + i) + 0.01f * static_cast<float>(std::min<int64_t>(n - b * S, S));
    };
    int F[kLayers] = {5, 7};
    auto handed = [&](int64_t n0, int64_t n1) {  // layer 0 summarizes n0 positions, layer 1 n1
        std::vector<sl::KvBlockSummaries> s(kLayers);
        const int64_t ns[kLayers] = {n0, n1};
        for (int l = 0; l < kLayers; ++l) {
            s[static_cast<size_t>(l)].n = ns[l];
            s[static_cast<size_t>(l)].block_size = S;
            s[static_cast<size_t>(l)].floats = F[l];
            s[static_cast<size_t>(l)].get = [=, f = F[l], n = ns[l]](int64_t b, float* out) {
                for (int i = 0; i < f; ++i) out[i] = value(l, b, n, i);
            };
        }
        return s;
    };
    auto expect = [&](const std::vector<uint8_t>& bytes, const sl::KvFileContents& c, int l, bool has, int64_t from = 0) {
        QCOMPARE(c.has_summaries(l), has);
        const std::vector<float> got = sl::read_block_summaries(bytes, c, l, from);
        if (!has) {
            QVERIFY(got.empty());
            return;
        }
        const auto n = static_cast<int64_t>(c.n_tokens());
        const int64_t nb = (n + S - 1) / S;
        QCOMPARE(static_cast<int64_t>(got.size()), (nb - from) * F[l]);
        for (int64_t b = from; b < nb; ++b)
            for (int i = 0; i < F[l]; ++i)
                QCOMPARE(got[static_cast<size_t>((b - from) * F[l] + i)], value(l, b, n, i));
    };
    sl::write_kv_file(path, info_of(kv), kv, tokens(37), sl::test::random_floats(kVocab), {}, {}, handed(36, 37));
    const auto first = slurp(path);
    auto c = sl::parse_kv_file(first, path, sl::KvVerify::Full);
    expect(first, c, 0, false);  // 36 of 37 positions: not saved
    expect(first, c, 1, true);
    QCOMPARE(c.summary_block[1], uint32_t{S});
    // Append: layer 1 continues from block 37 / 8 = 4 (rewritten: it held 5 of 8 positions), layer
    // 0 (none in the file) is written from block 0.
    fill(kv, 37, 67);
    sl::append_kv_file(path, sl::parse_kv_file(first, path, sl::KvVerify::Headers), kv, tokens(67), sl::test::random_floats(kVocab),
                       {}, handed(67, 67));
    const auto second = slurp(path);
    c = sl::parse_kv_file(second, path, sl::KvVerify::Full);
    expect(second, c, 0, true);
    expect(second, c, 1, true);
    expect(second, c, 1, true, 6);  // from a later block
    QCOMPARE(c.summary_records[1].size(), size_t{2});
    QCOMPARE(c.summary_records[1][1].block0, uint64_t{4});
    // Another layout for layer 1 (F 9): it starts over from block 0.
    fill(kv, 67, 70);
    F[1] = 9;
    sl::append_kv_file(path, c, kv, tokens(70), sl::test::random_floats(kVocab), {}, handed(70, 70));
    const auto third = slurp(path);
    c = sl::parse_kv_file(third, path, sl::KvVerify::Full);
    expect(third, c, 0, true);
    expect(third, c, 1, true);
    QCOMPARE(c.summary_records[1].size(), size_t{1});
    // Appending without summaries leaves them short of the tokens: none.
    fill(kv, 70, 75);
    sl::append_kv_file(path, c, kv, tokens(75), sl::test::random_floats(kVocab));
    c = sl::parse_kv_file(slurp(path), path, sl::KvVerify::Full);
    QVERIFY(!c.has_summaries(0));
    QVERIFY(!c.has_summaries(1));
    F[1] = 7;

    // A delta over a base of 20 tokens: its summaries start at block 20 / 8 = 2.
    const std::string dpath = dir_.filePath(QStringLiteral("sums-delta.slkv")).toStdString();
    const auto t = tokens(50);
    sl::KvFileBase base;
    base.name = "base.slkv";
    base.tokens = 20;
    base.hash = sl::kv_tokens_hash(t, 20);
    sl::write_kv_file(dpath, info_of(kv), kv, t, sl::test::random_floats(kVocab), {}, base, handed(50, 50));
    const auto delta = slurp(dpath);
    c = sl::parse_kv_file(delta, dpath, sl::KvVerify::Full);
    QCOMPARE(c.summary_records[0].front().block0, uint64_t{2});
    expect(delta, c, 0, true, 2);
    expect(delta, c, 1, true, 2);

    // Hostile block-summary records (headers re-checksummed, so the fields themselves are judged).
    const auto good = second;
    const std::vector<size_t> at = records_of_kind(good, 4);  // layer 1 [0, 5), layer 0 [0, 9), layer 1 [4, 9)
    QCOMPARE(at.size(), size_t{3});
    auto patched = [&](const std::vector<uint8_t>& b, size_t rec, size_t field, uint64_t v) { return with_field(b, rec, field, v); };
    QString why;
    const struct {
        size_t rec, field;
        uint64_t value;
        const char* says;
    } cases[] = {
        {at[0], 24, kLayers, "block summaries of layer"},                  // layer out of range
        {at[0], 40, uint64_t{7} << 32, "absurd shape"},                     // S 0
        {at[0], 40, S | (uint64_t{1} << 25) << 32, "absurd shape"},         // F 2^25
        {at[0], 40, S | uint64_t{6} << 32, "bytes for"},                    // 5 blocks of 6 floats
        {at[0], 40, 16 | uint64_t{7} << 32, "bytes for"},                   // blocks of 16: 3 of them
        {at[2], 48, 68, "beyond the saved tokens"},                         // end 68 of 67 tokens
        {at[2], 32, 9, "beyond the saved tokens"},                          // block 9 of [0, 67)
    };
    for (const auto& k : cases) {
        QVERIFY2(refused(patched(good, k.rec, k.field, k.value), &why), k.says);
        QVERIFY2(why.contains(QString::fromLatin1(k.says)), qPrintable(why));
    }
    // Layer 1's first record moved to [1, 6) (end 45): a gap at 0, so neither of its records is used.
    const auto gap = sl::parse_kv_file(patched(patched(good, at[0], 32, 1), at[0], 48, 45), "hostile.slkv", sl::KvVerify::Full);
    QVERIFY(!gap.has_summaries(1));
    QVERIFY(gap.has_summaries(0));
    auto flipped = good;
    flipped[at[1] + 64 + 5] ^= 0x10;  // a summary's bits
    QVERIFY(refused(flipped, &why));
    QVERIFY2(why.contains(QStringLiteral("block-summary checksum mismatch (layer 0)")), qPrintable(why));
    qInfo("block-summary records: e.g. %s", qPrintable(why));
}

void TstKvFile::deltaFiles() {
    const std::string path = dir_.filePath(QStringLiteral("delta.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F16, kBlock));
    fill(kv, 0, 50);
    const auto t = tokens(50);
    sl::KvFileBase base;
    base.name = "base.slkv";
    base.tokens = 20;  // inside block 1: the delta holds blocks 1..3
    base.hash = sl::kv_tokens_hash(t, 20);
    QCOMPARE(base.hash, sl::kv_hash(t.data(), 80));
    sl::KvFileBase bad = base;
    bad.tokens = 50;
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::write_kv_file(path, info_of(kv), kv, t, sl::test::random_floats(kVocab), {}, bad));
    bad = base;
    bad.hash ^= 1;
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::write_kv_file(path, info_of(kv), kv, t, sl::test::random_floats(kVocab), {}, bad));
    bad = base;
    bad.name = "../base.slkv";
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::write_kv_file(path, info_of(kv), kv, t, sl::test::random_floats(kVocab), {}, bad));
    sl::write_kv_file(path, info_of(kv), kv, t, sl::test::random_floats(kVocab), {}, base);
    const auto first = slurp(path);
    auto c = sl::parse_kv_file(first, path, sl::KvVerify::Full);
    QCOMPARE(c.base.name, base.name);
    QCOMPARE(c.base.tokens, uint64_t{20});
    QCOMPARE(c.base.hash, base.hash);
    QCOMPARE(c.n_tokens(), uint64_t{50});
    QCOMPARE(c.tokens, std::vector<int32_t>(t.begin() + 20, t.end()));
    QCOMPARE(c.n_blocks, int64_t{4});
    for (int l = 0; l < kLayers; ++l) {
        QCOMPARE(c.page_offset[static_cast<size_t>(l * 4)], uint64_t{0});  // the base's
        for (int b = 1; b < 4; ++b)
            QVERIFY(std::memcmp(first.data() + c.page_offset[static_cast<size_t>(l * 4 + b)], kv.page(l, b), kv.page_bytes()) == 0);
    }
    QCOMPARE(sl::kv_file_base(path).name, base.name);
    // Appended: still a delta over the same base.
    fill(kv, 50, 70);
    const auto t2 = tokens(70);
    sl::append_kv_file(path, c, kv, t2, sl::test::random_floats(kVocab));
    c = sl::parse_kv_file(slurp(path), path, sl::KvVerify::Full);
    QCOMPARE(c.n_tokens(), uint64_t{70});
    QCOMPARE(c.tokens, std::vector<int32_t>(t2.begin() + 20, t2.end()));
    auto other = t2;
    other[5] ^= 1;  // a context whose base part differs: refused
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::append_kv_file(path, c, kv, other, sl::test::random_floats(kVocab)));
    // A damaged base field: refused naming the file.
    QString why;
    for (size_t at : {size_t{384}, size_t{400}, size_t{448}, size_t{456}, size_t{464}}) {
        auto b = first;
        b[at] ^= 0x10;
        QVERIFY2(refused(b, &why), qPrintable(QString::number(at)));
    }
    qInfo("damaged base field: %s", qPrintable(why));
    // A base of as many tokens as the context, with a valid field checksum: refused.
    auto b = first;
    const uint64_t n = 50;
    std::memcpy(b.data() + 448, &n, 8);
    const uint64_t h = sl::kv_hash(b.data() + 384, 80);
    std::memcpy(b.data() + 464, &h, 8);
    QVERIFY(refused(b, &why));
    qInfo("base too long: %s", qPrintable(why));
}

// A Full parse hashes the payloads on threads: the same contents and the same (first, in file
// order) mismatch whatever the number of threads.
void TstKvFile::checksOnThreads() {
    const std::string path = dir_.filePath(QStringLiteral("threads.slkv")).toStdString();
    sl::KvCache kv(kLayers, 200, kHeads, kDim, kvopt(sl::KvType::F16, kBlock));
    fill(kv, 0, 173);
    sl::write_kv_file(path, info_of(kv), kv, tokens(173), sl::test::random_floats(kVocab));
    auto good = slurp(path);
    const sl::KvFileContents one = sl::parse_kv_file(good, "t.slkv", sl::KvVerify::Full, 1);
    for (int t : {2, 3, 7, 1000, 0}) {
        const sl::KvFileContents c = sl::parse_kv_file(good, "t.slkv", sl::KvVerify::Full, t);
        QCOMPARE(c.page_offset, one.page_offset);
        QCOMPARE(c.tokens, one.tokens);
        QCOMPARE(c.logits, one.logits);
    }
    auto refused_as = [&](const std::vector<uint8_t>& bytes, const QString& what) {
        QString want;
        for (int t : {1, 2, 3, 7, 0}) {
            try {
                sl::parse_kv_file(bytes, "t.slkv", sl::KvVerify::Full, t);
                QFAIL(qPrintable(QStringLiteral("damage accepted with %1 threads").arg(t)));
            } catch (const sl::FormatError& e) {
                const QString why = QString::fromUtf8(e.what());
                QVERIFY2(why.contains(what), qPrintable(why));
                if (want.isEmpty()) want = why;
                QCOMPARE(why, want);
            }
        }
    };
    // The last page alone damaged (in the last thread's range): found whatever the split.
    const size_t early = static_cast<size_t>(one.page_offset[static_cast<size_t>(1 * one.n_blocks + 1)]) + 5;
    const size_t late = static_cast<size_t>(one.page_offset.back()) + 9;
    QVERIFY(early < late);
    auto bad = good;
    bad[late] ^= 0x01;
    refused_as(bad, QStringLiteral("page checksum mismatch (layer %1, block %2)").arg(kLayers - 1).arg(one.n_blocks - 1));
    // Two damaged pages, one early and one late: every split reports the early one.
    bad[early] ^= 0x10;
    refused_as(bad, QStringLiteral("page checksum mismatch (layer 1, block 1)"));
    // Headers only: the damage is not looked at.
    QCOMPARE(sl::parse_kv_file(bad, "t.slkv", sl::KvVerify::Headers, 3).tokens, one.tokens);
    // An index-key record damaged, after every page: found whatever the split.
    {
        const std::vector<float> keys = sl::test::random_floats(static_cast<size_t>(173) * 8);
        std::vector<sl::KvIndexKeys> ik(static_cast<size_t>(kLayers));
        ik.back() = {keys.data(), 173, 8};
        const std::string kp = dir_.filePath(QStringLiteral("threads-keys.slkv")).toStdString();
        sl::write_kv_file(kp, info_of(kv), kv, tokens(173), sl::test::random_floats(kVocab), ik);
        auto kb = slurp(kp);
        const sl::KvFileContents kc = sl::parse_kv_file(kb, "t.slkv", sl::KvVerify::Full, 2);
        QVERIFY(kc.has_index_keys(kLayers - 1));
        kb[kc.index_records[static_cast<size_t>(kLayers - 1)].back().offset + 3] ^= 0x04;
        refused_as(kb, QStringLiteral("index-key checksum mismatch (layer %1)").arg(kLayers - 1));
    }
}

void TstKvFile::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_kvfile: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir> tst_kv_file
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    // Tiny shapes (1-2 layers, 1 head of dim 4, blocks of 4, 8-token vocabulary): files of < 2 KiB.
    auto small = [](sl::KvType t, int layers) {
        sl::KvCache kv(layers, 64, 1, 4, kvopt(t, 4));
        sl::KvFileInfo in;
        in.fingerprint = std::string(64, 'f');
        in.attention = "dense";
        in.n_layer = static_cast<uint32_t>(layers);
        in.n_kv_head = 1;
        in.head_dim = 4;
        in.block_size = 4;
        in.n_vocab = 8;
        in.type = t;
        in.page_bytes = kv.page_bytes();
        return std::make_pair(std::move(in), std::make_unique<sl::KvCache>(layers, 64, 1, 4, kvopt(t, 4)));
    };
    auto fill_small = [](sl::KvCache& kv, int from, int to) {
        for (int l = 0; l < kv.n_layer(); ++l)
            for (int p = from; p < to; ++p) {
                const auto k = sl::test::random_floats(4), v = sl::test::random_floats(4);
                kv.write(l, p, k.data(), v.data());
            }
        kv.set_n_past(to);
    };
    const std::string out = dir.toStdString();
    std::vector<int32_t> t{1, 2, 3, 4, 5, 6, 7, 0, 1, 2};
    {
        auto [in, kv] = small(sl::KvType::F16, 1);
        fill_small(*kv, 0, 6);
        sl::write_kv_file(out + "/f16_one_save.slkv", in, *kv, std::span<const int32_t>(t.data(), 6), sl::test::random_floats(8));
    }
    {
        auto [in, kv] = small(sl::KvType::Int8, 2);
        fill_small(*kv, 0, 5);
        const std::string p = out + "/int8_appended.slkv";
        sl::write_kv_file(p, in, *kv, std::span<const int32_t>(t.data(), 5), sl::test::random_floats(8));
        fill_small(*kv, 5, 10);
        sl::append_kv_file(p, sl::parse_kv_file(slurp(p), p, sl::KvVerify::Headers), *kv, t, sl::test::random_floats(8));
    }
    {
        auto [in, kv] = small(sl::KvType::F16, 2);
        fill_small(*kv, 0, 7);
        const auto k = sl::test::random_floats(7 * 2);
        const std::vector<sl::KvIndexKeys> keys{{}, {k.data(), 7, 2}};
        sl::write_kv_file(out + "/f16_index_keys.slkv", in, *kv, std::span<const int32_t>(t.data(), 7), sl::test::random_floats(8), keys);
    }
    {
        auto [in, kv] = small(sl::KvType::F16, 1);
        fill_small(*kv, 0, 10);
        sl::KvFileBase base{"f16_one_save.slkv", 6, sl::kv_tokens_hash(t, 6)};
        sl::write_kv_file(out + "/f16_delta.slkv", in, *kv, t, sl::test::random_floats(8), {}, base);
    }
    {
        auto [in, kv] = small(sl::KvType::F16, 2);
        fill_small(*kv, 0, 6);
        auto sums = [](int64_t n) {
            const sl::KvBlockSummaries s{n, 2, 3, [](int64_t b, float* o) {
                                             for (int i = 0; i < 3; ++i) o[i] = static_cast<float>(b + i);
                                         }};
            return std::vector<sl::KvBlockSummaries>{s, s};
        };
        const std::string p = out + "/f16_summaries.slkv";
        sl::write_kv_file(p, in, *kv, std::span<const int32_t>(t.data(), 6), sl::test::random_floats(8), {}, {}, sums(6));
        fill_small(*kv, 6, 9);
        sl::append_kv_file(p, sl::parse_kv_file(slurp(p), p, sl::KvVerify::Headers), *kv, std::span<const int32_t>(t.data(), 9),
                           sl::test::random_floats(8), {}, sums(9));
    }
    {
        auto [in, kv] = small(sl::KvType::F32, 1);
        fill_small(*kv, 0, 3);
        sl::write_kv_file(out + "/f32_partial_block.slkv", in, *kv, std::span<const int32_t>(t.data(), 3), sl::test::random_floats(8));
    }
}

QTEST_APPLESS_MAIN(TstKvFile)
#include "tst_kv_file.moc"
