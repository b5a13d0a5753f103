// Dense causal GQA attention against a double-precision reference, prefill and decode, with and
// without a sliding window (Gemma 3's local layers).
#include <QTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/attention/dense_attention.h"
#include "core/kvcache/kv_cache.h"
#include "tests/core/attention/host_kv.h"
#include "core/runtime/thread_pool.h"
#include "tests/common/test_support.h"

class TstDenseAttention : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void matchesReference_data();
    void matchesReference();
};

void TstDenseAttention::matchesReference_data() {
    QTest::addColumn<int>("n_head");
    QTest::addColumn<int>("n_kv");
    QTest::addColumn<int>("hd");
    QTest::addColumn<int>("pos0");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("block");  // KV cache page size
    QTest::addColumn<int>("window");  // 0: all keys; else the latest `window` positions
    // Prefill of >= 16 rows (tokens x group) takes the tiled path (items of 32 tokens, pages
    // transposed); fewer, and decode, the token-by-token one.
    QTest::newRow("smollm prefill") << 9 << 3 << 64 << 0 << 37 << 128 << 0;
    QTest::newRow("smollm decode") << 9 << 3 << 64 << 101 << 1 << 128 << 0;
    QTest::newRow("chunk after past") << 4 << 2 << 24 << 13 << 5 << 128 << 0;
    QTest::newRow("mha odd dim") << 3 << 3 << 17 << 0 << 11 << 128 << 0;
    QTest::newRow("long decode, split keys") << 9 << 3 << 64 << 1500 << 1 << 128 << 0;
    QTest::newRow("long decode, m3 shape") << 64 << 4 << 128 << 777 << 1 << 128 << 0;
    QTest::newRow("tiled, pages of 16, odd start") << 9 << 3 << 64 << 301 << 150 << 16 << 0;
    QTest::newRow("tiled, m3 shape, 2 tokens") << 64 << 4 << 128 << 50 << 2 << 128 << 0;
    QTest::newRow("tiled, dim 40 (avx2 tiles)") << 8 << 2 << 40 << 70 << 33 << 32 << 0;
    QTest::newRow("tiled, odd dim (scalar tiles)") << 3 << 3 << 17 << 5 << 20 << 8 << 0;
    QTest::newRow("tiled, pages of 100") << 9 << 3 << 64 << 0 << 257 << 100 << 0;
    QTest::newRow("window, prefill") << 4 << 1 << 64 << 0 << 40 << 16 << 8;
    QTest::newRow("window, chunk after past") << 9 << 3 << 64 << 300 << 37 << 128 << 100;
    QTest::newRow("window, decode") << 4 << 1 << 64 << 200 << 1 << 128 << 64;
    QTest::newRow("window, long decode, split keys") << 4 << 1 << 64 << 2000 << 1 << 128 << 700;
    QTest::newRow("window wider than the context") << 4 << 2 << 32 << 10 << 7 << 16 << 512;
}

void TstDenseAttention::matchesReference() {
    QFETCH(int, n_head);
    QFETCH(int, n_kv);
    QFETCH(int, hd);
    QFETCH(int, pos0);
    QFETCH(int, n_tokens);
    QFETCH(int, block);
    QFETCH(int, window);
    const int n_ctx = pos0 + n_tokens;
    sl::KvCacheOptions o;
    o.block_size = block;
    sl::test::HostKv kv(1, n_ctx, n_kv, hd, o);
    for (int p = 0; p < n_ctx; ++p) {
        auto k = sl::test::random_floats(static_cast<size_t>(n_kv * hd), -2, 2);
        auto v = sl::test::random_floats(static_cast<size_t>(n_kv * hd));
        std::copy(k.begin(), k.end(), kv.k(0, p));
        std::copy(v.begin(), v.end(), kv.v(0, p));
    }
    kv.set_n_past(n_ctx);
    auto q = sl::test::random_floats(static_cast<size_t>(n_tokens * n_head * hd), -2, 2);
    std::vector<float> out(q.size()), ref(q.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (int t = 0; t < n_tokens; ++t) {
        for (int h = 0; h < n_head; ++h) {
            const int g = h / (n_head / n_kv);
            const float* qv = q.data() + (t * n_head + h) * hd;
            const int n_keys = pos0 + t + 1;
            const int first = window > 0 ? std::max(0, n_keys - window) : 0;
            std::vector<double> s(static_cast<size_t>(n_keys));
            double mx = -1e300;
            for (int j = first; j < n_keys; ++j) {
                double d = 0;
                for (int i = 0; i < hd; ++i) d += static_cast<double>(qv[i]) * kv.k(0, j)[g * hd + i];
                s[static_cast<size_t>(j)] = d * scale;
                mx = std::max(mx, s[static_cast<size_t>(j)]);
            }
            double z = 0;
            for (int j = first; j < n_keys; ++j) z += s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - mx);
            for (int i = 0; i < hd; ++i) {
                double acc = 0;
                for (int j = first; j < n_keys; ++j) acc += s[static_cast<size_t>(j)] / z * kv.v(0, j)[g * hd + i];
                ref[static_cast<size_t>((t * n_head + h) * hd + i)] = static_cast<float>(acc);
            }
        }
    }
    sl::ThreadPool pool(2);
    sl::DenseAttention att;
    sl::AttentionCall c;
    c.pos0 = pos0;
    c.n_tokens = n_tokens;
    c.n_head = n_head;
    c.n_kv_head = n_kv;
    c.head_dim = hd;
    c.scale = scale;
    c.window = window;
    c.q = q.data();
    c.out = out.data();
    att.forward(c, kv, pool);
    const double err = sl::test::normalized_error(out.data(), ref.data(), out.size());
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
}

QTEST_APPLESS_MAIN(TstDenseAttention)
#include "tst_dense_attention.moc"
