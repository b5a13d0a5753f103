// The PPTX reader on decks generated here (pptx_fixture.h): order by p:sldIdLst, text and roles,
// groups, tables, pictures, placeholder positions inherited from layout and master, notes,
// titles and metadata, progress and cancellation, and hostile decks (bombs, unsafe names, missing
// or malformed parts, encrypted and legacy OLE files, truncation, deep groups, absurd counts and
// sizes).
#include <QBuffer>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>

#include "ingest/ingest_error.h"
#include "ingest/slides/pptx_reader.h"
#include "tests/common/test_support.h"
#include "tests/ingest/slides/pptx_fixture.h"
#include "tests/ingest/slides/zip_bomb.h"

using namespace sl::test::pptx;
using sl::doc::BlockRole;
using sl::ingest::IngestContext;
using sl::ingest::IngestError;
using sl::ingest::IngestErrorKind;
using sl::ingest::IngestOptions;

Q_DECLARE_METATYPE(IngestErrorKind)

class TstPptxReader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void basicDeck();
    void orderFollowsSldIdLst();
    void textRunsBreaksFields();
    void groupsApplyTransforms();
    void tables();
    void pictures();
    void placeholdersInheritPositions();
    void titleFallbacks();
    void progressAndCancel();
    void readsFromPathAndSniffs();
    void hostile_data();
    void hostile();
    void zipBombSlide();
    void unsafeNamesIgnored();
    void deepGroupsBounded();
    void absurdSizes();
    void writeFuzzSeeds();
};

namespace {

std::span<const uint8_t> span_of(const QByteArray& b) {
    return {reinterpret_cast<const uint8_t*>(b.constData()), static_cast<size_t>(b.size())};
}

sl::doc::Document read(const QByteArray& deck, IngestOptions options = {}) {
    IngestContext ctx(options);
    return sl::ingest::read_pptx_bytes(span_of(deck), "deck.pptx", ctx);
}

QString text(const std::string& s) {
    return QString::fromStdString(s);
}

bool near(float a, double b) {
    return std::abs(static_cast<double>(a) - b) < 1e-4;
}

bool box_is(const std::optional<sl::doc::BBox>& b, const Emu& e, double cx = kSlideCx,
            double cy = kSlideCy) {
    return b && near(b->x0, e.x / cx) && near(b->y0, e.y / cy) && near(b->x1, (e.x + e.cx) / cx) &&
           near(b->y1, (e.y + e.cy) / cy);
}

QByteArray png(int w, int h) {
    QImage img(w, h, QImage::Format_RGB32);
    img.fill(Qt::darkCyan);
    QByteArray out;
    QBuffer buf(&out);
    buf.open(QIODevice::WriteOnly);
    img.save(&buf, "PNG");
    return out;
}

TestDeck two_slides() {
    TestDeck d;
    d.slides = {title_body_slide("Welcome", {"First point", "Second point"}, "Say hello"),
                title_body_slide("Agenda", {"One"})};
    return d;
}

}  // namespace

void TstPptxReader::basicDeck() {
    const sl::doc::Document d = read(make_deck(two_slides()));
    QCOMPARE(d.kind, sl::doc::DocumentKind::Slides);
    QCOMPARE(d.units.size(), size_t{2});
    QCOMPARE(text(d.title), QStringLiteral("Test deck"));
    QCOMPARE(text(d.path), QStringLiteral("deck.pptx"));
    QCOMPARE(d.id.size(), size_t{64});
    QCOMPARE(text(d.metadata.at("creator")), QStringLiteral("Ada Lovelace"));
    QCOMPARE(text(d.metadata.at("lastModifiedBy")), QStringLiteral("Charles Babbage"));
    QCOMPARE(text(d.metadata.at("created")), QStringLiteral("2024-01-02T03:04:05Z"));
    QCOMPARE(text(d.metadata.at("modified")), QStringLiteral("2024-02-03T04:05:06Z"));
    QCOMPARE(text(d.metadata.at("application")), QStringLiteral("Sightline tests"));

    const auto& u = d.units[0];
    QCOMPARE(u.kind, sl::doc::UnitKind::Slide);
    QCOMPARE(u.index, 0);
    QCOMPARE(text(u.label), QStringLiteral("1"));
    QCOMPARE(text(d.units[1].label), QStringLiteral("2"));
    QCOMPARE(u.width, 960.0f);
    QCOMPARE(u.height, 540.0f);
    QCOMPARE(u.blocks.size(), size_t{3});
    QCOMPARE(u.blocks[0].role, BlockRole::Title);
    QCOMPARE(text(u.blocks[0].text), QStringLiteral("Welcome"));
    QCOMPARE(u.blocks[1].role, BlockRole::Body);
    QCOMPARE(text(u.blocks[1].text), QStringLiteral("First point\nSecond point"));
    QCOMPARE(u.blocks[2].role, BlockRole::Note);
    QCOMPARE(text(u.blocks[2].text), QStringLiteral("Say hello"));
    QVERIFY(!u.blocks[2].bbox);
    // No notes on slide 2.
    for (const auto& b : d.units[1].blocks) QVERIFY(b.role != BlockRole::Note);
}

