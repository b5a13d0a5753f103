// Plain text, Markdown, HTML and EPUB on inputs written here: sections by headings and by size,
// labels and locators, titles, table cells, entities, dropped script/style, spine order; UTF-8
// repair (invalid bytes, overlongs, surrogates, truncation, UTF-16 with a BOM); hostile inputs
// (deeply nested and unclosed markup, floods of '&' and '<', missing or broken EPUB parts, DRM,
// truncated zips); reading from a path through the registry.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>

#include "core/document/locator.h"
#include "ingest/epub/epub_reader.h"
#include "ingest/ingest_error.h"
#include "ingest/reader.h"
#include "ingest/text/html_text.h"
#include "ingest/text/text_reader.h"
#include "ingest/text/text_sections.h"
#include "tests/ingest/text/epub_fixture.h"

using sl::doc::BlockRole;
using sl::ingest::IngestContext;
using sl::ingest::IngestError;
using sl::ingest::IngestErrorKind;
using sl::test::epub::make_epub;
using sl::test::epub::xhtml;

Q_DECLARE_METATYPE(IngestErrorKind)

class TstTextReaders : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void repairUtf8_data();
    void repairUtf8();
    void markdownSections();
    void plainTextChunks();
    void invalidUtf8File();
    void utf16File();
    void htmlText();
    void htmlHostile_data();
    void htmlHostile();
    void epubSpineOrder();
    void epubHostile_data();
    void epubHostile();
    void readsFromPaths();
    void writeFuzzSeeds();
};

namespace {

QString text(const std::string& s) { return QString::fromStdString(s); }

sl::doc::Document read_text(const std::string& bytes, const std::string& name) {
    IngestContext ctx;
    return sl::ingest::read_text_bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, name, ctx);
}

sl::doc::Document read_epub(const QByteArray& bytes) {
    IngestContext ctx;
    return sl::ingest::read_epub_bytes(
        {reinterpret_cast<const uint8_t*>(bytes.constData()), static_cast<size_t>(bytes.size())}, "book.epub", ctx);
}

bool valid_utf8(const std::string& s) {
    size_t n = 0;
    return sl::ingest::text::repair_utf8(s, &n) == s && n == 0;
}

QStringList locators(const sl::doc::Document& d) {
    QStringList out;
    for (const auto& u : d.units) out << text(sl::doc::full_locator(d, u));
    return out;
}

const char* kMarkdown =
    "Notes on birds\n"
    "==============\n"
    "\n"
    "Intro line one\n"
    "line two.\n"
    "\n"
    "## Methods\n"
    "\n"
    "```sh\n"
    "# not a heading\n"
    "\n"
    "count --birds\n"
    "```\n"
    "\n"
    "#### Detail ####\n"
    "Small print.\n"
    "\n"
    "Results\n"
    "-------\n"
    "Robins: 12.\n";

}  // namespace

void TstTextReaders::repairUtf8_data() {
    QTest::addColumn<QByteArray>("in");
    QTest::addColumn<QByteArray>("out");
    QTest::addColumn<int>("replaced");
    const QByteArray fffd("\xEF\xBF\xBD");
    QTest::newRow("ascii") << QByteArray("plain") << QByteArray("plain") << 0;
    QTest::newRow("valid multibyte") << QByteArray("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x90\xA6")
                                     << QByteArray("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x90\xA6") << 0;
    QTest::newRow("latin-1 byte") << QByteArray("caf\xE9!") << QByteArray("caf") + fffd + "!" << 1;
    QTest::newRow("stray continuations") << QByteArray("a\x80\x80\x80z") << QByteArray("a") + fffd + "z" << 1;
    QTest::newRow("overlong slash") << QByteArray("\xC0\xAF") << fffd << 1;
    QTest::newRow("overlong 3-byte") << QByteArray("\xE0\x80\xAF") << fffd << 1;
    QTest::newRow("surrogate") << QByteArray("\xED\xA0\x80x") << fffd + "x" << 1;
    QTest::newRow("past U+10FFFF") << QByteArray("\xF4\x90\x80\x80") << fffd << 1;
    QTest::newRow("cut at the end") << QByteArray("ok\xE2\x82") << QByteArray("ok") + fffd << 1;
    QTest::newRow("NUL dropped") << QByteArray("a\0b", 3) << QByteArray("ab") << 0;
}

