// The PDF view in continuous mode, as a reader scrolls it: the pages stacked in one scroll area,
// the current page (and the page box) following the scroll position, only the pages near the
// viewport holding a render however far one scrolls, a citation landing on its page with the
// region in view and highlighted, find scrolling to the hit's line, zoom and Ctrl+wheel keeping
// the reading position, Page Down to the next page's top. On R-intro.pdf as ingest reads it, and
// on refman.pdf (2,415 pages) laid out from its page size without reading it.
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTest>
#include <QWheelEvent>

#include "app/desktop/highlight_canvas.h"
#include "app/desktop/pdf_page_stack.h"
#include "app/desktop/pdf_view.h"
#include "ingest/ingest_context.h"
#include "ingest/reader.h"
#include "tests/common/test_support.h"

using namespace sl::desktop;

namespace {

// Canvases the view may hold: the pages meeting the viewport, kPrefetch each way, the current one.
int bound(const PdfView& v) {
    const PdfPageStack* s = v.pageStack();
    const int top = v.scrollArea()->verticalScrollBar()->value();
    const int visible = s->pageAt(top + v.scrollArea()->viewport()->height()) - s->pageAt(top) + 1;
    return visible + 2 * PdfPageStack::kPrefetch + 1;
}

// The viewport's rows in stack coordinates.
QRect viewRect(const PdfView& v) {
    return {QPoint(v.scrollArea()->horizontalScrollBar()->value(),
                   v.scrollArea()->verticalScrollBar()->value()),
            v.scrollArea()->viewport()->size()};
}

int spinValue(const PdfView& v) {
    return v.findChild<QSpinBox*>()->value();
}

}  // namespace

class TstDesktopPdfContinuous : public QObject {
    Q_OBJECT

    std::shared_ptr<const sl::doc::Document> doc_;

    // A reader's window: narrow enough that about one and a half pages show at fit width.
    void open(PdfView& v, int page) {
        v.resize(520, 900);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc_, page, std::nullopt);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
    }