void TstPptxReader::orderFollowsSldIdLst() {
    TestDeck d;
    for (const char* t : {"A", "B", "C", "D"}) d.slides.push_back(title_body_slide(t, {"x"}));
    // File names sort differently from the deck order, and the list order differs from both.
    d.slides[0].file = "slide10.xml";
    d.slides[1].file = "slide2.xml";
    d.slides[2].file = "slide1.xml";
    d.slides[3].file = "slide3.xml";
    d.order = {2, 0, 3, 1};
    const sl::doc::Document doc = read(make_deck(d));
    QCOMPARE(doc.units.size(), size_t{4});
    QStringList titles;
    for (const auto& u : doc.units) titles << text(u.blocks.at(0).text);
    QCOMPARE(titles, QStringList({"C", "A", "D", "B"}));
    for (int i = 0; i < 4; ++i) QCOMPARE(doc.units[static_cast<size_t>(i)].index, i);
}

void TstPptxReader::textRunsBreaksFields() {
    TestDeck d;
    TestSlide s;
    s.shapes = sp(2, "", Emu{0, 0, 100, 100},
                  "<a:p><a:r><a:t>Hello</a:t></a:r><a:r><a:t>, world</a:t></a:r><a:br/>"
                  "<a:r><a:t>next line</a:t></a:r></a:p><a:p/>"
                  "<a:p><a:fld id=\"{X}\" type=\"slidenum\"><a:t>7</a:t></a:fld>"
                  "<a:r><a:t> &amp; &lt;more&gt;</a:t></a:r></a:p><a:p/><a:p/>") +
               sp(3, "", Emu{0, 0, 100, 100}, "<a:p/>");  // empty shapes give no block
    d.slides = {s};
    const auto doc = read(make_deck(d));
    QCOMPARE(doc.units[0].blocks.size(), size_t{1});
    QCOMPARE(text(doc.units[0].blocks[0].text),
             QStringLiteral("Hello, world\nnext line\n\n7 & <more>"));
    QCOMPARE(doc.units[0].blocks[0].role, BlockRole::Body);
}

void TstPptxReader::groupsApplyTransforms() {
    TestDeck d;
    TestSlide s;
    // Outer group: children in a 1000x1000 space mapped onto (1219200, 685800) + 6096000x3429000,
    // i.e. scale 6096 horizontally and 3429 vertically. Inner group: identity at offset.
    const std::string inner = group({100, 100, 200, 200}, {0, 0, 400, 400},
                                    sp(5, "", Emu{0, 0, 400, 400}, paragraphs({"Inner"})));
    s.shapes = group({1219200, 685800, 6096000, 3429000}, {0, 0, 1000, 1000},
                     sp(4, "", Emu{500, 500, 500, 500}, paragraphs({"Outer"})) + inner);
    d.slides = {s};
    const auto doc = read(make_deck(d));
    const auto& blocks = doc.units[0].blocks;
    QCOMPARE(blocks.size(), size_t{2});
    QCOMPARE(text(blocks[0].text), QStringLiteral("Outer"));
    QVERIFY(box_is(blocks[0].bbox,
                   {1219200 + 500 * 6096, 685800 + 500 * 3429, 500 * 6096, 500 * 3429}));
    // Inner: child (0,0,400,400) in a 400 space -> (100,100,200,200) in the outer space.
    QCOMPARE(text(blocks[1].text), QStringLiteral("Inner"));
    QVERIFY(box_is(blocks[1].bbox,
                   {1219200 + 100 * 6096, 685800 + 100 * 3429, 200 * 6096, 200 * 3429}));
}

