// Reports (app/common/report*, citation_thumbnails): Markdown, self-contained HTML and PDF of an
// answer with citations to a real PDF page (thumbnail rendered from R-intro.pdf with the region
// outlined), a video segment (its frame thumbnail) and a weak citation. Content is checked: the
// locators, snippets, markers and weak flags are in each format; the HTML's images decode; the
// PDF opens with pdftotext and holds the locators, and pdfimages finds the thumbnails in it.
#include <QBuffer>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <sstream>

#include "core/answer/answer_json.h"
#include "app/common/citation_thumbnails.h"
#include "app/common/report.h"
#include "app/common/report_pdf.h"
#include "core/answer/citations.h"
#include "core/util/error.h"
#include "tests/common/test_support.h"

namespace {

// A 64x36 JPEG, as the video reader keeps for frames.
std::vector<uint8_t> jpeg_frame() {
    QImage img(64, 36, QImage::Format_RGB32);
    img.fill(QColor(30, 90, 160));
    QByteArray b;
    QBuffer buf(&b);
    buf.open(QIODevice::WriteOnly);
    img.save(&buf, "JPEG");
    return {b.begin(), b.end()};
}

sl::app::Report make_report(const std::string& pdf_path) {
    sl::Answer a;
    a.question = "How is a data frame read from a file with a header line?";
    a.text = "Use read.table with header=TRUE. Entropy never decreases. Revenue grew by twelve percent.";
    sl::Citation c1;
    c1.number = 1;
    c1.locator = "R-intro.pdf p. 34";
    c1.path = pdf_path;
    c1.kind = sl::doc::DocumentKind::Pdf;
    c1.ref = {"sha-rintro", 39, sl::doc::BBox{0.1f, 0.2f, 0.9f, 0.4f}, std::nullopt};
    c1.share = 0.6;
    c1.snippet = "HousePrice <- read.table(\"houses.data\", header=TRUE)";
    sl::Citation c2;
    c2.number = 2;
    c2.locator = "Lecture.mp4 00:41:30";
    c2.path = "/data/Lecture.mp4";
    c2.kind = sl::doc::DocumentKind::Video;
    c2.ref = {"sha-lecture", 1, std::nullopt, sl::doc::TimeRange{2492, 2499}};
    c2.share = 0.3;
    c2.snippet = "The second law says entropy never decreases.";
    sl::Citation c3 = c1;
    c3.number = 3;
    c3.locator = "R-intro.pdf p. 49";
    c3.ref.unit = 54;
    c3.snippet = "10.7 Scope";
    c3.share = 0.1;
    a.citations = {c1, c2, c3};
    const auto spans = sl::split_sentences(a.text);
    const bool weak[3] = {false, false, true};
    for (size_t i = 0; i < spans.size(); ++i) {
        sl::Support sup;
        sup.citation = static_cast<int>(i);
        sup.lexical = weak[i] ? 0.0 : 0.8;
        sup.verified = true;
        sup.weak = weak[i];
        a.sentences.push_back({spans[i].first, spans[i].second, {sup}});
    }
    sl::app::Report r;
    r.library = "test library";
    r.chats.push_back({a.question, a, "SmolLM2-135M-Instruct", "MSA top-k 16, effort medium", "2026-12-02T12:00:00Z"});
    return r;
}

sl::doc::Document lecture() {
    sl::doc::Document d;
    d.id = "sha-lecture";
    d.path = "/data/Lecture.mp4";
    d.kind = sl::doc::DocumentKind::Video;
    for (int s = 0; s < 2; ++s) {
        sl::doc::Unit u;
        u.kind = sl::doc::UnitKind::Segment;
        u.index = s;
        u.time = sl::doc::TimeRange{2460.0 + 30 * s, 2490.0 + 30 * s};
        sl::doc::Visual v;
        v.kind = sl::doc::VisualKind::Frame;
        v.timestamp = 2470.0 + 30 * s;
        v.mime = "image/jpeg";
        v.encoded = jpeg_frame();
        u.visuals.push_back(v);
        d.units.push_back(u);
    }
    return d;
}

std::string slurp(const QString& path) {
    std::ifstream f(path.toStdString(), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace

class TstReport : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void markdown();
    void markdownKeepsDocumentTextText();
    void htmlWithThumbnails();
    void pdf();
    void answerJsonRoundTrip();
};

void TstReport::markdown() {
    const auto md = sl::app::report_markdown(make_report("/nowhere/R-intro.pdf"));
    for (const char* want : {"Use read.table with header=TRUE [1].", "Entropy never decreases [2].",
                             "twelve percent [3?].", "1. **R-intro.pdf p. 34**", "2. **Lecture.mp4 00:41:32-00:41:39**",
                             "3. **R-intro.pdf p. 49** ⚠ weak", "header=TRUE)", "WEAK", "SmolLM2-135M-Instruct"})
        QVERIFY2(md.find(want) != std::string::npos, (std::string(want) + "\n---\n" + md).c_str());
    // A video citation is labelled with the cited phrase's start (where the player seeks), not its
    // segment's (the locator's 00:41:30).
    QVERIFY2(md.find("00:41:30") == std::string::npos, md.c_str());
}

// Text from documents and answers never becomes a link, an image or HTML in the Markdown report.
void TstReport::markdownKeepsDocumentTextText() {
    auto r = make_report("/nowhere/R-intro.pdf");
    r.chats[0].question = "What does [click](javascript:alert(1)) do? [1](javascript:x) <b>";
    r.chats[0].answer.citations[0].snippet = "see ![logo](http://evil.example/x.png) and [ref]: javascript:y \\[z](q)";
    const auto md = sl::app::report_markdown(r);
    for (const char* bad : {"[click](", "[1](javascript", "![logo](", "<b>", "[ref]:", "[z](q)"})
        QVERIFY2(md.find(bad) == std::string::npos || md[md.find(bad) - 1] == '\\', (std::string(bad) + "\n---\n" + md).c_str());
    QVERIFY2(md.find("\\[click\\](javascript:alert(1))") != std::string::npos, md.c_str());
    QVERIFY2(md.find("\\\\\\[z\\](q)") != std::string::npos, md.c_str());  // a document's backslash stays a backslash
    QVERIFY2(md.find("Use read.table with header=TRUE [1].") != std::string::npos, md.c_str());  // markers stay readable
}

void TstReport::htmlWithThumbnails() {
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    const auto video = lecture();
    sl::app::CitationThumbnails thumbs(160);
    thumbs.add_document(video);
    const auto r = make_report(pdf.string());
    // The page thumbnail: R-intro's PDF page 40, scaled to 160 px, the region outlined in red.
    const auto t = thumbs(r.chats[0].answer.citations[0]);
    QVERIFY(t.has_value());
    QImage page;
    QVERIFY(page.loadFromData(t->bytes.data(), static_cast<int>(t->bytes.size())));
    QCOMPARE(std::max(page.width(), page.height()), 160);
    const QColor edge = page.pixelColor(static_cast<int>(0.5 * page.width()), static_cast<int>(0.2 * page.height()));
    QVERIFY2(edge.red() > 150 && edge.green() < 120, qPrintable(edge.name()));
    QVERIFY(thumbs(r.chats[0].answer.citations[1]).has_value());  // the frame nearest 00:41:32

    const std::string html = sl::app::report_html(r, thumbs.fn());
    for (const char* want : {"R-intro.pdf p. 34", "Lecture.mp4 00:41:32-00:41:39", "R-intro.pdf p. 49", "href=\"#c1-1\"",
                             "class=\"weak\">[3?]</a>", "HousePrice &lt;- read.table"})
        QVERIFY2(html.find(want) != std::string::npos, want);
    // Three images, each a data: URI that decodes.
    int images = 0;
    for (size_t at = html.find("src=\"data:image/png;base64,"); at != std::string::npos;
         at = html.find("src=\"data:image/png;base64,", at + 1)) {
        const size_t b = at + std::string("src=\"data:image/png;base64,").size();
        const size_t e = html.find('"', b);
        QImage img;
        QVERIFY(img.loadFromData(QByteArray::fromBase64(QByteArray::fromStdString(html.substr(b, e - b)))));
        ++images;
    }
    QCOMPARE(images, 3);
    QVERIFY(html.find("<img src=\"http") == std::string::npos);  // self-contained
}

void TstReport::pdf() {
    REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
    const auto video = lecture();
    sl::app::CitationThumbnails thumbs(160);
    thumbs.add_document(video);
    QTemporaryDir dir;
    const QString out = dir.filePath(QStringLiteral("report.pdf"));
    sl::app::write_report_pdf(make_report(pdf.string()), out.toStdString(), thumbs.fn());
    QVERIFY(slurp(out).rfind("%PDF-", 0) == 0);
    QByteArray text;
    QVERIFY(sl::test::run_process(QStringLiteral("pdftotext"), {QStringLiteral("-layout"), out, QStringLiteral("-")}, &text));
    const std::string s = text.toStdString();
    for (const char* want : {"R-intro.pdf p. 34", "Lecture.mp4 00:41:32", "R-intro.pdf p. 49", "read.table",
                             "How is a data frame read", "[3?]"})
        QVERIFY2(s.find(want) != std::string::npos, (std::string(want) + "\n---\n" + s).c_str());
    QByteArray list;
    QVERIFY(sl::test::run_process(QStringLiteral("pdfimages"), {QStringLiteral("-list"), out}, &list));
    QVERIFY2(list.count('\n') >= 2 + 3, list.constData());  // header lines + 3 images

    QVERIFY_THROWS_EXCEPTION(sl::IoError, sl::app::write_report_pdf(make_report(pdf.string()), "/nonexistent-dir/x.pdf"));
}

void TstReport::answerJsonRoundTrip() {
    sl::Answer a = make_report("/data/R-intro.pdf").chats[0].answer;
    a.sentences[1].supports[0].semantic = 0.61;
    a.citations[1].text = "The second law says entropy never decreases. \"quoted\" \xC3\xA9";
    const std::string j = sl::answer_to_json(a);
    const sl::Answer b = sl::answer_from_json(j);
    QCOMPARE(b.text, a.text);
    QCOMPARE(b.with_markers(), a.with_markers());
    QCOMPARE(b.sources_text(), a.sources_text());
    QCOMPARE(b.citations.size(), a.citations.size());
    QCOMPARE(b.citations[1].text, a.citations[1].text);
    QCOMPARE(b.citations[1].ref.time->t0, 2492.0);
    QCOMPARE(b.citations[0].ref.bbox->y1, 0.4f);
    QVERIFY(!b.citations[1].ref.bbox);
    QCOMPARE(*b.sentences[1].supports[0].semantic, 0.61);
    QVERIFY(!b.sentences[0].supports[0].semantic);
    QCOMPARE(b.sentences[2].supports[0].weak, true);
    // Not an answer, or one whose indices point outside: a clear error naming what was read.
    for (const std::string& bad : {std::string("[1,2]"), std::string("{\"version\":1,\"text\":\"ab\",\"sentences\":[{\"begin\":0,\"end\":9}]}"),
                                  std::string("{\"version\":1,\"text\":\"ab\",\"sentences\":[{\"begin\":0,\"end\":1,\"supports\":[{\"citation\":3}]}]}")}) {
        try {
            sl::answer_from_json(bad, "chat 7");
            QFAIL("accepted a bad answer");
        } catch (const sl::FormatError& e) {
            QVERIFY2(std::string(e.what()).rfind("chat 7: ", 0) == 0, e.what());
        }
    }
}

QTEST_MAIN(TstReport)
#include "tst_report.moc"
