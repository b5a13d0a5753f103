// Sampling: greedy is argmax, seeds reproduce, filters keep what they should, and temperature
// sampling follows the softmax distribution.
#include <QTest>

#include <cmath>
#include <vector>

#include "core/runtime/sampler.h"
#include "tests/common/test_support.h"

class TstSampler : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void greedyIsArgmax();
    void seedReproduces();
    void topKOneIsGreedy();
    void minPDropsTail();
    void repetitionPenaltyDemotes();
    void followsSoftmax();
};

void TstSampler::greedyIsArgmax() {
    auto logits = sl::test::random_floats(1000, -5, 5);
    const auto want = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    sl::SamplingParams p;
    p.greedy = true;
    p.repeat_penalty = 1.0f;
    sl::Sampler s(p);
    QCOMPARE(s.sample(logits.data(), 1000, {}), want);
}

void TstSampler::seedReproduces() {
    const auto logits = sl::test::random_floats(500, -2, 2);
    sl::SamplingParams p;
    p.seed = 1234;
    p.temperature = 1.0f;
    sl::Sampler a(p), b(p);
    for (int i = 0; i < 50; ++i) {
        auto la = logits, lb = logits;
        QCOMPARE(a.sample(la.data(), 500, {}), b.sample(lb.data(), 500, {}));
    }
}

void TstSampler::topKOneIsGreedy() {
    auto logits = sl::test::random_floats(300, -3, 3);
    const auto want = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    sl::SamplingParams p;
    p.top_k = 1;
    p.repeat_penalty = 1.0f;
    p.temperature = 5.0f;
    sl::Sampler s(p);
    for (int i = 0; i < 20; ++i) {
        auto l = logits;
        QCOMPARE(s.sample(l.data(), 300, {}), want);
    }
}

void TstSampler::minPDropsTail() {
    // Two strong tokens and a long tail far below min_p: only the two are ever drawn.
    std::vector<float> logits(100, -10.0f);
    logits[3] = 5.0f;
    logits[7] = 4.5f;
    sl::SamplingParams p;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.1f;
    p.temperature = 1.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 7;
    sl::Sampler s(p);
    for (int i = 0; i < 500; ++i) {
        auto l = logits;
        const int32_t t = s.sample(l.data(), 100, {});
        QVERIFY(t == 3 || t == 7);
    }
}

void TstSampler::repetitionPenaltyDemotes() {
    std::vector<float> logits = {2.0f, 1.9f, 0.0f};
    sl::SamplingParams p;
    p.greedy = true;
    p.repeat_penalty = 1.5f;
    sl::Sampler s(p);
    QCOMPARE(s.sample(logits.data(), 3, {0}), 1);  // 2.0 / 1.5 < 1.9
}

void TstSampler::followsSoftmax() {
    const std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
    sl::SamplingParams p;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temperature = 1.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 99;
    sl::Sampler s(p);
    std::vector<int> counts(4);
    const int draws = 40000;
    for (int i = 0; i < draws; ++i) {
        auto l = logits;
        ++counts[static_cast<size_t>(s.sample(l.data(), 4, {}))];
    }
    double z = 0;
    for (float v : logits) z += std::exp(v);
    for (size_t i = 0; i < 4; ++i) {
        const double want = std::exp(logits[i]) / z;
        const double got = static_cast<double>(counts[i]) / draws;
        QVERIFY2(std::abs(got - want) < 0.015, qPrintable(QStringLiteral("token %1: %2 vs %3").arg(i).arg(got).arg(want)));
    }
}

QTEST_APPLESS_MAIN(TstSampler)
#include "tst_sampler.moc"