void TstPptxReader::tables() {
    TestDeck d;
    TestSlide s;
    s.shapes = table({1000000, 2000000, 6000000, 1000000}, {2000000, 4000000}, {400000, 600000},
                     {{"Name", "Value"}, {"alpha", ""}});
    d.slides = {s};
    const auto doc = read(make_deck(d));
    const auto& b = doc.units[0].blocks;
    QCOMPARE(b.size(), size_t{3});  // the empty cell gives no block
    for (const auto& x : b) QCOMPARE(x.role, BlockRole::TableCell);
    QCOMPARE(text(b[0].text), QStringLiteral("Name"));
    QCOMPARE(text(b[1].text), QStringLiteral("Value"));
    QCOMPARE(text(b[2].text), QStringLiteral("alpha"));
    QVERIFY(box_is(b[0].bbox, {1000000, 2000000, 2000000, 400000}));
    QVERIFY(box_is(b[1].bbox, {3000000, 2000000, 4000000, 400000}));
    QVERIFY(box_is(b[2].bbox, {1000000, 2400000, 2000000, 600000}));
}

void TstPptxReader::pictures() {
    TestDeck d;
    TestSlide s;
    const Emu pos{6000000, 1000000, 3000000, 2000000};
    s.shapes = pic(7, "rId5", pos) + pic(8, "rId6", pos) + pic(9, "rIdMissing", pos);
    s.media = {{"rId5", "../media/image1.png"}, {"rId6", "../media/broken.jpeg"}};
    d.slides = {s};
    d.extra = {{"ppt/media/image1.png", png(640, 480), false},
               {"ppt/media/broken.jpeg", "not a jpeg", true}};
    const QByteArray deck = make_deck(d);
    {
        const auto doc = read(deck);
        const auto& v = doc.units[0].visuals;
        QCOMPARE(v.size(), size_t{2});
        QCOMPARE(v[0].kind, sl::doc::VisualKind::Picture);
        QCOMPARE(text(v[0].locator), QStringLiteral("zip:ppt/media/image1.png"));
        QCOMPARE(text(v[0].mime), QStringLiteral("image/png"));
        QCOMPARE(v[0].width, 640);
        QCOMPARE(v[0].height, 480);
        QVERIFY(box_is(v[0].bbox, pos));
        QVERIFY(!v[0].encoded.empty());
        const QImage thumb =
            QImage::fromData(v[0].encoded.data(), static_cast<int>(v[0].encoded.size()));
        QCOMPARE(thumb.width(), 256);
        QCOMPARE(thumb.height(), 192);
        // An undecodable picture is still listed, without size or thumbnail.
        QCOMPARE(text(v[1].locator), QStringLiteral("zip:ppt/media/broken.jpeg"));
        QCOMPARE(text(v[1].mime), QStringLiteral("image/jpeg"));
        QCOMPARE(v[1].width, 0);
        QVERIFY(v[1].encoded.empty());
    }
    IngestOptions no_thumbs;
    no_thumbs.thumbnail_px = 0;
    const auto doc = read(deck, no_thumbs);
    QCOMPARE(doc.units[0].visuals[0].width, 640);
    QVERIFY(doc.units[0].visuals[0].encoded.empty());
}

void TstPptxReader::placeholdersInheritPositions() {
    TestDeck d;
    TestSlide s;
    s.shapes = sp(2, "<p:ph type=\"title\"/>", std::nullopt, paragraphs({"From master"})) +
               sp(3, "<p:ph idx=\"1\"/>", std::nullopt, paragraphs({"From layout"})) +
               sp(4, "<p:ph type=\"body\" idx=\"1\"/>", Emu{0, 0, 1219200, 685800},
                  paragraphs({"Own position wins"})) +
               sp(5, "<p:ph type=\"ftr\" idx=\"77\"/>", std::nullopt, paragraphs({"Nowhere"})) +
               sp(6, "<p:ph type=\"subTitle\" idx=\"42\"/>", std::nullopt, paragraphs({"Sub"}));
    d.slides = {s};
    const auto doc = read(make_deck(d));
    const auto& b = doc.units[0].blocks;
    QCOMPARE(b.size(), size_t{5});
    QCOMPARE(b[0].role, BlockRole::Title);
    QVERIFY(box_is(b[0].bbox, kMasterTitle));
    QCOMPARE(b[1].role, BlockRole::Body);
    QVERIFY(box_is(b[1].bbox, kLayoutBody));
    QVERIFY(box_is(b[2].bbox, {0, 0, 1219200, 685800}));
    QVERIFY(!b[3].bbox);                   // no footer placeholder in layout or master
    QCOMPARE(b[4].role, BlockRole::Body);  // subtitle -> body; the master's body position
    QVERIFY(box_is(b[4].bbox, kMasterBody));
}