void TstTextReaders::repairUtf8() {
    QFETCH(QByteArray, in);
    QFETCH(QByteArray, out);
    QFETCH(int, replaced);
    size_t n = 0;
    const std::string got = sl::ingest::text::repair_utf8(std::string_view(in.constData(), static_cast<size_t>(in.size())), &n);
    QCOMPARE(QByteArray(got.data(), static_cast<qsizetype>(got.size())), out);
    QCOMPARE(static_cast<int>(n), replaced);
    QVERIFY(valid_utf8(got));
}

void TstTextReaders::markdownSections() {
    const sl::doc::Document d = read_text(kMarkdown, "birds.md");
    QCOMPARE(d.kind, sl::doc::DocumentKind::Text);
    QCOMPARE(text(d.title), QStringLiteral("Notes on birds"));
    QCOMPARE(text(d.metadata.at("format")), QStringLiteral("markdown"));
    QCOMPARE(locators(d), QStringList({QStringLiteral("birds.md §1 Notes on birds"), QStringLiteral("birds.md §2 Methods"),
                                       QStringLiteral("birds.md §3 Results")}));
    QCOMPARE(d.units[0].blocks.size(), size_t{2});
    QCOMPARE(d.units[0].blocks[0].role, BlockRole::Title);
    QCOMPARE(text(d.units[0].blocks[1].text), QStringLiteral("Intro line one\nline two."));
    // The fenced block is one body block (its '#' line is code, not a heading); "####" is a title
    // inside §2.
    const auto& m = d.units[1].blocks;
    QCOMPARE(m.size(), size_t{4});
    QCOMPARE(text(m[1].text), QStringLiteral("```sh\n# not a heading\n\ncount --birds\n```"));
    QCOMPARE(m[2].role, BlockRole::Title);
    QCOMPARE(text(m[2].text), QStringLiteral("Detail"));
    QCOMPARE(text(d.units[2].blocks.back().text), QStringLiteral("Robins: 12."));
}

void TstTextReaders::plainTextChunks() {
    std::string s;
    for (int i = 0; i < 60; ++i) s += "Paragraph " + std::to_string(i) + " " + std::string(120, 'x') + "\n\n";
    s += std::string(10000, 'y');  // one enormous line
    const sl::doc::Document d = read_text(s, "log.txt");
    QCOMPARE(text(d.title), QStringLiteral("log.txt"));
    QVERIFY(d.units.size() >= 5);
    size_t total = 0;
    for (const auto& u : d.units) {
        QVERIFY(u.label.empty());
        size_t chars = 0;
        for (const auto& b : u.blocks) chars += b.text.size();
        QVERIFY2(chars <= 2 * sl::ingest::text::kSectionChars, qPrintable(QString::number(chars)));
        total += chars;
    }
    QCOMPARE(total, size_t{60} * 0 + d.text_chars());
    QVERIFY(d.text_chars() >= 10000 + 60 * 130);  // nothing dropped
    QCOMPARE(text(sl::doc::full_locator(d, d.units[1])), QStringLiteral("log.txt §2"));
}

void TstTextReaders::invalidUtf8File() {
    const std::string bytes = "# Caf\xE9\n\nBad \xFF\xFE bytes \xED\xA0\x80 here, and good \xC3\xA9.\n";
    const sl::doc::Document d = read_text(bytes, "broken.md");
    QCOMPARE(d.units.size(), size_t{1});
    for (const auto& b : d.units[0].blocks) QVERIFY(valid_utf8(b.text));
    QVERIFY(valid_utf8(d.title));
    QCOMPARE(text(d.units[0].blocks[1].text), QStringLiteral("Bad \uFFFD\uFFFD bytes \uFFFD here, and good \u00E9."));
    QCOMPARE(text(d.metadata.at("notes")), QStringLiteral("4 invalid UTF-8 sequences replaced by U+FFFD"));
}

void TstTextReaders::utf16File() {
    const QString s = QStringLiteral("Grüße\n\nzweiter") + QChar(0) + QStringLiteral(" Absatz");  // NUL dropped
    QByteArray le("\xFF\xFE", 2);
    for (const QChar c : s) le.append(static_cast<char>(c.unicode() & 0xFF)).append(static_cast<char>(c.unicode() >> 8));
    const sl::doc::Document d = read_text(le.toStdString(), "de.txt");
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(text(d.units[0].blocks[0].text), QStringLiteral("Grüße"));
    QCOMPARE(text(d.units[0].blocks[1].text), QStringLiteral("zweiter Absatz"));
}

