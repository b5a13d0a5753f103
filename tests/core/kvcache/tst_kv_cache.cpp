// The paged KV cache: storage types against f32 (rows and attention outputs by normalized error),
// f32 pages exactly equal to what was written, spans across pages, the RAM budget with spilling
// (same attention outputs as without a budget), and byte-size parsing.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"
#include "tests/common/test_support.h"

namespace {

sl::KvCacheOptions kvopt(sl::KvType type, int block, int64_t budget = 0) {
    sl::KvCacheOptions o;
    o.type = type;
    o.block_size = block;
    o.budget_bytes = budget;
    return o;
}

// K/V with the structure of real keys: per-block "topics", a few outlier channels, random values.
struct Data {
    int n_layer, n, n_kv, hd;
    std::vector<float> k, v;  // (n_layer, n, n_kv * hd)
    Data(int layers, int positions, int kv_heads, int head_dim)
        : n_layer(layers), n(positions), n_kv(kv_heads), hd(head_dim) {
        const size_t row = static_cast<size_t>(n_kv * hd);
        k.resize(static_cast<size_t>(n_layer) * static_cast<size_t>(n) * row);
        v.resize(k.size());
        std::normal_distribution<float> nd(0.0f, 1.0f);
        auto& g = sl::test::rng();
        std::vector<float> center(row);
        for (int l = 0; l < n_layer; ++l)
            for (int p = 0; p < n; ++p) {
                if (p % 37 == 0)
                    for (auto& x : center) x = nd(g) * 1.5f;
                float* kr = k.data() + (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(p)) * row;
                float* vr = v.data() + (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(p)) * row;
                for (size_t i = 0; i < row; ++i) {
                    kr[i] = center[i] + 0.4f * nd(g) + (i % static_cast<size_t>(hd) == 3 ? 8.0f : 0.0f);
                    vr[i] = nd(g);
                }
            }
    }
    const float* krow(int l, int p) const { return k.data() + (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(p)) * static_cast<size_t>(n_kv * hd); }
    const float* vrow(int l, int p) const { return v.data() + (static_cast<size_t>(l) * static_cast<size_t>(n) + static_cast<size_t>(p)) * static_cast<size_t>(n_kv * hd); }
    void fill(sl::KvCache& kv) const {
        for (int l = 0; l < n_layer; ++l)
            for (int p = 0; p < n; ++p) kv.write(l, p, krow(l, p), vrow(l, p));
        kv.set_n_past(n);
    }
};

// Attention outputs of every layer for `nt` queries at the end of the context.
std::vector<float> attend(sl::Attention& att, const sl::KvCache& kv, int n_head, const std::vector<float>& q, int nt) {
    sl::ThreadPool pool(2);
    std::vector<float> out(q.size()), all;
    for (int l = 0; l < kv.n_layer(); ++l) {
        sl::AttentionCall c;
        c.layer = l;
        c.pos0 = kv.n_past() - nt;
        c.n_tokens = nt;
        c.n_head = n_head;
        c.n_kv_head = kv.n_kv_head();
        c.head_dim = kv.head_dim();
        c.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        c.q = q.data();
        c.out = out.data();
        att.forward(c, kv, pool);
        all.insert(all.end(), out.begin(), out.end());
    }
    return all;
}

}  // namespace

class TstKvCache : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void f32RowsExact();
    void typesAgainstF32_data();
    void typesAgainstF32();
    void spansAcrossPages();
    void writeRowsAsWrite_data();
    void writeRowsAsWrite();
    void budgetSpillsSameOutputs_data();
    void budgetSpillsSameOutputs();
    void byteSizes();
    void badShapesRefused();
    void releaseUnused();
    void reservePages();
    void checksOnFirstUse();
};

