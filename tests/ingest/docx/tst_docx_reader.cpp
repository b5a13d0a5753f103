// The DOCX reader on documents generated here (docx_fixture.h): headings by style (name, outline
// level, basedOn, and style ids without styles.xml) as Title blocks that start sections, body text
// with tabs, breaks, deleted text and text-box fallbacks, tables as cells, footnotes as notes,
// page-sized sections when there are no headings, locators, sniffing and reading from a path;
// hostile packages (truncated, not a zip, missing or malformed parts, OLE and encrypted files, a
// zip bomb, deep nesting).
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "core/document/locator.h"
#include "ingest/docx/docx_reader.h"
#include "ingest/ingest_error.h"
#include "ingest/reader.h"
#include "tests/ingest/docx/docx_fixture.h"
#include "tests/ingest/slides/zip_bomb.h"

using namespace sl::test::docx;
using sl::doc::BlockRole;
using sl::ingest::IngestContext;
using sl::ingest::IngestError;
using sl::ingest::IngestErrorKind;
using sl::ingest::IngestOptions;

Q_DECLARE_METATYPE(IngestErrorKind)

class TstDocxReader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void headingsTablesFootnotes();
    void runsAndSkippedText();
    void stylesWithoutStylesPart();
    void longTextSplitsIntoSections();
    void readsFromPathAndSniffs();
    void hostile_data();
    void hostile();
    void zipBomb();
    void deepNesting();
    void writeFuzzSeeds();
};

namespace {

std::span<const uint8_t> span_of(const QByteArray& b) {
    return {reinterpret_cast<const uint8_t*>(b.constData()), static_cast<size_t>(b.size())};
}

sl::doc::Document read(const QByteArray& bytes, IngestOptions options = {}) {
    IngestContext ctx(options);
    return sl::ingest::read_docx_bytes(span_of(bytes), "report.docx", ctx);
}

QString text(const std::string& s) { return QString::fromStdString(s); }

QByteArray report() {
    const std::string body =
        para("Quarterly report", "Titel") + "<w:p><w:r><w:t>Sales went up.</w:t></w:r>" + footnote_ref(1) +
        "<w:r><w:t> Costs did not.</w:t></w:r>" + footnote_ref(2) + "</w:p>" + para("Results", "berschrift1") +
        para("Revenue grew in every region.") + table({{"Region", "Sales"}, {"North", "42"}}) +
        para("Details", "Mine") + para("Minor point", "Heading4") + para("The details follow.");
    return make_docx(body, {{1, "Audited figures."}, {2, "See annex B."}});
}

}  // namespace

void TstDocxReader::headingsTablesFootnotes() {
    const sl::doc::Document d = read(report());
    QCOMPARE(d.kind, sl::doc::DocumentKind::Text);
    QCOMPARE(text(d.title), QStringLiteral("Quarterly report"));  // no core.xml: the first heading
    QCOMPARE(text(d.metadata.at("format")), QStringLiteral("docx"));
    QCOMPARE(d.id.size(), size_t{64});
    QCOMPARE(d.units.size(), size_t{3});
    for (size_t i = 0; i < d.units.size(); ++i) {
        QCOMPARE(d.units[i].kind, sl::doc::UnitKind::Section);
        QCOMPARE(d.units[i].index, static_cast<int>(i));
    }
    QCOMPARE(text(d.units[0].label), QStringLiteral("Quarterly report"));
    QCOMPARE(text(d.units[1].label), QStringLiteral("Results"));
    QCOMPARE(text(d.units[2].label), QStringLiteral("Details"));  // basedOn heading 2
    QCOMPARE(text(sl::doc::full_locator(d, d.units[1])), QStringLiteral("report.docx §2 Results"));

    const auto& s0 = d.units[0].blocks;
    QCOMPARE(s0.size(), size_t{4});
    QCOMPARE(s0[0].role, BlockRole::Title);
    QCOMPARE(s0[1].role, BlockRole::Body);
    QCOMPARE(text(s0[1].text), QStringLiteral("Sales went up.[1] Costs did not.[2]"));
    QCOMPARE(s0[2].role, BlockRole::Note);
    QCOMPARE(text(s0[2].text), QStringLiteral("[1] Audited figures."));
    QCOMPARE(text(s0[3].text), QStringLiteral("[2] See annex B."));

    const auto& s1 = d.units[1].blocks;
    QCOMPARE(s1.size(), size_t{6});
    QCOMPARE(s1[0].role, BlockRole::Title);
    QCOMPARE(text(s1[1].text), QStringLiteral("Revenue grew in every region."));
    for (size_t i = 2; i < 6; ++i) QCOMPARE(s1[i].role, BlockRole::TableCell);
    QCOMPARE(text(s1[2].text), QStringLiteral("Region"));
    QCOMPARE(text(s1[5].text), QStringLiteral("42"));

    const auto& s2 = d.units[2].blocks;
    QCOMPARE(s2.size(), size_t{3});
    QCOMPARE(s2[1].role, BlockRole::Title);  // heading 4: a title inside the section
    QCOMPARE(text(s2[1].text), QStringLiteral("Minor point"));
}