void TstPptxReader::titleFallbacks() {
    TestDeck d = two_slides();
    d.title = "";
    QCOMPARE(text(read(make_deck(d)).title), QStringLiteral("Welcome"));
    d.core_props = false;
    QCOMPARE(text(read(make_deck(d)).title), QStringLiteral("Welcome"));
    d.slides = {TestSlide{sp(2, "", Emu{0, 0, 10, 10}, paragraphs({"no title"})), "", "", {}}};
    QCOMPARE(text(read(make_deck(d)).title), QStringLiteral("deck.pptx"));
}

void TstPptxReader::progressAndCancel() {
    TestDeck d;
    for (int i = 0; i < 30; ++i)
        d.slides.push_back(title_body_slide(std::string("S").append(std::to_string(i)), {"b"}));
    const QByteArray deck = make_deck(d);
    std::vector<double> fractions;
    IngestContext ctx({}, [&](double f, const std::string&) { fractions.push_back(f); });
    sl::ingest::read_pptx_bytes(span_of(deck), "deck.pptx", ctx);
    QVERIFY(fractions.size() >= 2);
    QCOMPARE(fractions.front(), 0.0);
    QCOMPARE(fractions.back(), 1.0);

    std::atomic<bool> cancel{false};
    // Cancelled as soon as the read starts (progress 0): the first slide check stops it.
    IngestContext cctx(
        {}, [&](double, const std::string&) { cancel = true; }, &cancel);
    try {
        sl::ingest::read_pptx_bytes(span_of(deck), "deck.pptx", cctx);
        QFAIL("not cancelled");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::Cancelled);
    }
}

void TstPptxReader::readsFromPathAndSniffs() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/talk.pptx";
    const QByteArray deck = make_deck(two_slides());
    std::ofstream(path, std::ios::binary).write(deck.constData(), deck.size());
    const auto reader = sl::ingest::make_pptx_reader();
    QCOMPARE(QString::fromLatin1(reader->name()), QStringLiteral("pptx"));
    QVERIFY(std::find(reader->extensions().begin(), reader->extensions().end(), "pptx") !=
            reader->extensions().end());
    // Our decks start with [Content_Types].xml: found by extension, not sniffed.
    QVERIFY(!reader->sniff(deck.left(64).toStdString()));
    QVERIFY(!reader->sniff("%PDF-1.7"));
    const QByteArray ppt_first = make_zip({{"ppt/presentation.xml", "x", true}});
    QVERIFY(reader->sniff(ppt_first.left(64).toStdString()));
    IngestContext ctx;
    const auto d = reader->read(path, ctx);
    QCOMPARE(d.units.size(), size_t{2});
    QCOMPARE(text(d.path), QString::fromStdString(path));
    QCOMPARE(d.id, read(deck).id);
}

void TstPptxReader::hostile_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<IngestErrorKind>("kind");
    QTest::addColumn<QString>("message");

    TestDeck no_pres = two_slides();
    no_pres.presentation = false;
    QTest::newRow("missing presentation.xml")
        << make_deck(no_pres) << IngestErrorKind::Corrupt
        << "deck.pptx: not a PowerPoint deck: ppt/presentation.xml is missing";

    TestDeck bad_xml = two_slides();
    bad_xml.slides[1].shapes += "<p:sp><a:p></p:sp>";
    QTest::newRow("malformed slide XML")
        << make_deck(bad_xml) << IngestErrorKind::Corrupt
        << "deck.pptx: ppt/slides/slide2.xml: malformed XML at line 2";

    // An encrypted OOXML package: an OLE compound file with an EncryptionInfo stream.
    QByteArray ole("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", 8);
    ole.append(QByteArray(504, '\0'));
    for (const char c : std::string("EncryptionInfo")) ole.append(c).append('\0');
    ole.append(QByteArray(1000, '\0'));
    QTest::newRow("encrypted OLE") << ole << IngestErrorKind::Encrypted
                                   << "deck.pptx: the deck is encrypted and needs a password";
    QByteArray legacy("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", 8);
    legacy.append(QByteArray(2000, '\x01'));
    QTest::newRow("legacy OLE") << legacy << IngestErrorKind::Unsupported << "deck.pptx: an OLE";

    const QByteArray deck = make_deck(two_slides());
    QTest::newRow("truncated zip") << deck.left(deck.size() * 2 / 3) << IngestErrorKind::Corrupt
                                   << "deck.pptx: not a zip archive";
    QTest::newRow("empty file") << QByteArray() << IngestErrorKind::Corrupt
                                << "deck.pptx: empty file, not a zip archive";

    TestDeck many;
    for (int i = 0; i < 6; ++i) many.slides.push_back(title_body_slide("t", {"b"}));
    QTest::newRow("too many slides") << make_deck(many) << IngestErrorKind::TooLarge
                                     << "deck.pptx: the deck has more than 5 slides";

    TestDeck dangling = two_slides();
    dangling.slides[0].shapes = sp(2, "", std::nullopt, "<a:p><a:r><a:t>unclosed</a:r></a:p>");
    QTest::newRow("mismatched tags") << make_deck(dangling) << IngestErrorKind::Corrupt
                                     << "deck.pptx: ppt/slides/slide1.xml: malformed XML";
}