void TstKvCache::f32RowsExact() {
    const Data d(2, 301, 3, 20);
    sl::KvCache kv(2, 400, 3, 20, kvopt(sl::KvType::F32, 64));
    d.fill(kv);
    std::vector<float> k(60), v(60);
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < d.n; ++p) {
            kv.read(l, p, k.data(), v.data());
            QVERIFY(std::equal(k.begin(), k.end(), d.krow(l, p)));
            QVERIFY(std::equal(v.begin(), v.end(), d.vrow(l, p)));
        }
    QCOMPARE(kv.bytes(), static_cast<size_t>(2 * 5) * kv.page_bytes());  // ceil(301/64) pages per layer
}

void TstKvCache::typesAgainstF32_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<double>("row_tol");
    QTest::addColumn<double>("att_tol");
    // f16: 11-bit mantissa (~2.4e-4 relative per element; the peaked softmax amplifies the keys'
    // error several times: 2.02e-3 on one seed in many, so 4e-3). int8 with per-row scales: ~1/127
    // of the row's largest element per element; the outlier channel makes that the dominant error.
    QTest::newRow("f16") << static_cast<int>(sl::KvType::F16) << 1e-3 << 4e-3;
    QTest::newRow("int8") << static_cast<int>(sl::KvType::Int8) << 2e-2 << 4e-2;
}

void TstKvCache::typesAgainstF32() {
    QFETCH(int, type);
    QFETCH(double, row_tol);
    QFETCH(double, att_tol);
    const int n_head = 6, n_kv = 2, hd = 32, n = 517, nt = 19;
    const Data d(2, n, n_kv, hd);
    sl::KvCache ref(2, n, n_kv, hd, kvopt(sl::KvType::F32, 128));
    sl::KvCache kv(2, n, n_kv, hd, kvopt(static_cast<sl::KvType>(type), 128));
    d.fill(ref);
    d.fill(kv);
    std::vector<float> a(static_cast<size_t>(n_kv * hd)), b(a.size()), va(a.size()), vb(a.size());
    double worst = 0;
    for (int p = 0; p < n; p += 7) {
        ref.read(1, p, a.data(), va.data());
        kv.read(1, p, b.data(), vb.data());
        worst = std::max({worst, sl::test::normalized_error(b.data(), a.data(), a.size()),
                          sl::test::normalized_error(vb.data(), va.data(), va.size())});
    }
    qInfo("%s rows: worst normalized error %.2e", sl::kv_type_name(kv.type()), worst);
    QVERIFY2(worst < row_tol, qPrintable(QString::number(worst)));

    auto q = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd), -1.0f, 1.0f);
    for (int t = 0; t < nt; ++t)  // queries near real keys: peaked attention
        for (int h = 0; h < n_head; ++h)
            for (int i = 0; i < hd; ++i) q[static_cast<size_t>((t * n_head + h) * hd + i)] += d.krow(0, (t * 31) % n)[(h / 3) * hd + i] * 0.5f;
    sl::DenseAttention da, db;
    const auto want = attend(da, ref, n_head, q, nt);
    const auto got = attend(db, kv, n_head, q, nt);
    const double e = sl::test::normalized_error(got.data(), want.data(), want.size());
    sl::MsaConfig mc;
    mc.block_size = 32;
    mc.top_k = 4;
    sl::MsaAttention ma(mc), mb(mc);
    const auto want_m = attend(ma, ref, n_head, q, nt);
    const auto got_m = attend(mb, kv, n_head, q, nt);
    const double em = sl::test::normalized_error(got_m.data(), want_m.data(), want_m.size());
    qInfo("%s attention vs f32: dense %.2e, MSA %.2e", sl::kv_type_name(kv.type()), e, em);
    QVERIFY2(e < att_tol, qPrintable(QString::number(e)));
    // MSA with top-k 4 may select another block when two scores are within the quantization (int8
    // flips selections on some seeds), so its error against f32 is reported, not asserted. What is
    // asserted: MSA reads the quantized pages exactly as dense does (top-k covering every block).
    sl::MsaConfig all = mc;
    all.top_k = 1 << 20;
    sl::MsaAttention mall(all);
    sl::DenseAttention dq;
    const auto got_all = attend(mall, kv, n_head, q, nt);
    const auto dense_q = attend(dq, kv, n_head, q, nt);
    const double e_all = sl::test::normalized_error(got_all.data(), dense_q.data(), dense_q.size());
    QVERIFY2(e_all < 1e-5, qPrintable(QString::number(e_all)));
}