private Q_SLOTS:
    void initTestCase() {
        REQUIRE_ASSET(pdf, "samples/pdf/R-intro.pdf");
        sl::ingest::IngestOptions o;
        o.ocr = false;
        sl::ingest::IngestContext ctx(o);
        doc_ =
            std::make_shared<const sl::doc::Document>(sl::ingest::read_document(pdf.string(), ctx));
        QVERIFY(doc_->units.size() > 100);
    }

    // The pages follow one another in one scroll area; scrolling moves the current page (the one
    // view would keep page 1 current, its scroll range one page tall).
    void pagesAreStacked() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 0);
        const PdfPageStack* s = v.pageStack();
        const int n = static_cast<int>(doc_->units.size());
        QCOMPARE(s->pageCount(), n);
        for (int p = 1; p < n; ++p)
            QCOMPARE(s->pageRect(p).top(), s->pageRect(p - 1).bottom() + 1 + PdfPageStack::kGap);
        QVERIFY(s->height() > n * s->pageRect(0).height());
        // Page 1 shows below page 0 and renders with it.
        QVERIFY(viewRect(v).intersects(s->pageRect(1)));
        QTRY_VERIFY_WITH_TIMEOUT(s->rendered(1), 30000);

        QSignalSpy changed(&v, &PdfView::pageChanged);
        QScrollBar* bar = v.scrollArea()->verticalScrollBar();
        QCOMPARE(bar->pageStep(), v.scrollArea()->viewport()->height());
        bar->triggerAction(QAbstractSlider::SliderPageStepAdd);  // down by the viewport's height
        QVERIFY2(v.currentPage() > 0, "scrolling a viewport down leaves page 1");
        QCOMPARE(changed.size(), 1);
        QCOMPARE(changed.last().at(0).toInt(), v.currentPage());
        QCOMPARE(spinValue(v), v.currentPage() + 1);
        QVERIFY(viewRect(v).intersects(s->pageRect(v.currentPage())));
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);

        // The wheel scrolls the same way (no Ctrl: no zoom).
        const int before = v.currentPage();
        const double zoom = v.zoom();
        QWidget* viewport = v.scrollArea()->viewport();
        const QPointF at(200, 300);
        for (int i = 0; i < 40 && v.currentPage() == before; ++i) {
            QWheelEvent down(at, viewport->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton,
                             Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(viewport, &down);
        }
        QCOMPARE(v.currentPage(), before + 1);
        QCOMPARE(spinValue(v), before + 2);
        QCOMPARE(v.zoom(), zoom);
        // Back up to the top: page 1 again.
        bar->triggerAction(QAbstractSlider::SliderToMinimum);
        QCOMPARE(v.currentPage(), 0);
        QCOMPARE(spinValue(v), 1);
    }

    // Through the whole document a viewport at a time: never more than the pages near the
    // viewport hold a render, and the last page ends current.
    void boundedRenders() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 0);
        QScrollBar* bar = v.scrollArea()->verticalScrollBar();
        int steps = 0, most = 0;
        while (bar->value() < bar->maximum()) {
            bar->triggerAction(QAbstractSlider::SliderPageStepAdd);
            if (++steps % 15 == 0)
                QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);  // let renders land
            most = std::max(most, v.pageStack()->canvasCount());
            QVERIFY2(v.pageStack()->canvasCount() <= bound(v),
                     qPrintable(QString::number(v.pageStack()->canvasCount())));
            QVERIFY(v.heldImages() <= bound(v));
        }
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        QVERIFY(v.heldImages() <= bound(v));
        qInfo("%d steps, at most %d canvases, %d renders for %zu pages", steps, most,
              v.rendersDone(), doc_->units.size());
        QCOMPARE(v.currentPage(), static_cast<int>(doc_->units.size()) - 1);
        QCOMPARE(spinValue(v), static_cast<int>(doc_->units.size()));
    }

    // A citation to page N, region R: page N current and in view, R in the viewport, highlighted
    // on page N's render (ink under it), nowhere else.
    void citationLandsOnItsRegion() {
        if (!doc_) QSKIP("no R-intro.pdf");
        int page = -1;
        sl::doc::BBox box;
        for (int p = 60; p < static_cast<int>(doc_->units.size()) && page < 0; ++p)
            for (const auto& b : doc_->units[static_cast<size_t>(p)].blocks)
                if (b.bbox && b.bbox->y0 > 0.55 && b.text.size() > 80) {
                    page = p;
                    box = *b.bbox;
                    break;
                }
        QVERIFY(page > 0);
        PdfView v;
        open(v, 3);
        QSignalSpy shown(&v, &PdfView::pageShown);
        v.showPage(doc_, page, box);
        QCOMPARE(v.currentPage(), page);
        QCOMPARE(spinValue(v), page + 1);
        QVERIFY(v.highlight().has_value());
        QVERIFY(viewRect(v).contains(v.pageStack()->highlightRect()));  // in view before it renders
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        QCOMPARE(shown.last().at(0).toInt(), page);
        HighlightCanvas* c = v.canvas();
        QVERIFY(c);
        QCOMPARE(c, v.pageStack()->canvas(page));
        const QRect h = c->highlightRect();
        QVERIFY(!h.isEmpty());
        const QRect in_view(c->mapTo(v.scrollArea()->viewport(), h.topLeft()), h.size());
        QVERIFY(v.scrollArea()->viewport()->rect().contains(in_view));
        for (int p : {page - 1, page + 1})
            if (const HighlightCanvas* other = v.pageStack()->canvas(p))
                QVERIFY(!other->highlight().has_value());
        const QImage img = c->image();
        int dark = 0;
        for (int y = static_cast<int>(box.y0 * img.height());
             y < static_cast<int>(box.y1 * img.height()); ++y)
            for (int x = static_cast<int>(box.x0 * img.width());
                 x < static_cast<int>(box.x1 * img.width()); ++x)
                dark += qGray(img.pixel(x, y)) < 128;
        QVERIFY2(dark > 50, "no text under the highlighted region");
    }

    // Find goes to each hit's page with its line in the viewport.
    void findScrollsToTheLine() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 0);
        v.find(QStringLiteral("linear model"));
        QVERIFY(v.hitCount() >= 3);
        for (int i = 0; i < 3; ++i) {
            QVERIFY(v.highlight().has_value());
            QVERIFY(viewRect(v).contains(v.pageStack()->highlightRect()));
            QVERIFY(
                v.pageStack()->pageRect(v.currentPage()).contains(v.pageStack()->highlightRect()));
            v.findNext();
        }
    }

    // Zoom (buttons, fit width, Ctrl+wheel) keeps the current page and where one reads it.
    void zoomKeepsTheReadingPosition() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 20);
        const PdfPageStack* s = v.pageStack();
        auto topOffset = [&] {
            return s->pageRect(20).top() - v.scrollArea()->verticalScrollBar()->value();
        };
        QCOMPARE(topOffset(), PdfPageStack::kGap / 2);  // the page's top at the viewport's top
        const double fit = v.zoom();
        v.zoomIn();
        v.zoomIn();
        QVERIFY(v.zoom() > fit * 1.5);
        QCOMPARE(v.currentPage(), 20);
        QVERIFY(std::abs(topOffset() - PdfPageStack::kGap / 2) <= 2);
        QVERIFY(!v.rendered());  // the old render scaled until the new one lands
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        const QImage shown = v.canvas()->image();  // rendered at the new size, not scaled up
        QVERIFY(std::abs(shown.width() / shown.devicePixelRatio() - s->pageRect(20).width()) <= 2);
        for (int i = 0; i < 4; ++i) v.zoomOut();
        QVERIFY(v.zoom() < fit);
        QCOMPARE(v.currentPage(), 20);
        v.fitWidth();
        QCOMPARE(v.zoom(), fit);
        QCOMPARE(v.currentPage(), 20);
        QVERIFY(std::abs(topOffset() - PdfPageStack::kGap / 2) <= 2);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);

        // Ctrl+wheel: the page point under the pointer stays under it.
        QWidget* viewport = v.scrollArea()->viewport();
        const QPoint at(180, 400);
        auto pointUnder = [&] {
            const QRect r = s->pageRect(20);
            const QPoint p = viewRect(v).topLeft() + at;
            return QPointF(double(p.x() - r.x()) / r.width(), double(p.y() - r.y()) / r.height());
        };
        const QPointF before = pointUnder();
        QWheelEvent up(QPointF(at), viewport->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, 120),
                       Qt::NoButton, Qt::ControlModifier, Qt::NoScrollPhase, false);
        QApplication::sendEvent(viewport, &up);
        QVERIFY(std::abs(v.zoom() - fit * 1.25) < 1e-6);
        const QPointF after = pointUnder();
        QVERIFY2(std::abs(after.x() - before.x()) * s->pageRect(20).width() <= 2 &&
                     std::abs(after.y() - before.y()) * s->pageRect(20).height() <= 2,
                 qPrintable(QStringLiteral("(%1, %2) -> (%3, %4)")
                                .arg(before.x())
                                .arg(before.y())
                                .arg(after.x())
                                .arg(after.y())));
        QCOMPARE(v.currentPage(), 20);
        // A resize at fit width keeps the page too.
        v.fitWidth();
        v.resize(700, 800);
        QTRY_COMPARE(v.zoom(),
                     (v.scrollArea()->viewport()->width() - 2 * PdfPageStack::kMargin) / 612.0);
        QCOMPARE(v.currentPage(), 20);
        QVERIFY(viewRect(v).intersects(s->pageRect(20)));
    }

    // At 800 % a page is 31 Mpx: only the visible pages keep a render, none prefetched.
    void highZoomPrefetchesNothing() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 5);
        while (v.zoom() < 8.0) v.zoomIn();
        QCOMPARE(v.currentPage(), 5);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 60000);
        QVERIFY(v.pageStack()->canvasCount() <= bound(v) - 2 * PdfPageStack::kPrefetch);
        QVERIFY(v.heldImages() <= bound(v) - 2 * PdfPageStack::kPrefetch);
    }

    // Page Down (the key and the control) jumps to the next page's top; the page box to its page's.
    void pageKeysGoToPageTops() {
        if (!doc_) QSKIP("no R-intro.pdf");
        PdfView v;
        open(v, 10);
        v.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&v));
        v.setFocus();  // as a click on the page gives it: the keys go to the pages, not the page
                       // box
        QCOMPARE(QApplication::focusWidget(), v.scrollArea());
        const PdfPageStack* s = v.pageStack();
        QScrollBar* bar = v.scrollArea()->verticalScrollBar();
        bar->triggerAction(
            QAbstractSlider::SliderSingleStepAdd);  // a little down page 10 (0-based)
        QCOMPARE(v.currentPage(), 10);
        QTest::keyClick(v.scrollArea(),
                        Qt::Key_PageDown);  // the button's shortcut: it clicks shortly after
        QTRY_COMPARE(v.currentPage(), 11);
        QCOMPARE(s->pageRect(11).top() - bar->value(), PdfPageStack::kGap / 2);
        QTest::keyClick(v.scrollArea(), Qt::Key_PageUp);
        QTRY_COMPARE(v.currentPage(), 10);
        QTest::keyClick(v.scrollArea(), Qt::Key_PageUp);
        QTRY_COMPARE(v.currentPage(), 9);
        QCOMPARE(s->pageRect(9).top() - bar->value(), PdfPageStack::kGap / 2);
        auto* box = v.findChild<QSpinBox*>();
        box->setValue(42);
        Q_EMIT box->editingFinished();
        QCOMPARE(v.currentPage(), 41);
        QCOMPARE(s->pageRect(41).top() - bar->value(), PdfPageStack::kGap / 2);
    }

    // 2,415 pages open, and the end and the middle show, without rendering every page.
    void longDocumentRendersWhatIsSeen() {
        REQUIRE_ASSET(pdf, "samples/pdf/refman.pdf");
        // The layout needs the page sizes only: refman.pdf is 2,415 US Letter pages (pdfinfo).
        auto d = std::make_shared<sl::doc::Document>();
        d->path = pdf.string();
        for (int i = 0; i < 2415; ++i) {
            sl::doc::Unit u;
            u.index = i;
            u.label = std::to_string(i + 1);
            u.width = 612;
            u.height = 792;
            d->units.push_back(std::move(u));
        }
        const std::shared_ptr<const sl::doc::Document> doc = d;
        PdfView v;
        v.resize(520, 900);
        v.show();
        QVERIFY(QTest::qWaitForWindowExposed(&v));
        v.showPage(doc, 0, std::nullopt);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        QScrollBar* bar = v.scrollArea()->verticalScrollBar();
        bar->triggerAction(QAbstractSlider::SliderToMaximum);
        QCOMPARE(v.currentPage(), 2414);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        QVERIFY(v.heldImages() <= bound(v));
        bar->setSliderPosition(bar->maximum() / 2);  // as a drag of the slider does
        QVERIFY(std::abs(v.currentPage() - 1207) <= 2);
        QTRY_VERIFY_WITH_TIMEOUT(v.rendered(), 30000);
        QVERIFY(v.heldImages() <= bound(v));
        qInfo("%d renders for 2415 pages", v.rendersDone());
        QVERIFY(v.rendersDone() < 40);
    }
};

QTEST_MAIN(TstDesktopPdfContinuous)
#include "tst_desktop_pdf_continuous.moc"
