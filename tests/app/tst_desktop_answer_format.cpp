// What the chat shows of a core answer (answer_format.h), without a model: the inline markers sit
// where sl::Answer::with_markers() puts them and are links (weak ones "[n?]", flagged), text that
// merely looks like a marker ("[1] 2.5" printed by R) is not; each source says why it is flagged
// (weak support with its word overlap, or read but cited by no sentence) and which sentences it
// backs with their scores; an answer cut short says why; the streaming state shows its status;
// the plain text and Markdown carry the same.
#include <QTest>
#include <QTextDocument>

#include "app/desktop/answer_format.h"
#include "tests/app/tst_desktop_support.h"

using namespace sl::desktop;
using sl::test::add_sentence;
using sl::test::support;

Q_DECLARE_METATYPE(sl::Answer)

namespace {

sl::Citation citation(int number, const std::string& locator, const std::string& snippet,
                      const std::string& text = {}) {
    sl::Citation c;
    c.number = number;
    c.locator = locator;
    c.snippet = snippet;
    c.text = text;
    c.ref.document = "doc";
    c.ref.unit = number;
    return c;
}

// Three sources: [1] backs two sentences well, [2] backs one weakly, [3] was read but backs none.
sl::Answer three_sources() {
    sl::Answer a;
    a.question = "How do I fit a linear regression?";
    add_sentence(a, "Fit it with lm().", {support(0, 0.62, false, 0.71)});
    add_sentence(a, "The coefficients come from coef().",
                 {support(0, 0.4, false, 0.55), support(1, 0.12, true, 0.21)});
    add_sentence(a, "That is all.");
    a.citations = {
        citation(1, "R-intro.pdf p. 67", "fm1 <- lm(y ~ x, data = dummy)"),
        citation(2, "R-intro.pdf p. 12", "", "   The  help\nsystem is reached with help()."),
        citation(3, "Deck.pptx slide 4", "unrelated words")};
    a.citations[0].share = 0.42;
    a.citations[1].share = 0.003;
    a.stop_reason = "eos";
    return a;
}

ChatAnswer finished(sl::Answer a) {
    ChatAnswer c;
    c.answer = std::move(a);
    c.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
    c.method = "one long context with MSA";
    c.read_summary = "12 units ranked best for the question";
    c.context_tokens = 2048;
    c.finished = true;
    return c;
}

QString plain(const QString& html) {
    QTextDocument d;
    d.setHtml(html);
    return d.toPlainText();
}

}  // namespace

class TstDesktopAnswerFormat : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); }
    void markersMatchCore_data();
    void markersMatchCore();
    void sourcesSayWhy();
    void supportsListSentences();
    void excerpts();
    void stopNotes_data();
    void stopNotes();
    void htmlFinished();
    void htmlStreaming();
    void plainTextAndMarkdown();
};

void TstDesktopAnswerFormat::markersMatchCore_data() {
    QTest::addColumn<sl::Answer>("answer");
    QTest::addColumn<QString>("expected");  // with_markers(), spelled out
    const std::vector<sl::Citation> two = {citation(1, "a.pdf p. 1", "x"),
                                           citation(2, "a.pdf p. 2", "y")};
    {
        sl::Answer a = three_sources();
        QTest::newRow("two sources, one weak")
            << a
            << QStringLiteral(
                   "Fit it with lm() [1]. The coefficients come from coef() [1][2?]. That is all.");
    }
    {
        sl::Answer a;
        add_sentence(a, "He said \"use lm().\"", {support(1, 0.5)});
        add_sentence(a, "Really!", {support(0, 0.5, true)});
        a.citations = two;
        QTest::newRow("closing quote and exclamation")
            << a << QStringLiteral("He said \"use lm() [2].\" Really [1?]!");
    }
    {
        sl::Answer a;
        add_sentence(a, "No punctuation at the end", {support(0, 0.3)});
        a.citations = two;
        QTest::newRow("no punctuation") << a << QStringLiteral("No punctuation at the end [1]");
    }
    {
        sl::Answer a;
        add_sentence(a, "R prints [1] 2.5 for a number.");
        add_sentence(a, "A bad index is skipped.", {support(7, 0.9)});
        a.citations = two;
        QTest::newRow("literal brackets, bad index")
            << a << QStringLiteral("R prints [1] 2.5 for a number. A bad index is skipped.");
    }
    {
        sl::Answer a;
        a.text = "Streaming, no sentences yet";
        QTest::newRow("streaming") << a << QStringLiteral("Streaming, no sentences yet");
    }
}