void TstKvCache::spansAcrossPages() {
    // Pages of 24 positions, MSA blocks of 16 (every other block straddles two pages): the sparse
    // path with k covering everything equals dense, and dense equals the f32 cache with big pages.
    const int n_head = 4, n_kv = 2, hd = 16, n = 200, nt = 9;
    const Data d(1, n, n_kv, hd);
    sl::KvCache small(1, n, n_kv, hd, kvopt(sl::KvType::F16, 24));
    sl::KvCache big(1, n, n_kv, hd, kvopt(sl::KvType::F16, 128));
    d.fill(small);
    d.fill(big);
    std::vector<float> buf(static_cast<size_t>(50 * hd)), buf2(buf.size());
    const float* s1 = small.k_span(0, 1, 17, 50, buf.data());
    const float* s2 = big.k_span(0, 1, 17, 50, buf2.data());
    QVERIFY(std::equal(s1, s1 + 50 * hd, s2));
    const auto q = sl::test::random_floats(static_cast<size_t>(nt * n_head * hd));
    sl::DenseAttention d1, d2;
    const auto a = attend(d1, small, n_head, q, nt);
    const auto b = attend(d2, big, n_head, q, nt);
    QVERIFY2(sl::test::normalized_error(a.data(), b.data(), b.size()) < 1e-6, "page size changed dense attention");
    sl::MsaConfig mc;
    mc.block_size = 16;
    mc.top_k = 100;
    sl::MsaAttention m(mc);
    const auto c = attend(m, small, n_head, q, nt);
    const double e = sl::test::normalized_error(c.data(), b.data(), b.size());
    QVERIFY2(e < 1e-5, qPrintable(QString::number(e)));
}

void TstKvCache::budgetSpillsSameOutputs_data() {
    QTest::addColumn<int>("type");
    QTest::newRow("f32") << static_cast<int>(sl::KvType::F32);
    QTest::newRow("f16") << static_cast<int>(sl::KvType::F16);
    QTest::newRow("int8") << static_cast<int>(sl::KvType::Int8);
}

void TstKvCache::budgetSpillsSameOutputs() {
    // A budget of a few pages: most pages live in the spill file; decode steps written one position
    // at a time give bitwise the same dense and MSA outputs as an unlimited cache.
    QFETCH(int, type);
    const int n_head = 6, n_kv = 2, hd = 32, n = 1100, B = 64;
    const Data d(3, n, n_kv, hd);
    const auto t = static_cast<sl::KvType>(type);
    sl::KvCache all(3, n, n_kv, hd, kvopt(t, B));
    const size_t page = sl::KvCache::page_bytes_for(t, B, n_kv, hd);
    sl::KvCache tight(3, n, n_kv, hd, kvopt(t, B, static_cast<int64_t>(4 * page)));
    sl::MsaConfig mc;
    mc.block_size = 64;
    mc.top_k = 3;
    sl::MsaAttention ma(mc), mb(mc);
    sl::DenseAttention da, db;
    const int prefix = n - 40;
    // Prefill the prefix, then "decode" the rest one position at a time, attending after each.
    for (sl::KvCache* kv : {&all, &tight}) {
        for (int l = 0; l < 3; ++l)
            for (int p = 0; p < prefix; ++p) kv->write(l, p, d.krow(l, p), d.vrow(l, p));
        kv->set_n_past(prefix);
    }
    QVERIFY(tight.ram_bytes() <= static_cast<size_t>(4 * page));
    QVERIFY(tight.pages_spilled() > 0);
    for (int p = prefix; p < n; ++p) {
        const auto q = sl::test::random_floats(static_cast<size_t>(n_head * hd));
        for (sl::KvCache* kv : {&all, &tight}) {
            for (int l = 0; l < 3; ++l) kv->write(l, p, d.krow(l, p), d.vrow(l, p));
            kv->set_n_past(p + 1);
        }
        const auto a = attend(da, all, n_head, q, 1), b = attend(db, tight, n_head, q, 1);
        QVERIFY(a == b);
        const auto c = attend(ma, all, n_head, q, 1), e = attend(mb, tight, n_head, q, 1);
        QVERIFY(c == e);
        QVERIFY(tight.ram_bytes() <= static_cast<size_t>(4 * page));
    }
    qInfo("%s: %lld pages spilled, %lld page reads from the map, RAM %zu bytes of %zu", sl::kv_type_name(t),
          static_cast<long long>(tight.pages_spilled()), static_cast<long long>(tight.mapped_reads()), tight.ram_bytes(),
          all.ram_bytes());
    QVERIFY(tight.mapped_reads() > 0);
}

