// BM25 ranking: the passage about the query's rare words wins; stop words and case don't matter.
#include <QTest>

#include "core/context/lexical_rank.h"

class TstLexicalRank : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void wordsFoldCaseAndDropStopWords();
    void rareWordsDecide();
    void noOverlapNoHit();
};

void TstLexicalRank::wordsFoldCaseAndDropStopWords() {
    const auto w = sl::LexicalIndex::words("The Quick, brown FOX-42 of the forest!");
    QCOMPARE(w, (std::vector<std::string>{"quick", "brown", "fox", "42", "forest"}));
}

void TstLexicalRank::rareWordsDecide() {
    const std::vector<std::string> passages = {
        "R is a language and environment for statistical computing and graphics.",
        "The lm function fits linear models; regression and analysis of variance.",
        "Graphics devices: plot, lines, points and legend draw on the current device.",
        "Packages are installed with install.packages and loaded with library.",
    };
    sl::LexicalIndex idx(passages);
    auto hits = idx.rank("How do I fit a linear regression model?", 3);
    QVERIFY(!hits.empty());
    QCOMPARE(hits[0].passage, size_t{1});
    hits = idx.rank("which function loads PACKAGES", 2);
    QCOMPARE(hits[0].passage, size_t{3});
    QVERIFY(hits.size() <= 2);
}

void TstLexicalRank::noOverlapNoHit() {
    sl::LexicalIndex idx({"alpha beta", "gamma delta"});
    QVERIFY(idx.rank("epsilon", 5).empty());
    QVERIFY(idx.rank("the of and", 5).empty());
}

QTEST_APPLESS_MAIN(TstLexicalRank)
#include "tst_lexical_rank.moc"