void TstDesktopAnswerFormat::markersMatchCore() {
    QFETCH(sl::Answer, answer);
    QFETCH(QString, expected);
    QCOMPARE(QString::fromStdString(answer.with_markers()), expected);
    QString joined;
    for (const auto& piece : marked_pieces(answer)) {
        joined += QString::fromStdString(piece.text);
        if (!piece.marks.empty()) joined += QLatin1Char(' ');
        for (const auto& s : piece.marks) joined += marker_text(answer, s);
    }
    QCOMPARE(joined, expected);
    // The transcript reads the same, and only real markers are links.
    const QString html = answer_html(finished(answer), 4, false);
    QVERIFY2(plain(html).contains(expected), qPrintable(plain(html)));
    int links = 0;
    for (const auto& piece : marked_pieces(answer)) links += static_cast<int>(piece.marks.size());
    int found = 0;
    for (qsizetype at = 0; (at = html.indexOf(QStringLiteral("<a href='cite:4:"), at)) >= 0; ++at)
        ++found;
    QCOMPARE(found, links);
}

void TstDesktopAnswerFormat::sourcesSayWhy() {
    const sl::Answer a = three_sources();
    QCOMPARE(citation_note(a, 0), QString());
    QCOMPARE(citation_note(a, 1),
             QStringLiteral("its text backs the sentence poorly (word overlap 12%, meaning 0.21)"));
    QCOMPARE(citation_note(a, 2), QStringLiteral("read, not cited by any sentence"));
    // One good support among weak ones: not weak.
    sl::Answer b = a;
    b.sentences[0].supports.push_back(support(1, 0.5));
    QCOMPARE(citation_note(b, 1), QString());
    // Without a semantic score the reason gives the word overlap alone.
    b = a;
    b.sentences[1].supports[1].semantic.reset();
    QCOMPARE(citation_note(b, 1),
             QStringLiteral("its text backs the sentence poorly (word overlap 12%)"));
}

void TstDesktopAnswerFormat::supportsListSentences() {
    const sl::Answer a = three_sources();
    const QStringList one = citation_supports(a, 0);
    QCOMPARE(one.size(), 2);
    QCOMPARE(one[0],
             QStringLiteral("\u201cFit it with lm().\u201d \u2014 word overlap 62%, meaning 0.71"));
    QCOMPARE(one[1], QStringLiteral("\u201cThe coefficients come from coef().\u201d \u2014 word "
                                    "overlap 40%, meaning 0.55"));
    const QStringList two = citation_supports(a, 1);
    QCOMPARE(two.size(), 1);
    QVERIFY(two[0].endsWith(QStringLiteral("word overlap 12%, meaning 0.21, weak")));
    QVERIFY(citation_supports(a, 2).isEmpty());
}

void TstDesktopAnswerFormat::excerpts() {
    const sl::Answer a = three_sources();
    QCOMPARE(citation_excerpt(a.citations[0]), QStringLiteral("fm1 <- lm(y ~ x, data = dummy)"));
    QCOMPARE(citation_excerpt(a.citations[1]),
             QStringLiteral("The help system is reached with help()."));  // text, one line
    QCOMPARE(citation_excerpt(a.citations[1], 12), QStringLiteral("The help sys\u2026"));
}

