// The PDF view as a reader uses it: find in the document (hits counted in reading order, the page
// of each shown with its line highlighted, next / previous wrapping around, no match said), the
// outline as a side tree that opens its pages, and Ctrl+wheel zoom. On R-intro.pdf as ingest reads it.
#include <QLabel>
#include <QListWidget>
#include <QTabWidget>
#include <QScrollArea>
#include <QTest>
#include <QToolButton>
#include <QTreeWidget>
#include <QWheelEvent>

#include "app/desktop/document_search.h"
#include "app/desktop/pdf_view.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

class TstDesktopPdfFind : public QObject {
    Q_OBJECT

    std::shared_ptr<const sl::doc::Document> doc_;

private Q_SLOTS:
    void initTestCase() {
        REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
        sl::ingest::IngestOptions o;
        o.ocr = false;
        sl::ingest::IngestContext ctx(o);
        doc_ = std::make_shared<const sl::doc::Document>(sl::ingest::read_document(pdf.string(), ctx));
        QVERIFY(doc_->units.size() > 100);
    }

    void searchFunction() {
        const auto hits = find_in_document(*doc_, QStringLiteral("LINEAR MODEL"));
        QVERIFY(hits.size() >= 3);
        for (size_t i = 1; i < hits.size(); ++i) QVERIFY(hits[i].unit >= hits[i - 1].unit);  // reading order
        for (const auto& h : hits) {
            QVERIFY(h.line.contains(QStringLiteral("linear model"), Qt::CaseInsensitive));
            QVERIFY(h.box.valid() && h.box.x1 > h.box.x0);
        }
        QVERIFY(find_in_document(*doc_, QStringLiteral("   ")).empty());
        QVERIFY(find_in_document(*doc_, QStringLiteral("zqxjkvw")).empty());
        QCOMPARE(find_in_document(*doc_, QStringLiteral("the"), 10).size(), size_t{10});
    }

    // A citation's highlight narrows from its region to the lines its snippet quotes.
    void citedLinesNarrowTheRegion() {
        const sl::doc::Block* block = nullptr;
        const sl::doc::Unit* unit = nullptr;
        for (const auto& u : doc_->units) {
            for (const auto& b : u.blocks)
                if (b.bbox && b.lines.size() >= 5 && b.lines[1].text.size() > 30 && b.lines[2].text.size() > 30) {
                    block = &b;
                    unit = &u;
                    break;
                }
            if (block) break;
        }
        QVERIFY(block);
        const std::string snippet = "... " + block->lines[1].text + " " + block->lines[2].text + " ...";
        const auto box = cited_lines(*unit, *block->bbox, snippet);
        QVERIFY(box.has_value());
        QCOMPARE(box->y0, block->lines[1].bbox.y0);
        QCOMPARE(box->y1, block->lines[2].bbox.y1);
        QVERIFY(box->y1 - box->y0 < block->bbox->y1 - block->bbox->y0);
        QVERIFY(!cited_lines(*unit, *block->bbox, "zebra quantum marmalade of the velvet").has_value());
        QVERIFY(!cited_lines(*unit, *block->bbox, "two words").has_value());
        // Lines outside the region do not count.
        const sl::doc::BBox elsewhere{0.0f, 0.0f, 0.01f, 0.01f};
        QVERIFY(!cited_lines(*unit, elsewhere, snippet).has_value());
    }