void TstPptxReader::hostile() {
    QFETCH(QByteArray, bytes);
    QFETCH(IngestErrorKind, kind);
    QFETCH(QString, message);
    IngestOptions options;
    options.max_pages = 5;
    try {
        read(bytes, options);
        QFAIL("no error");
    } catch (const IngestError& e) {
        QVERIFY2(QString::fromUtf8(e.what()).startsWith(message), e.what());
        QCOMPARE(e.kind(), kind);
    }
}

void TstPptxReader::zipBombSlide() {
    // A valid deck whose slide1.xml is 1 GiB of zeros deflated to about 1 MiB.
    TestDeck d = two_slides();
    std::vector<ZipItem> items = deck_items(d);
    for (auto& it : items)
        if (it.name == "ppt/slides/slide1.xml") it = zeros_bomb(it.name, 1024);
    const QByteArray deck = make_zip(items);
    QVERIFY(deck.size() < (2 << 20));
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    QElapsedTimer t;
    t.start();
    for (const double ratio : {200.0, 1e12}) {  // the ratio cap, then the total cap
        IngestOptions o;
        o.max_compression_ratio = ratio;
        o.max_uncompressed_bytes = int64_t{96} << 20;
        try {
            read(deck, o);
            QFAIL("the bomb was read");
        } catch (const IngestError& e) {
            QCOMPARE(e.kind(), IngestErrorKind::TooLarge);
            QVERIFY2(std::string(e.what()).find("deck.pptx: ") == 0, e.what());
        }
    }
    getrusage(RUSAGE_SELF, &after);
    qInfo("bomb refused twice in %lld ms, peak RSS +%ld KiB", static_cast<long long>(t.elapsed()),
          after.ru_maxrss - before.ru_maxrss);
    QVERIFY(after.ru_maxrss - before.ru_maxrss < 400 * 1024);
}

void TstPptxReader::unsafeNamesIgnored() {
    TestDeck d = two_slides();
    d.extra = {{"../../evil", "pwned", true},
               {"/abs/evil", "pwned", true},
               {"ppt\\..\\..\\evil", "pwned", false}};
    // A relationship that points outside the package is dropped too.
    TestSlide s;
    s.shapes = pic(7, "rId5", {0, 0, 10, 10});
    s.media = {{"rId5", "../../../../evil"}};
    d.slides.push_back(s);
    const QString before = QDir::current().absoluteFilePath(QStringLiteral("../../evil"));
    const auto doc = read(make_deck(d));
    QCOMPARE(doc.units.size(), size_t{3});
    QVERIFY(doc.units[2].visuals.empty());
    QVERIFY(!QFile::exists(before));
    QVERIFY(!QFile::exists(QStringLiteral("/abs/evil")));
}

void TstPptxReader::deepGroupsBounded() {
    TestDeck d;
    TestSlide s;
    std::string deep = sp(9, "", Emu{0, 0, 10, 10}, paragraphs({"too deep"}));
    for (int i = 0; i < 5000; ++i) deep = group({0, 0, 10, 10}, {0, 0, 10, 10}, deep);
    s.shapes = sp(2, "", Emu{0, 0, 10, 10}, paragraphs({"shallow"})) + deep;
    d.slides = {s};
    // Stored, not deflated: 5000 nested groups deflate past the 200x ratio cap (as they should).
    std::vector<ZipItem> items = deck_items(d);
    for (auto& it : items) it.deflate = false;
    const auto doc = read(make_zip(items));
    QCOMPARE(doc.units[0].blocks.size(), size_t{1});
    QCOMPARE(text(doc.units[0].blocks[0].text), QStringLiteral("shallow"));
    try {
        read(make_deck(d));
        QFAIL("the deflated nest passed the ratio cap");
    } catch (const IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::TooLarge);
    }
}

