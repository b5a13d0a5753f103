// The PPTX reader on a real deck written by PowerPoint: pandoc's reference deck (pandoc-data,
// cached by scripts/setup.sh). Its placeholders carry no positions of their own, so every box comes
// from the slide layouts and the master.
#include <QTest>

#include "ingest/slides/pptx_reader.h"
#include "tests/common/test_support.h"

class TstPptxReaderModel : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void pandocReferenceDeck();
};

void TstPptxReaderModel::pandocReferenceDeck() {
    REQUIRE_ASSET(p, "samples/pptx/pandoc-reference.pptx");
    const auto reader = sl::ingest::make_pptx_reader();
    sl::ingest::IngestContext ctx;
    const sl::doc::Document d = reader->read(p.string(), ctx);

    QCOMPARE(d.kind, sl::doc::DocumentKind::Slides);
    QCOMPARE(QString::fromStdString(d.title), QStringLiteral("Title"));  // docProps/core.xml
    QCOMPARE(QString::fromStdString(d.metadata.at("creator")), QStringLiteral("Jesse Rosenthal"));
    QCOMPARE(QString::fromStdString(d.metadata.at("created")),
             QStringLiteral("2017-06-05T14:10:58Z"));
    QCOMPARE(QString::fromStdString(d.metadata.at("application")),
             QStringLiteral("Microsoft Macintosh PowerPoint"));
    QCOMPARE(d.id.size(), size_t{64});

    QCOMPARE(d.units.size(), size_t{4});
    const QStringList titles = {"Presentation Title", "Slide Title", "Section header",
                                "Slide Title for Two-Content"};
    const QStringList notes = {"Here is a note\n\nWith another paragraph.",
                               "A speaker note on this slide too.", "", ""};
    const QStringList first_body = {"Presentation Subtitle", "Hello, world.",
                                    "Some explanatory text", "Some content on the left."};
    for (int i = 0; i < 4; ++i) {
        const auto& u = d.units[static_cast<size_t>(i)];
        QCOMPARE(u.kind, sl::doc::UnitKind::Slide);
        QCOMPARE(QString::fromStdString(u.label), QString::number(i + 1));
        QCOMPARE(u.width, 720.0f);   // 9144000 EMU
        QCOMPARE(u.height, 405.0f);  // 5143500 EMU
        QString title, note, body;
        for (const auto& b : u.blocks) {
            const QString t = QString::fromStdString(b.text);
            if (b.role == sl::doc::BlockRole::Title) {
                title = t;
            } else if (b.role == sl::doc::BlockRole::Note) {
                note = t;
                QVERIFY(!b.bbox);
            } else if (body.isEmpty()) {
                body = t;
            }
            if (b.role != sl::doc::BlockRole::Note) {
                // Every placeholder here inherits its box from the layout or the master.
                QVERIFY2(b.bbox.has_value(), qPrintable(t));
                QVERIFY2(b.bbox->valid() && b.bbox->x1 > b.bbox->x0 && b.bbox->y1 > b.bbox->y0,
                         qPrintable(t));
            }
        }
        QCOMPARE(title, titles[i]);
        QCOMPARE(note, notes[i]);
        QCOMPARE(body, first_body[i]);
    }
    // Slide 4: two half-width contents, left and right of the middle.
    const auto& four = d.units[3].blocks;
    QCOMPARE(four.size(), size_t{3});
    QVERIFY(four[1].bbox->x1 <= 0.5f + 1e-3f);
    QVERIFY(four[2].bbox->x0 >= 0.5f - 1e-3f);
    QCOMPARE(QString::fromStdString(four[2].text), QStringLiteral("Some content on the right."));
}

QTEST_GUILESS_MAIN(TstPptxReaderModel)
#include "tst_pptx_reader_model.moc"