void TstKvCache::byteSizes() {
    QCOMPARE(sl::parse_byte_size("512M"), int64_t{512} << 20);
    QCOMPARE(sl::parse_byte_size("2G"), int64_t{2} << 30);
    QCOMPARE(sl::parse_byte_size("1.5G"), int64_t{3} << 29);
    QCOMPARE(sl::parse_byte_size("300k"), int64_t{300} << 10);
    QCOMPARE(sl::parse_byte_size("1000"), int64_t{1000});
    QCOMPARE(sl::parse_byte_size("4GiB"), int64_t{4} << 30);
    for (const char* bad : {"", "M", "12Q", "-5M", "1.2.3", "5 MB"})
        QVERIFY_THROWS_EXCEPTION(sl::Error, sl::parse_byte_size(bad));
    QCOMPARE(sl::parse_kv_type("f16"), std::optional<sl::KvType>(sl::KvType::F16));
    QVERIFY(!sl::parse_kv_type("q4"));
}

void TstKvCache::badShapesRefused() {
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::KvCache(0, 10, 1, 8));
    QVERIFY_THROWS_EXCEPTION(sl::Error, sl::KvCache(1, 10, 1, 8, kvopt(sl::KvType::F16, 0)));
    sl::KvCache kv(1, 10, 1, 8);
    std::vector<float> row(8);
    QVERIFY_THROWS_EXCEPTION(sl::Error, kv.write(0, 10, row.data(), row.data()));
    QVERIFY_THROWS_EXCEPTION(sl::Error, kv.write(1, 0, row.data(), row.data()));
    QVERIFY_THROWS_EXCEPTION(sl::Error, kv.k_rows(0, 0, 0, 1, row.data()));  // never written
}

void TstKvCache::writeRowsAsWrite_data() {
    QTest::addColumn<int>("type");
    QTest::newRow("f32") << static_cast<int>(sl::KvType::F32);
    QTest::newRow("f16") << static_cast<int>(sl::KvType::F16);
    QTest::newRow("int8") << static_cast<int>(sl::KvType::Int8);
}