void TstDesktopAnswerFormat::stopNotes_data() {
    QTest::addColumn<QString>("reason");
    QTest::addColumn<bool>("cut");
    QTest::addColumn<QString>("note");
    QTest::newRow("eos") << QStringLiteral("eos") << false << QString();
    QTest::newRow("stop string") << QStringLiteral("stop string") << false << QString();
    QTest::newRow("max tokens") << QStringLiteral("max tokens") << true
                                << QStringLiteral("reached its length budget");
    QTest::newRow("repetition") << QStringLiteral("repetition") << true
                                << QStringLiteral("began to repeat itself");
    QTest::newRow("cancelled") << QStringLiteral("cancelled") << false
                               << QStringLiteral("Stopped before the end");
}

void TstDesktopAnswerFormat::stopNotes() {
    QFETCH(QString, reason);
    QFETCH(bool, cut);
    QFETCH(QString, note);
    sl::Answer a = three_sources();
    a.stop_reason = reason.toStdString();
    a.cut = cut;
    const QString got = stop_note(a);
    QCOMPARE(got.isEmpty(), note.isEmpty());
    if (!note.isEmpty()) QVERIFY2(got.contains(note), qPrintable(got));
    const QString text = plain(answer_html(finished(a), 0, false));
    if (!note.isEmpty()) {
        QVERIFY(text.contains(got));
        QVERIFY(answer_plain_text(finished(a)).contains(got));
        QVERIFY(answer_markdown(finished(a)).contains(got));
    }
}

void TstDesktopAnswerFormat::htmlFinished() {
    const ChatAnswer c = finished(three_sources());
    for (bool dark : {false, true}) {
        const QString html = answer_html(c, 0, dark);
        QVERIFY(html.contains(QStringLiteral("href='cite:0:1'")));
        QVERIFY(html.contains(QStringLiteral("href='cite:0:3'")));  // in the sources list
        QVERIFY(html.contains(dark ? QStringLiteral("#6e5a1e")
                                   : QStringLiteral("#fbe7a6")));  // the weak colour
        QVERIFY(html.contains(QStringLiteral(
            "title=\"R-intro.pdf p. 12 \u2014 word overlap 12%, meaning 0.21 (weak)\"")));
        const QString text = plain(html);
        qInfo("%s", qPrintable(text));
        QVERIFY(text.startsWith(QStringLiteral("Q: How do I fit a linear regression?")));
        QVERIFY(text.contains(QStringLiteral(
            "R-intro.pdf p. 67\nfm1 <- lm(y ~ x, data = dummy)\n42% of the attention on documents\n"
            "backs \u201cFit it with lm().\u201d \u2014 word overlap 62%, meaning 0.71\n"
            "backs \u201cThe coefficients come from coef().\u201d \u2014 word overlap 40%, meaning "
            "0.55")));
        QVERIFY(
            text.contains(QStringLiteral("R-intro.pdf p. 12 \u00a0\u26a0 weak: its text backs the "
                                         "sentence poorly (word overlap 12%, meaning 0.21)")) ||
            text.contains(QStringLiteral("R-intro.pdf p. 12  \u26a0 weak: its text backs the "
                                         "sentence poorly (word overlap 12%, meaning 0.21)")));
        QVERIFY(text.contains(QStringLiteral(
            "The help system is reached with help().\n<1% of the attention on documents\n")));
        QVERIFY(text.contains(QStringLiteral(
            "Deck.pptx slide 4 (read, not cited by any sentence)\nunrelated words")));
        QVERIFY(text.contains(QStringLiteral("Read: 12 units ranked best for the question")));
        QVERIFY(
            text.contains(QStringLiteral("SmolLM2-135M-Instruct.Q4_1.gguf \u00b7 one long context "
                                         "with MSA \u00b7 2,048 context tokens")));
        QVERIFY(!text.contains(QStringLiteral("\u2026")));  // finished: no ellipsis
    }
    // A source backing many sentences lists the best three, and how many more.
    sl::Answer many = three_sources();
    for (int k = 0; k < 3; ++k)
        add_sentence(many, "Another sentence.", {support(0, 0.3 - 0.1 * k)});
    QCOMPARE(citation_supports(many, 0).size(), 5);
    const QString listed = plain(answer_html(finished(many), 0, false));
    QCOMPARE(listed.count(QStringLiteral("backs \u201c")), 3 + 1);  // [1]'s three, [2]'s one
    QVERIFY(listed.contains(QStringLiteral("and 2 more sentences")));
    QCOMPARE(listed.count(QStringLiteral("backs \u201cAnother sentence.")),
             1);  // after the two strongest
    QVERIFY(listed.contains(QStringLiteral("backs \u201cFit it with lm().")));
    // An answer no source backs says so; an error says what went wrong.
    ChatAnswer none = finished(sl::Answer{});
    none.answer.text = "Something.";
    QVERIFY(plain(answer_html(none, 0, false))
                .contains(QStringLiteral("No source backs this answer.")));
    none.error = "the model file is damaged";
    QVERIFY(plain(answer_html(none, 0, false))
                .contains(QStringLiteral("Could not answer: the model file is damaged")));
}