    void findBar() {
        PdfView v;
        v.resize(800, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc_, 0, std::nullopt);
        const auto hits = find_in_document(*doc_, QStringLiteral("linear model"));
        v.find(QStringLiteral("linear model"));
        QCOMPARE(v.hitCount(), static_cast<int>(hits.size()));
        QCOMPARE(v.currentHit(), 0);
        QCOMPARE(v.currentPage(), hits[0].unit);
        QVERIFY(v.highlight().has_value());
        QCOMPARE(v.highlight()->y0, hits[0].box.y0);
        v.findNext();
        QCOMPARE(v.currentHit(), 1);
        QCOMPARE(v.currentPage(), hits[1].unit);
        v.findPrevious();
        v.findPrevious();  // wraps to the last
        QCOMPARE(v.currentHit(), static_cast<int>(hits.size()) - 1);
        QCOMPARE(v.currentPage(), hits.back().unit);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        // From a later page, the search starts there.
        v.showPage(doc_, hits.back().unit, std::nullopt);
        v.find(QStringLiteral("linear model"));
        QCOMPARE(v.currentPage(), hits.back().unit);
        v.find(QStringLiteral("zqxjkvw"));
        QCOMPARE(v.hitCount(), 0);
        bool said = false;
        for (auto* l : v.findChildren<QLabel*>()) said |= l->text() == QStringLiteral("no match");
        QVERIFY(said);
    }

    void outlineOpensPages() {
        QVERIFY(!doc_->outline.empty());
        PdfView v;
        v.resize(900, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc_, 0, std::nullopt);
        QVERIFY(!v.outlineTree()->isVisible());
        for (auto* b : v.findChildren<QToolButton*>())
            if (b->text() == QStringLiteral("Contents")) b->click();
        QVERIFY(v.outlineTree()->isVisible());
        QVERIFY(v.outlineTree()->topLevelItemCount() > 5);
        // The last top-level entry with a page: activating it opens that page.
        QTreeWidgetItem* target = nullptr;
        for (int i = v.outlineTree()->topLevelItemCount() - 1; i >= 0 && !target; --i)
            if (v.outlineTree()->topLevelItem(i)->data(0, Qt::UserRole).toInt() > 0) target = v.outlineTree()->topLevelItem(i);
        QVERIFY(target);
        Q_EMIT v.outlineTree()->itemActivated(target, 0);
        QCOMPARE(v.currentPage(), target->data(0, Qt::UserRole).toInt());
        QVERIFY(!target->text(1).isEmpty());  // the page label beside the title
    }

    // Page thumbnails in the side panel: rendered as they come into view; a click opens the page.
    void pageThumbnails() {
        PdfView v;
        v.resize(900, 700);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc_, 0, std::nullopt);
        for (auto* b : v.findChildren<QToolButton*>())
            if (b->text() == QStringLiteral("Contents")) b->click();
        v.sidePanel()->setCurrentWidget(v.pageList());
        QCOMPARE(v.pageList()->count(), static_cast<int>(doc_->units.size()));
        auto rendered = [&](int row) { return v.pageList()->item(row)->icon().actualSize(QSize(96, 128)).width() > 80; };
        QTRY_VERIFY_WITH_TIMEOUT(rendered(0), 30000);
        QVERIFY(!rendered(static_cast<int>(doc_->units.size()) - 1));  // far below: not yet
        Q_EMIT v.pageList()->itemClicked(v.pageList()->item(5));
        QCOMPARE(v.currentPage(), 5);
        v.pageList()->scrollToBottom();
        QTRY_VERIFY_WITH_TIMEOUT(rendered(static_cast<int>(doc_->units.size()) - 1), 30000);
        QCOMPARE(v.pageList()->item(0)->text(), QString::fromStdString(doc_->units[0].label.empty() ? "1" : doc_->units[0].label));
    }

    void ctrlWheelZooms() {
        PdfView v;
        v.resize(800, 600);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc_, 3, std::nullopt);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        const double before = v.zoom();
        QWidget* viewport = v.findChild<QScrollArea*>()->viewport();
        const QPointF at(200, 150);
        QWheelEvent up(at, viewport->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::ControlModifier,
                       Qt::NoScrollPhase, false);
        QApplication::sendEvent(viewport, &up);
        QVERIFY(std::abs(v.zoom() - before * 1.25) < 1e-6);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        // Without Ctrl the wheel scrolls and the zoom stays.
        QWheelEvent plain(at, viewport->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QApplication::sendEvent(viewport, &plain);
        QVERIFY(std::abs(v.zoom() - before * 1.25) < 1e-6);
    }
};

QTEST_MAIN(TstDesktopPdfFind)
#include "tst_desktop_pdf_find.moc"
