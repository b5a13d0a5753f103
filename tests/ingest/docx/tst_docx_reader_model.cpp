// The DOCX reader on a real package: pandoc's reference document (cached by scripts/setup.sh), as
// it is (styles and properties, an empty body) and with a body written here into its real parts
// (its own styles.xml: "heading 1" is styleId Heading1, outline level 0; Title, BodyText...).
#include <QTest>

#include "core/document/locator.h"
#include "ingest/docx/docx_reader.h"
#include "ingest/slides/zip_archive.h"
#include "tests/common/test_support.h"
#include "tests/ingest/docx/docx_fixture.h"

using namespace sl::test::docx;

class TstDocxReaderModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void referenceDocumentAsIs();
    void referenceStylesWithABody();
};

void TstDocxReaderModel::referenceDocumentAsIs() {
    REQUIRE_ASSET(p, "samples/docx/default.docx");
    const auto reader = sl::ingest::make_docx_reader();
    sl::ingest::IngestContext ctx;
    const sl::doc::Document d = reader->read(p.string(), ctx);
    QCOMPARE(d.kind, sl::doc::DocumentKind::Text);
    QCOMPARE(QString::fromStdString(d.metadata.at("creator")), QStringLiteral("python-docx"));
    QCOMPARE(QString::fromStdString(d.title), QStringLiteral("default.docx"));  // empty dc:title, no heading
    QVERIFY(d.units.empty());  // the reference document's body holds only its section properties
    QCOMPARE(QString::fromStdString(d.metadata.at("notes")), QStringLiteral("no text"));
    QCOMPARE(d.id.size(), size_t{64});
}

void TstDocxReaderModel::referenceStylesWithABody() {
    REQUIRE_ASSET(p, "samples/docx/default.docx");
    // Every part of the real package, word/document.xml replaced.
    sl::ingest::ZipArchive zip = sl::ingest::ZipArchive::open_file(p.string(), {});
    std::vector<sl::test::pptx::ZipItem> items;
    const std::string body = para("Field notes", "Title") + para("Collected in spring.", "BodyText") +
                             para("Methods", "Heading1") + para("We counted birds.", "BodyText") +
                             table({{"Species", "Count"}, {"Robin", "12"}}) + para("Caveats", "Heading2") +
                             para("Rain on day two.", "BodyText") + para("Aside", "Heading5") +
                             para("Small.", "BodyText");
    for (const auto& e : zip.entries()) {
        if (e.name.back() == '/') continue;
        items.emplace_back(e.name, e.name == "word/document.xml" ? q(document_xml(body)) : zip.read(e.name, 1 << 24));
    }
    QVERIFY(items.size() >= 10);
    const QByteArray bytes = sl::test::pptx::make_zip(items);
    sl::ingest::IngestContext ctx;
    const sl::doc::Document d = sl::ingest::read_docx_bytes(
        {reinterpret_cast<const uint8_t*>(bytes.constData()), static_cast<size_t>(bytes.size())}, "notes.docx", ctx);
    QCOMPARE(QString::fromStdString(d.title), QStringLiteral("Field notes"));
    QCOMPARE(d.units.size(), size_t{3});
    QStringList where;
    for (const auto& u : d.units) where << QString::fromStdString(sl::doc::full_locator(d, u));
    QCOMPARE(where, QStringList({QStringLiteral("notes.docx §1 Field notes"), QStringLiteral("notes.docx §2 Methods"),
                                 QStringLiteral("notes.docx §3 Caveats")}));
    QCOMPARE(d.units[1].blocks.size(), size_t{6});
    QCOMPARE(d.units[1].blocks[2].role, sl::doc::BlockRole::TableCell);
    QCOMPARE(d.units[2].blocks.size(), size_t{4});
    QCOMPARE(d.units[2].blocks[2].role, sl::doc::BlockRole::Title);  // heading 5 stays inside §3
}

QTEST_GUILESS_MAIN(TstDocxReaderModel)
#include "tst_docx_reader_model.moc"
