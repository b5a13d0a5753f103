// The default path against llama.cpp: greedy choices on plain prompts. The data
// (tests/reference/llama_cpp/smollm2_greedy.json, written by greedy_margins.py with
// llama-cpp-python 0.3.36) holds, per prompt, its token ids, llama.cpp's 32 greedy tokens and the
// margin of each choice (top-1 minus top-2 log-probability). Our session prefills the prompt and is
// fed llama.cpp's tokens one by one (the decode path generate uses, teacher forced so that one close
// call does not make the rest incomparable). Run with the defaults generate runs with: 8-bit
// activations, f16 KV cache, all cores; and with an f32 cache.
//
// What is asserted: wherever llama.cpp's choice leads by more than 1 nat, ours is the same; where
// it leads by more than 0.1 nat, ours is the same at >= 97.5% of the positions. Not 100% at 0.1:
// llama.cpp's own 8-bit activation rounding moves this 135M model's logits by more than that at
// ~1.5% of positions. The independent numpy reference (tests/reference/model) picks llama.cpp's
// token at 1080 of the 1097 positions past 0.1 nat in f32 (misses up to 0.33 nat) and at 1081 with
// llama.cpp's 8-bit rounding simulated (--act-quant; misses up to 0.50 nat), our f32-activation
// path at 1080, so a rule of 100% there would fail exact arithmetic. Measured: ours 1078 of 1097
// (f16 KV) / 1083 (f32 KV) past 0.1 nat, 854 / 855 of 855 past 0.5 nat, all 1.0 nat ones.
// The same for Gemma 3 270M (gemma3_greedy.json, plain prompts: a base model) when that file is
// committed: llama.cpp is the independent reference for the gemma3 graph.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/model/model_loader.h"
#include "core/runtime/linear.h"
#include "core/runtime/session.h"
#include "core/util/assets.h"
#include "tests/common/test_support.h"

namespace {

constexpr double kMargin = 0.1;     // nat: counted
constexpr double kClear = 1.0;      // nat: must agree
constexpr double kMinShare = 0.975; // of the positions past kMargin

std::vector<int32_t> ints(const QJsonValue& v) {
    std::vector<int32_t> out;
    for (const auto& x : v.toArray()) out.push_back(static_cast<int32_t>(x.toInt()));
    return out;
}

// log p(top) - log p(second) of `logits`.
double margin_of(const float* logits, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; ++i) {
        if (logits[i] > a) b = a, a = logits[i];
        else if (logits[i] > b) b = logits[i];
    }
    return static_cast<double>(a) - static_cast<double>(b);
}

}  // namespace

class TstLlamaCppGreedy : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void cleanup() { sl::set_exact_activations(false); }
    void greedyChoicesMatch_data();
    void greedyChoicesMatch();
};

void TstLlamaCppGreedy::greedyChoicesMatch_data() {
    QTest::addColumn<int>("kv");  // sl::KvType
    QTest::addColumn<QString>("asset");
    QTest::addColumn<QString>("data");
    QTest::addColumn<int>("min_prompts");
    const QString smol = QString::fromLatin1(sl::assets::kDefaultModel), gemma = QString::fromLatin1(sl::assets::kGemma3Model);
    QTest::newRow("default (f16 KV)") << static_cast<int>(sl::KvType::F16) << smol << QStringLiteral("smollm2_greedy.json") << 30;
    QTest::newRow("f32 KV") << static_cast<int>(sl::KvType::F32) << smol << QStringLiteral("smollm2_greedy.json") << 30;
    if (QFile::exists(sl::test::reference_script(QStringLiteral("llama_cpp/gemma3_greedy.json"))))
        QTest::newRow("gemma3 270M (f16 KV)") << static_cast<int>(sl::KvType::F16) << gemma << QStringLiteral("gemma3_greedy.json") << 25;
}

void TstLlamaCppGreedy::greedyChoicesMatch() {
    QFETCH(int, kv);
    QFETCH(QString, asset);
    QFETCH(QString, data);
    QFETCH(int, min_prompts);
    REQUIRE_ASSET(path, asset.toStdString());
    QFile f(sl::test::reference_script(QStringLiteral("llama_cpp/") + data));
    QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(f.fileName()));
    const QJsonObject json = QJsonDocument::fromJson(f.readAll()).object();
    const QJsonArray prompts = json.value(QStringLiteral("prompts")).toArray();
    QVERIFY(prompts.size() >= min_prompts);
    const std::string want_sha = json.value(QStringLiteral("model_sha256")).toString().toStdString();
    QCOMPARE(sl::assets::pinned_sha256(asset.toStdString()), want_sha);  // the data is for this file

    auto m = sl::load_model(path);
    const int nv = m->model->config().n_vocab;
    int checked = 0, agree = 0, close = 0, close_agree = 0, clear = 0, clear_agree = 0;
    QStringList misses;
    for (const auto& pv : prompts) {
        const QJsonObject p = pv.toObject();
        const std::vector<int32_t> ids = ints(p.value(QStringLiteral("ids")));
        const std::vector<int32_t> want = ints(p.value(QStringLiteral("tokens")));
        const QJsonArray margins = p.value(QStringLiteral("margins")).toArray();
        QVERIFY(!ids.empty() && want.size() == static_cast<size_t>(margins.size()));
        sl::SessionOptions so;
        so.n_ctx = static_cast<int>(ids.size() + want.size()) + 1;
        so.kv_type = static_cast<sl::KvType>(kv);
        sl::Session s(*m, so);
        s.prefill(ids);
        for (size_t i = 0; i < want.size(); ++i) {
            const float* l = s.last_logits().data();
            const int32_t ours = static_cast<int32_t>(std::max_element(l, l + nv) - l);
            const double lead = margins[static_cast<int>(i)].toDouble();
            if (lead > kClear) {
                ++clear;
                if (ours == want[i]) ++clear_agree;
            }
            if (lead > kMargin) {
                ++checked;
                if (ours == want[i]) ++agree;
                else
                    misses << QStringLiteral("%1 @%2: llama.cpp %3 by %4 nat, ours %5 (our margin %6)")
                                  .arg(p.value(QStringLiteral("prompt")).toString().left(40)).arg(i).arg(want[i])
                                  .arg(lead, 0, 'f', 3).arg(ours).arg(margin_of(l, nv), 0, 'f', 3);
            } else {
                ++close;
                if (ours == want[i]) ++close_agree;
            }
            const int32_t one[1] = {want[i]};
            s.prefill(one);
        }
    }
    qInfo("%d positions where llama.cpp leads by > %.1f nat: ours agrees at %d (%.1f%%); by > %.1f nat: %d of %d; "
          "%d closer calls, %d agree",
          checked, kMargin, agree, 100.0 * agree / std::max(checked, 1), kClear, clear_agree, clear, close, close_agree);
    for (const QString& miss : misses) qInfo("miss: %s", qPrintable(miss));
    QVERIFY(checked >= min_prompts * 20);
    QCOMPARE(clear_agree, clear);
    QVERIFY2(agree >= kMinShare * checked, qPrintable(QStringLiteral("%1 of %2").arg(agree).arg(checked)));
}

QTEST_GUILESS_MAIN(TstLlamaCppGreedy)
#include "tst_llama_cpp_greedy.moc"