void TstTextReaders::htmlText() {
    const std::string html =
        "<!DOCTYPE html><html><head><title>Bird &amp; Co.</title><script>var x = '<h1>no</h1>';</script>"
        "<style>h1 { color: red }</style></head><body><!-- <h1>commented</h1> -->"
        "<h1>Intro</h1><p>Caf&eacute;? No: caf&#233; &#x2014; &lt;tags&gt; &nbsp;and&unknown; A&amp;B</p>"
        "<noscript>enable JS</noscript><h2 class=\"x\">Table</h2><table><tr><th>Species</th><th>Count</th></tr>"
        "<tr><td>Robin</td><td>12</td></tr></table><p>After <b>bold</b> and <a href='x>y'>link</a>.<br>Next"
        "<SCRIPT type=\"text/javascript\">alert(1)</SCRIPT></p><h4>Deep</h4><p>end</p></body></html>";
    const sl::doc::Document d = read_text(html, "page.html");
    QCOMPARE(text(d.title), QStringLiteral("Bird & Co."));
    QCOMPARE(locators(d), QStringList({QStringLiteral("page.html §1 Intro"), QStringLiteral("page.html §2 Table")}));
    QCOMPARE(text(d.units[0].blocks[1].text),
             QStringLiteral("Caf&eacute;? No: café — <tags> \u00A0and&unknown; A&B"));
    const auto& t = d.units[1].blocks;
    QCOMPARE(t.size(), size_t{9});
    QCOMPARE(t[1].role, BlockRole::TableCell);
    QCOMPARE(text(t[1].text), QStringLiteral("Species"));
    QCOMPARE(text(t[4].text), QStringLiteral("12"));
    QCOMPARE(t[5].role, BlockRole::Body);
    QCOMPARE(text(t[5].text), QStringLiteral("After bold and link."));
    QCOMPARE(text(t[6].text), QStringLiteral("Next"));
    QCOMPARE(t[7].role, BlockRole::Title);
    for (const auto& u : d.units)
        for (const auto& b : u.blocks) {
            QVERIFY2(!text(b.text).contains(QStringLiteral("no")) || b.text.find("alert") == std::string::npos,
                     b.text.c_str());
            QVERIFY(b.text.find("color") == std::string::npos && b.text.find("commented") == std::string::npos &&
                    b.text.find("enable JS") == std::string::npos && b.text.find("alert") == std::string::npos);
        }
}

void TstTextReaders::htmlHostile_data() {
    QTest::addColumn<QByteArray>("html");
    QTest::addColumn<QString>("contains");
    QByteArray nested;
    for (int i = 0; i < 200000; ++i) nested += "<div><span>";
    nested += "deep text";
    QTest::newRow("200k nested elements, unclosed") << nested << QStringLiteral("deep text");
    QTest::newRow("unclosed script") << QByteArray("<p>before</p><script>while(1){}") << QStringLiteral("before");
    QTest::newRow("unclosed comment") << QByteArray("<p>kept</p><!-- lost") << QStringLiteral("kept");
    QTest::newRow("unclosed quote in tag") << QByteArray("<p>kept</p><a href=\"x>lost") << QStringLiteral("kept");
    QTest::newRow("stray angle brackets") << QByteArray("1 < 2 > 0 <<>> <3") << QStringLiteral("1 < 2 > 0 <<>> <3");
    QTest::newRow("flood of ampersands") << QByteArray(4 << 20, '&') + "end" << QStringLiteral("end");
    QTest::newRow("flood of <head>") << QByteArray("<head></head>").repeated(200000) + "tail" << QStringLiteral("tail");
    QTest::newRow("huge entity number") << QByteArray("&#99999999999999999999; ok") << QStringLiteral("\uFFFD ok");
    QTest::newRow("invalid utf-8 in markup") << QByteArray("<h1>\xFF\xFE</h1><p>x\xC3</p>") << QStringLiteral("x\uFFFD");
}