// A head's rows written a run at a time (write_rows) store what position-by-position writes do,
// bit for bit, for runs of odd lengths at odd offsets within a page; runs across a page, of a
// head that is not there or past the context are refused.
void TstKvCache::writeRowsAsWrite() {
    QFETCH(int, type);
    const auto t = static_cast<sl::KvType>(type);
    const int n_kv = 3, hd = 40, n = 211, B = 32;
    const Data d(2, n, n_kv, hd);
    sl::KvCache want(2, n, n_kv, hd, kvopt(t, B));
    d.fill(want);
    sl::KvCache got(2, n, n_kv, hd, kvopt(t, B));
    std::vector<float> k, v;
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < n;) {
            const int run = std::min({1 + (p * 7 + l) % 23, n - p, (p / B + 1) * B - p});
            for (int h = 0; h < n_kv; ++h) {
                k.clear();
                v.clear();
                for (int r = 0; r < run; ++r) {
                    k.insert(k.end(), d.krow(l, p + r) + h * hd, d.krow(l, p + r) + (h + 1) * hd);
                    v.insert(v.end(), d.vrow(l, p + r) + h * hd, d.vrow(l, p + r) + (h + 1) * hd);
                }
                got.write_rows(l, h, p, run, k.data(), v.data());
            }
            p += run;
        }
    got.set_n_past(n);
    for (int l = 0; l < 2; ++l)
        for (int64_t b = 0; b < got.max_pages(); ++b)
            QVERIFY2(std::memcmp(got.page(l, b), want.page(l, b), got.page_bytes()) == 0,
                     qPrintable(QStringLiteral("layer %1 page %2").arg(l).arg(b)));
    QVERIFY_THROWS_EXCEPTION(sl::Error, got.write_rows(0, 0, B - 2, 4, k.data(), v.data()));  // across a page
    QVERIFY_THROWS_EXCEPTION(sl::Error, got.write_rows(0, n_kv, 0, 1, k.data(), v.data()));   // no such head
    QVERIFY_THROWS_EXCEPTION(sl::Error, got.write_rows(0, 0, n - 1, 2, k.data(), v.data()));  // past the context
}

// KvCache::release_unused: a map whose pages were all attached over (or lie past the context)
// is let go, RAM pages past the context are freed; a map a live page still reads stays, and every
// live page reads as attached.
void TstKvCache::releaseUnused() {
    QTemporaryDir dir;
    const int B = 16;
    sl::KvCache kv(2, 160, 2, 8, kvopt(sl::KvType::F32, B));
    const size_t pb = kv.page_bytes();
    auto file = [&](const char* name, uint8_t fill, int pages) {
        const QString path = dir.filePath(QString::fromLatin1(name));
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly)) return std::shared_ptr<const sl::MappedFile>();
        f.write(QByteArray(static_cast<int>(pb) * pages, static_cast<char>(fill)));
        f.close();
        return std::make_shared<const sl::MappedFile>(path.toStdString());
    };
    auto a = file("a", 1, 8), b = file("b", 2, 8), c = file("c", 3, 8);
    QVERIFY(a && b && c);
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < 4; ++p) kv.attach(l, p, a->data() + static_cast<size_t>(l * 4 + p) * pb, a);
    for (int l = 0; l < 2; ++l) kv.attach(l, 5, c->data() + static_cast<size_t>(l) * pb, c);  // past the context below
    std::vector<float> row(16, 0.5f);
    kv.write(1, 6 * B + 2, row.data(), row.data());  // a RAM page past the context below
    QCOMPARE(kv.ram_bytes(), pb);
    kv.set_n_past(4 * B);
    // Pages 1.. of both layers from b: a still backs page 0.
    for (int l = 0; l < 2; ++l)
        for (int p = 1; p < 4; ++p) kv.attach(l, p, b->data() + static_cast<size_t>(l * 4 + p) * pb, b);
    const long a_before = a.use_count();
    kv.release_unused();
    QCOMPARE(a.use_count(), a_before);  // page 0 reads it
    QCOMPARE(c.use_count(), 1L);        // only past the context: let go
    QCOMPARE(kv.ram_bytes(), size_t{0});  // and the RAM page past it freed
    QCOMPARE(kv.page(1, 6), static_cast<const uint8_t*>(nullptr));
    for (int l = 0; l < 2; ++l) {
        kv.attach(l, 0, b->data() + static_cast<size_t>(l * 4) * pb, b);
        QCOMPARE(kv.page(l, 5), static_cast<const uint8_t*>(nullptr));
    }
    kv.release_unused();
    QCOMPARE(a.use_count(), 1L);
    QVERIFY(b.use_count() > 1);
    for (int l = 0; l < 2; ++l)
        for (int p = 0; p < 4; ++p) QCOMPARE(kv.page(l, p), b->data() + static_cast<size_t>(l * 4 + p) * pb);
}