void TstDocxReader::runsAndSkippedText() {
    const std::string body =
        "<w:p><w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c</w:t></w:r>"
        "<w:del><w:r><w:delText>gone</w:delText></w:r></w:del>"
        "<w:r><w:fldChar w:fldCharType=\"begin\"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r>"
        "<w:r><mc:AlternateContent><mc:Choice Requires=\"wps\"><w:txbxContent>" +
        para("boxed") + "</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent>" + para("boxed") +
        "</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r></w:p>";
    const sl::doc::Document d = read(make_docx(body));
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(d.units[0].blocks.size(), size_t{1});
    QCOMPARE(text(d.units[0].blocks[0].text), QStringLiteral("a\tb\nc\nboxed"));
    QCOMPARE(text(sl::doc::full_locator(d, d.units[0])), QStringLiteral("report.docx §1"));
}

void TstDocxReader::stylesWithoutStylesPart() {
    const sl::doc::Document d =
        read(make_docx(para("One", "Heading1") + para("x") + para("Two", "Title") + para("y"), {}, false));
    QCOMPARE(d.units.size(), size_t{2});
    QCOMPARE(text(d.units[1].label), QStringLiteral("Two"));
    // Direct outline levels count as headings too.
    const sl::doc::Document e = read(make_docx(
        para("x") + "<w:p><w:pPr><w:outlineLvl w:val=\"1\"/></w:pPr><w:r><w:t>Outlined</w:t></w:r></w:p>" + para("y")));
    QCOMPARE(e.units.size(), size_t{2});
    QCOMPARE(text(e.units[1].label), QStringLiteral("Outlined"));
}

void TstDocxReader::longTextSplitsIntoSections() {
    std::string body = para("Long", "berschrift1");
    const std::string sentence(99, 'w');
    for (int i = 0; i < 100; ++i) body += para(sentence + std::to_string(i % 10));
    const sl::doc::Document d = read(make_docx(body));
    QVERIFY2(d.units.size() >= 3, qPrintable(QString::number(d.units.size())));
    size_t paragraphs = 0;
    for (const auto& u : d.units) {
        size_t chars = 0;
        for (const auto& b : u.blocks) chars += b.text.size(), paragraphs += b.role == BlockRole::Body;
        QVERIFY(chars <= 3000 + 100);
    }
    QCOMPARE(paragraphs, size_t{100});  // nothing lost at the cuts
    QCOMPARE(text(d.units[1].label), QStringLiteral("Long (cont.)"));
}

void TstDocxReader::readsFromPathAndSniffs() {
    QTemporaryDir dir;
    // By extension (Word writes [Content_Types].xml first), and by content under another name.
    const std::string by_ext = dir.filePath(QStringLiteral("report.docx")).toStdString();
    const std::string by_magic = dir.filePath(QStringLiteral("report.bin")).toStdString();
    const QByteArray a = report(), b = make_docx(para("Sniffed"), {}, true, true);
    std::ofstream(by_ext, std::ios::binary).write(a.constData(), a.size());
    std::ofstream(by_magic, std::ios::binary).write(b.constData(), b.size());
    IngestContext ctx;
    const sl::doc::Document d = sl::ingest::read_document(by_ext, ctx);
    QCOMPARE(d.units.size(), size_t{3});
    QCOMPARE(d.id, read(a).id);
    QCOMPARE(QString::fromLatin1(sl::ingest::reader_for(by_magic)->name()), QStringLiteral("docx"));
    QCOMPARE(text(sl::ingest::read_document(by_magic, ctx).units.at(0).blocks.at(0).text), QStringLiteral("Sniffed"));
}