void TstTextReaders::htmlHostile() {
    QFETCH(QByteArray, html);
    QFETCH(QString, contains);
    QElapsedTimer t;
    t.start();
    const sl::doc::Document d = read_text(html.toStdString(), "hostile.html");
    qInfo("%lld bytes in %lld ms", static_cast<long long>(html.size()), static_cast<long long>(t.elapsed()));
    QVERIFY(t.elapsed() < 20000);  // linear: never quadratic in the input
    QString all;
    for (const auto& u : d.units)
        for (const auto& b : u.blocks) {
            QVERIFY(valid_utf8(b.text));
            all += text(b.text) + QLatin1Char('\n');
        }
    QVERIFY2(all.contains(contains), qPrintable(all.left(200)));
}

void TstTextReaders::epubSpineOrder() {
    // Manifest order a, b, c; spine order c, a (b is not in the spine).
    const QByteArray book = make_epub(
        "A Small Book",
        {{"a.xhtml", xhtml("A", "<h1>Chapter One</h1><p>First &amp; foremost.</p><h2>Part</h2><p>more</p>")},
         {"b.xhtml", xhtml("B", "<p>not in the spine</p>")},
         {"c.xhtml", xhtml("C", "<p>A prologue without a heading.</p>")}},
        {2, 0});
    const sl::doc::Document d = read_epub(book);
    QCOMPARE(d.kind, sl::doc::DocumentKind::Text);
    QCOMPARE(text(d.title), QStringLiteral("A Small Book"));
    QCOMPARE(text(d.metadata.at("creator")), QStringLiteral("A. Writer"));
    QCOMPARE(text(d.metadata.at("language")), QStringLiteral("en"));
    QCOMPARE(locators(d), QStringList({QStringLiteral("book.epub §1"), QStringLiteral("book.epub §2 Chapter One"),
                                       QStringLiteral("book.epub §3 Part")}));
    QCOMPARE(text(d.units[0].blocks[0].text), QStringLiteral("A prologue without a heading."));
    QCOMPARE(text(d.units[1].blocks[1].text), QStringLiteral("First & foremost."));
    for (const auto& u : d.units)
        for (const auto& b : u.blocks) QVERIFY(b.text.find("not in the spine") == std::string::npos);
}

void TstTextReaders::epubHostile_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<IngestErrorKind>("kind");
    QTest::addColumn<QString>("says");
    const QByteArray good = make_epub("T", {{"a.xhtml", xhtml("A", "<p>x</p>")}}, {0});
    QTest::newRow("truncated zip") << good.left(good.size() * 2 / 3) << IngestErrorKind::Corrupt << QString();
    QTest::newRow("no container") << sl::test::pptx::make_zip({{"mimetype", "application/epub+zip", false}})
                                  << IngestErrorKind::Corrupt
                                  << QStringLiteral("not an EPUB book: META-INF/container.xml is missing");
    QTest::newRow("container names nothing")
        << sl::test::pptx::make_zip({{"META-INF/container.xml", "<container><rootfiles/></container>"}})
        << IngestErrorKind::Corrupt << QStringLiteral("(none named)");
    QTest::newRow("container leaves the book")
        << sl::test::pptx::make_zip({{"META-INF/container.xml", "<container><rootfiles><rootfile full-path=\"../../etc/passwd\"/></rootfiles></container>"}})
        << IngestErrorKind::Corrupt << QStringLiteral("is missing");
    QTest::newRow("malformed opf")
        << sl::test::pptx::make_zip({{"META-INF/container.xml", "<container><rootfiles><rootfile full-path=\"p.opf\"/></rootfiles></container>"},
                                     {"p.opf", "<package><spine><itemref idref=\"a\"></package>"}})
        << IngestErrorKind::Corrupt << QStringLiteral("p.opf: malformed XML");
    QTest::newRow("drm") << make_epub("T", {{"a.xhtml", xhtml("A", "<p>x</p>")}}, {0},
                                      {{"META-INF/encryption.xml",
                                        "<encryption><EncryptedData><CipherData><CipherReference "
                                        "URI=\"OEBPS/text/a.xhtml\"/></CipherData></EncryptedData></encryption>"}})
                         << IngestErrorKind::Encrypted << QStringLiteral("DRM");
}