// KvCache::reserve: new pages zeroed, mapped ones copied to RAM (the map's bytes kept), RAM pages
// left as they are, on a pool too; refused (false, nothing done) under a budget.
void TstKvCache::reservePages() {
    QTemporaryDir dir;
    const int B = 16;
    for (int threads : {1, 3}) {
        sl::ThreadPool pool(threads);
        sl::KvCache kv(2, 320, 2, 8, kvopt(sl::KvType::F16, B));
        const size_t pb = kv.page_bytes();
        const QString path = dir.filePath(QStringLiteral("m%1").arg(threads));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QByteArray bytes(static_cast<int>(pb), 0);
        for (int i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 1);
        f.write(bytes);
        f.close();
        auto map = std::make_shared<const sl::MappedFile>(path.toStdString());
        // Pages written and freed first, so that new ones are likely to come back dirty.
        std::vector<float> junk(16, -3.0f);
        for (int64_t p = 0; p < 12 * B; ++p) kv.write(1, p, junk.data(), junk.data());
        kv.set_n_past(0);
        kv.release_unused();
        QCOMPARE(kv.ram_bytes(), size_t{0});
        kv.attach(1, 2, map->data(), map);
        std::vector<float> row(16, 0.25f);
        kv.write(1, 3 * B + 1, row.data(), row.data());  // page 3 in RAM already
        const std::vector<uint8_t> page3(kv.page(1, 3), kv.page(1, 3) + pb);
        QVERIFY(kv.reserve(1, 0, 12, &pool));
        QCOMPARE(kv.ram_bytes(), 12 * pb);
        QVERIFY(std::memcmp(kv.page(1, 2), map->data(), pb) == 0);
        QVERIFY(kv.page(1, 2) != map->data());  // a RAM copy
        QVERIFY(std::memcmp(kv.page(1, 3), page3.data(), pb) == 0);
        for (int64_t b : {0, 1, 4, 11}) QVERIFY(std::all_of(kv.page(1, b), kv.page(1, b) + pb, [](uint8_t x) { return x == 0; }));
        QCOMPARE(kv.page(0, 0), static_cast<const uint8_t*>(nullptr));  // another layer untouched
        QVERIFY_THROWS_EXCEPTION(sl::Error, kv.reserve(1, 5, 999, &pool));
    }
    sl::KvCache budgeted(2, 320, 2, 8, kvopt(sl::KvType::F16, B, 4096));
    QVERIFY(!budgeted.reserve(0, 0, 4));
    QCOMPARE(budgeted.ram_bytes(), size_t{0});
}