void TstDocxReader::hostile_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<IngestErrorKind>("kind");
    QTest::addColumn<QString>("says");
    const QByteArray good = report();
    QTest::newRow("truncated zip") << good.left(good.size() / 2) << IngestErrorKind::Corrupt << QString();
    QTest::newRow("not a zip") << QByteArray("hello, this is not a zip file at all") << IngestErrorKind::Corrupt
                               << QString();
    QTest::newRow("empty") << QByteArray() << IngestErrorKind::Corrupt << QString();
    QTest::newRow("missing document.xml")
        << sl::test::pptx::make_zip({{"[Content_Types].xml", "<Types/>"}}) << IngestErrorKind::Corrupt
        << QStringLiteral("not a Word document: word/document.xml is missing");
    QTest::newRow("malformed body") << make_docx("<w:p><w:r><w:t>open</w:r></w:p>") << IngestErrorKind::Corrupt
                                    << QStringLiteral("word/document.xml: malformed XML at line");
    QByteArray ole("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", 8);
    QTest::newRow("word 97 doc") << ole + QByteArray(512, '\0') << IngestErrorKind::Unsupported
                                 << QStringLiteral("Word 97-2003");
    QTest::newRow("encrypted") << ole + QByteArray("E\0n\0c\0r\0y\0p\0t\0i\0o\0n\0I\0n\0f\0o\0", 28)
                               << IngestErrorKind::Encrypted << QStringLiteral("encrypted");
}

void TstDocxReader::hostile() {
    QFETCH(QByteArray, bytes);
    QFETCH(IngestErrorKind, kind);
    QFETCH(QString, says);
    try {
        read(bytes);
        QFAIL("no error");
    } catch (const IngestError& e) {
        const QString what = QString::fromUtf8(e.what());
        qInfo("%s", qPrintable(what));
        QCOMPARE(e.kind(), kind);
        QVERIFY2(what.startsWith(QStringLiteral("report.docx: ")), qPrintable(what));
        if (!says.isEmpty()) QVERIFY2(what.contains(says), qPrintable(what));
    }
}

void TstDocxReader::zipBomb() {
    // 1 GiB of zeros as word/document.xml: refused by the zip layer's caps, quickly.
    std::vector<sl::test::pptx::ZipItem> items = {{"_rels/.rels", "<Relationships/>"},
                                                  sl::test::pptx::zeros_bomb("word/document.xml", 1024)};
    try {
        read(sl::test::pptx::make_zip(items));
        QFAIL("no error");
    } catch (const IngestError& e) {
        qInfo("%s", e.what());
        QCOMPARE(e.kind(), IngestErrorKind::TooLarge);
        QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("word/document.xml")));
    }
}

void TstDocxReader::deepNesting() {
    // Tables nested 5,000 deep: read without recursion, the text folded into the outer cell.
    std::string body;
    constexpr int kDepth = 5000;
    for (int i = 0; i < kDepth; ++i) body += "<w:tbl><w:tr><w:tc>";
    body += para("deep");
    for (int i = 0; i < kDepth; ++i) body += "</w:tc></w:tr></w:tbl>";
    const sl::doc::Document d = read(make_docx(body));
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(d.units[0].blocks.size(), size_t{1});
    QCOMPARE(d.units[0].blocks[0].role, BlockRole::TableCell);
    QCOMPARE(text(d.units[0].blocks[0].text), QStringLiteral("deep"));
}

void TstDocxReader::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_docx: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir> tst_docx_reader
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    auto write = [&](const char* name, const QByteArray& bytes) {
        QVERIFY(bytes.size() < 20000);
        std::ofstream(out / name, std::ios::binary).write(bytes.constData(), bytes.size());
    };
    write("report.docx", report());
    // The same parts packed by the fuzzer itself ("SLDX" + "\n@@ name\n" + bytes), so that
    // mutations reach the XML parsers past the zip CRCs.
    std::string packed = "SLDX";
    packed += "\n@@ word/document.xml\n" + document_xml(para("Title", "Titel") + "<w:p><w:r><w:t>a</w:t></w:r>" + footnote_ref(1) + "</w:p>" +
                                                       table({{"x", "y"}}));
    packed += "\n@@ word/_rels/document.xml.rels\n<Relationships xmlns=\"http://schemas.openxmlformats.org/package/"
              "2006/relationships\"><Relationship Id=\"rId1\" Type=\"" +
              std::string(kR) + "/styles\" Target=\"styles.xml\"/><Relationship Id=\"rId2\" Type=\"" + kR +
              "/footnotes\" Target=\"footnotes.xml\"/></Relationships>";
    packed += "\n@@ word/styles.xml\n" + styles_xml();
    packed += "\n@@ word/footnotes.xml\n" + footnotes_xml({{1, "note"}});
    write("report.sldx", q(packed));
}

QTEST_GUILESS_MAIN(TstDocxReader)
#include "tst_docx_reader.moc"