void TstDesktopAnswerFormat::htmlStreaming() {
    ChatAnswer c;
    c.answer.question = "What is R?";
    c.answer.text = "R is a langu";
    c.status = "reading the context: 1,024 of 2,048 tokens";
    c.model = "m.gguf";
    c.method = "one long context with MSA";
    const QString text = plain(answer_html(c, 0, false));
    QVERIFY(text.contains(QStringLiteral("A: R is a langu \u2026")));
    QVERIFY(text.contains(QStringLiteral("reading the context: 1,024 of 2,048 tokens")));
    QVERIFY(
        !text.contains(QStringLiteral("one long context")));  // the method line comes at the end
    c.finished = true;
    QVERIFY(!plain(answer_html(c, 0, false)).contains(QStringLiteral("reading the context")));
}

void TstDesktopAnswerFormat::plainTextAndMarkdown() {
    sl::Answer a = three_sources();
    a.citations[1].ref.time = sl::doc::TimeRange{65, 70};
    const ChatAnswer c = finished(a);
    const QString text = answer_plain_text(c);
    qInfo("%s", qPrintable(text));
    QCOMPARE(text, QStringLiteral(
                       "Fit it with lm() [1]. The coefficients come from coef() [1][2?]. That is "
                       "all.\n\nSources:\n"
                       "[1] R-intro.pdf p. 67 \u2014 \u201cfm1 <- lm(y ~ x, data = dummy)\u201d\n"
                       "[2] R-intro.pdf p. 12 at 00:01:05 (weak: its text backs the sentence "
                       "poorly (word overlap 12%, "
                       "meaning 0.21)) \u2014 \u201cThe help system is reached with help().\u201d\n"
                       "[3] Deck.pptx slide 4 (read, not cited by any sentence) \u2014 "
                       "\u201cunrelated words\u201d\n"));
    const QString md = answer_markdown(c);
    qInfo("%s", qPrintable(md));
    QVERIFY(md.startsWith(QStringLiteral(
        "## How do I fit a linear regression?\n\nFit it with lm() [1]. The coefficients")));
    QVERIFY(md.contains(QStringLiteral(
        "1. **R-intro.pdf p. 67** \u2014 fm1 <- lm(y ~ x, data = dummy)\n"
        "   - backs \u201cFit it with lm().\u201d \u2014 word overlap 62%, meaning 0.71\n")));
    QVERIFY(md.contains(QStringLiteral(
        "2. **R-intro.pdf p. 12** (00:01:05\u201300:01:10) \u2014 \u26a0 weak: its text backs")));
    QVERIFY(
        md.contains(QStringLiteral("3. **Deck.pptx slide 4** \u2014 _read, not cited by any "
                                   "sentence_ \u2014 unrelated words\n")));
    QVERIFY(md.contains(QStringLiteral("_Read: 12 units ranked best for the question._")));
    QVERIFY(md.contains(
        QStringLiteral("_one long context with MSA; model SmolLM2-135M-Instruct.Q4_1.gguf._")));
}

QTEST_MAIN(TstDesktopAnswerFormat)
#include "tst_desktop_answer_format.moc"