// KvCache::attach with a checksum: nothing is hashed at attach; each page is checked on its first
// use — a reader (k_rows, on pool threads too), page(), a write into it (copied to RAM), reserve
// — once; a mismatch is recorded as (layer, block) and the bytes served as they are; clear()
// forgets it. Pages attached without one are never checked.
void TstKvCache::checksOnFirstUse() {
    QTemporaryDir dir;
    const int B = 16, hd = 8;
    sl::KvCache kv(2, 160, 2, hd, kvopt(sl::KvType::F16, B));
    const size_t pb = kv.page_bytes();
    // Four pages of random halves (finite values) in a file.
    QByteArray bytes(static_cast<int>(pb) * 4, 0);
    std::mt19937 g(7);
    for (int i = 0; i + 1 < bytes.size(); i += 2) {
        const uint16_t h = static_cast<uint16_t>(0x3000 + g() % 0x1000);
        std::memcpy(bytes.data() + i, &h, 2);
    }
    std::vector<uint64_t> sums;
    for (int p = 0; p < 4; ++p) sums.push_back(sl::kv_hash(bytes.constData() + static_cast<size_t>(p) * pb, pb));
    const QString path = dir.filePath(QStringLiteral("pages"));
    auto mapped = [&](const QByteArray& b) {
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return std::shared_ptr<const sl::MappedFile>();
        f.write(b);
        f.close();
        return std::make_shared<const sl::MappedFile>(path.toStdString());
    };
    auto attach_all = [&](const std::shared_ptr<const sl::MappedFile>& m) {
        for (int l = 0; l < 2; ++l)
            for (int p = 0; p < 2; ++p) kv.attach(l, p, m->data() + static_cast<size_t>(l * 2 + p) * pb, m, sums[static_cast<size_t>(l * 2 + p)]);
        kv.set_n_past(2 * B);
    };
    std::vector<float> scratch(static_cast<size_t>(B) * hd);
    {   // intact: checked once each, on whatever uses it first
        auto m = mapped(bytes);
        QVERIFY(m);
        attach_all(m);
        QCOMPARE(kv.unchecked_pages(), int64_t{4});
        sl::ThreadPool pool(3);
        pool.parallel_for(8, [&](int64_t i0, int64_t i1, int) {
            std::vector<float> s(static_cast<size_t>(B) * hd);
            for (int64_t i = i0; i < i1; ++i) kv.k_rows(0, static_cast<int>(i % 2), (i / 2 % 2) * B, B, s.data());
        });
        QCOMPARE(kv.unchecked_pages(), int64_t{2});  // layer 0 read; layer 1 not
        QVERIFY(kv.page(1, 0));
        QCOMPARE(kv.unchecked_pages(), int64_t{1});
        std::vector<float> row(2 * hd, 0.5f);
        kv.write(1, B + 3, row.data(), row.data());  // copied to RAM: checked first
        QCOMPARE(kv.unchecked_pages(), int64_t{0});
        QVERIFY(!kv.damaged());
    }
    {   // a byte of layer 1's page 0 flipped: found by reserve's copy; the others pass
        QByteArray bad = bytes;
        bad[static_cast<int>(2 * pb + 40)] = static_cast<char>(bad[static_cast<int>(2 * pb + 40)] ^ 0x04);
        kv.clear();
        QVERIFY(!kv.damaged());
        auto m = mapped(bad);
        attach_all(m);
        kv.k_rows(0, 1, 0, B, scratch.data());
        QVERIFY(!kv.damaged());  // layer 0 is intact
        sl::ThreadPool pool(2);
        QVERIFY(kv.reserve(1, 0, 2, &pool));
        QVERIFY(kv.damaged().has_value());
        QCOMPARE(kv.damaged()->first, 1);
        QCOMPARE(kv.damaged()->second, int64_t{0});
        QVERIFY(std::memcmp(kv.page(1, 0), bad.constData() + 2 * pb, pb) == 0);  // served as it is
        kv.clear();
        QVERIFY(!kv.damaged());
        // Attached without a checksum: trusted, never checked.
        for (int p = 0; p < 2; ++p) kv.attach(1, p, m->data() + static_cast<size_t>(2 + p) * pb, m);
        kv.set_n_past(2 * B);
        QCOMPARE(kv.unchecked_pages(), int64_t{0});
        kv.k_rows(1, 0, 0, B, scratch.data());
        QVERIFY(!kv.damaged());
        // And a damaged page found by page() too.
        kv.attach(1, 0, m->data() + 2 * pb, m, sums[2]);
        QVERIFY(kv.page(1, 0));
        QVERIFY(kv.damaged().has_value());
        QCOMPARE(kv.damaged()->first, 1);
        QCOMPARE(kv.damaged()->second, int64_t{0});
    }
}

QTEST_APPLESS_MAIN(TstKvCache)
#include "tst_kv_cache.moc"