void TstTextReaders::epubHostile() {
    QFETCH(QByteArray, bytes);
    QFETCH(IngestErrorKind, kind);
    QFETCH(QString, says);
    try {
        read_epub(bytes);
        QFAIL("no error");
    } catch (const IngestError& e) {
        const QString what = QString::fromUtf8(e.what());
        qInfo("%s", qPrintable(what));
        QCOMPARE(e.kind(), kind);
        QVERIFY2(what.startsWith(QStringLiteral("book.epub: ")), qPrintable(what));
        if (!says.isEmpty()) QVERIFY2(what.contains(says), qPrintable(what));
    }
    // Fonts obfuscated by the standard are not DRM; a chapter missing from the zip is skipped with
    // a note.
    const QByteArray fonts = make_epub("T", {{"a.xhtml", xhtml("A", "<p>x</p>")}}, {0},
                                       {{"META-INF/encryption.xml",
                                         "<encryption><EncryptedData><CipherData><CipherReference "
                                         "URI=\"OEBPS/fonts/f.otf\"/></CipherData></EncryptedData></encryption>"}});
    QCOMPARE(read_epub(fonts).units.size(), size_t{1});
}

void TstTextReaders::readsFromPaths() {
    QTemporaryDir dir;
    auto put = [&](const char* name, const QByteArray& bytes) {
        const std::string p = dir.filePath(QString::fromLatin1(name)).toStdString();
        std::ofstream(p, std::ios::binary).write(bytes.constData(), bytes.size());
        return p;
    };
    const QByteArray book = make_epub("Book", {{"a.xhtml", xhtml("A", "<h1>One</h1><p>x</p>")}}, {0});
    const struct {
        std::string path;
        const char* reader;
        const char* first;
    } rows[] = {
        {put("notes.md", kMarkdown), "text", "birds.md"},
        {put("NOTES.TXT", "just text\n"), "text", nullptr},
        {put("page.htm", "<h1>Hi</h1>"), "html", nullptr},
        {put("page.data", "<!DOCTYPE html><h1>Sniffed</h1>"), "html", nullptr},  // by its start
        {put("book.epub", book), "epub", nullptr},
        {put("book.zip", book), "epub", nullptr},  // by the OCF mimetype entry
    };
    for (const auto& r : rows) {
        const sl::ingest::Reader* reader = sl::ingest::reader_for(r.path);
        QVERIFY2(reader, r.path.c_str());
        QCOMPARE(QString::fromLatin1(reader->name()), QString::fromLatin1(r.reader));
        IngestContext ctx;
        const sl::doc::Document d = sl::ingest::read_document(r.path, ctx);
        QCOMPARE(d.kind, sl::doc::DocumentKind::Text);
        QVERIFY(!d.units.empty());
        QCOMPARE(d.id.size(), size_t{64});
    }
    // Over the size cap: refused before reading, naming the file.
    const std::string big = dir.filePath(QStringLiteral("big.txt")).toStdString();
    std::filesystem::resize_file(put("big.txt", "x"), static_cast<uintmax_t>(sl::ingest::kMaxTextBytes) + 1);
    try {
        IngestContext ctx;
        sl::ingest::read_document(big, ctx);
        QFAIL("no error");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::TooLarge);
        QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("big.txt")));
    }
}

void TstTextReaders::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_text: SIGHTLINE_WRITE_FUZZ_SEEDS=<fuzz_text dir>; the EPUB
    // seed goes to the fuzz_docx corpus beside it.
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    auto write = [&](const std::filesystem::path& p, const QByteArray& bytes) {
        QVERIFY(bytes.size() < 20000);
        std::ofstream(p, std::ios::binary).write(bytes.constData(), bytes.size());
    };
    // The first byte picks the format (fuzz_text.cpp): 'm' Markdown, 'h' HTML, else plain text.
    write(out / "birds.md", QByteArray("m") + kMarkdown);
    write(out / "page.html", QByteArray("h<html><head><title>T &amp; U</title><script>x</script></head><body><h1>A</h1>"
                                        "<p>&#x41;&eacute;<b>b</b></p><table><tr><td>c</td></tr></table><!-- c --></body></html>"));
    write(out / "bad_utf8.txt", QByteArray("tCaf\xE9\n\n\xED\xA0\x80 end\xE2\x82"));
    write(out.parent_path() / "fuzz_docx" / "book.epub",
          make_epub("Book", {{"a.xhtml", xhtml("A", "<h1>One</h1><p>x</p>")}, {"b.xhtml", xhtml("B", "<p>y</p>")}},
                    {1, 0}));
}

QTEST_GUILESS_MAIN(TstTextReaders)
#include "tst_text_readers.moc"