void TstPptxReader::absurdSizes() {
    TestDeck d = two_slides();
    d.sld_sz = "<p:sldSz cx=\"-5\" cy=\"99999999999999999999999\"/>";
    TestSlide s;
    s.shapes =
        sp(2, "", Emu{INT64_MAX / 2, -INT64_MAX / 2, INT64_MAX / 2, INT64_MAX / 2},
           paragraphs({"far away"})) +
        sp(3, "", Emu{-1000, -1000, 2000000000000LL, 2000000000000LL}, paragraphs({"huge"})) +
        group({0, 0, INT64_MAX / 4, INT64_MAX / 4}, {0, 0, 1, 1},
              sp(4, "", Emu{0, 0, 1, 1}, paragraphs({"scaled"}))) +
        table({0, 0, 10, 10}, {INT64_MAX / 2, INT64_MAX / 2}, {INT64_MAX / 2}, {{"a", "b"}});
    d.slides.push_back(s);
    const auto doc = read(make_deck(d));
    QCOMPARE(doc.units.size(), size_t{3});
    QCOMPARE(doc.units[0].width, 720.0f);  // the 4:3 default
    QCOMPARE(doc.units[0].height, 540.0f);
    for (const auto& u : doc.units)
        for (const auto& b : u.blocks)
            if (b.bbox) QVERIFY(b.bbox->valid());
    const auto& b = doc.units[2].blocks;
    QCOMPARE(b.size(), size_t{5});
    QVERIFY(!b[0].bbox);  // entirely off the slide
    QVERIFY(b[1].bbox);   // covers the slide: clamped to it
    QCOMPARE(b[1].bbox->x1, 1.0f);
}

void TstPptxReader::writeFuzzSeeds() {
    // Regenerates tests/fuzz/corpus/fuzz_pptx: SIGHTLINE_WRITE_FUZZ_SEEDS=<that dir>
    // tst_pptx_reader
    const QByteArray dir = qgetenv("SIGHTLINE_WRITE_FUZZ_SEEDS");
    if (dir.isEmpty()) QSKIP("set SIGHTLINE_WRITE_FUZZ_SEEDS=DIR to write the fuzz seeds");
    const std::filesystem::path out = dir.toStdString();
    auto write = [&](const char* name, const QByteArray& bytes) {
        QVERIFY(bytes.size() < 20000);
        std::ofstream(out / name, std::ios::binary).write(bytes.constData(), bytes.size());
    };
    write("two_slides.pptx", make_deck(two_slides()));
    TestDeck rich;
    TestSlide s;
    s.shapes = group({1219200, 685800, 6096000, 3429000}, {0, 0, 1000, 1000},
                     sp(4, "<p:ph type=\"title\"/>", std::nullopt, paragraphs({"G"}))) +
               table({1000000, 2000000, 6000000, 1000000}, {2000000, 4000000}, {400000, 600000},
                     {{"a", "b"}, {"c", "d"}}) +
               pic(7, "rId5", {6000000, 1000000, 3000000, 2000000});
    s.media = {{"rId5", "../media/image1.png"}};
    s.notes = "note";
    rich.slides = {s, title_body_slide("T", {"b"})};
    rich.order = {1, 0};
    rich.extra = {{"ppt/media/image1.png", png(8, 6), false}};
    write("rich.pptx", make_deck(rich));
    // Stored (uncompressed) entries let the fuzzer mutate the XML directly.
    std::vector<ZipItem> stored = deck_items(two_slides());
    for (auto& it : stored) it.deflate = false;
    write("stored.pptx", make_zip(stored));
    // The fuzzer's packed form ("SLPK", then "\n@@ name\n" + bytes per part): XML mutations
    // reach the parsers without breaking zip CRCs.
    auto packed = [](const std::vector<ZipItem>& items) {
        QByteArray b("SLPK");
        for (const auto& it : items)
            b += "\n@@ " + QByteArray::fromStdString(it.name) + "\n" + it.data;
        return b;
    };
    write("two_slides.slpk", packed(deck_items(two_slides())));
    rich.extra.clear();
    write("rich.slpk", packed(deck_items(rich)));
}

QTEST_GUILESS_MAIN(TstPptxReader)
#include "tst_pptx_reader.moc"
