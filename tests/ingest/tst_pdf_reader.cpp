// The PDF reader on real files (refman.pdf, 2,415 pages; R-intro.pdf; helloworld.pdf), compared
// with what poppler-utils report, and on hostile files made here (truncated, random, encrypted,
// absurd page sizes).
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <functional>
#include <optional>

#include "ingest/ingest_error.h"
#include "ingest/pdf/pdf_reader.h"
#include "ingest/pdf/pdf_render.h"
#include "ingest/pdf/pdf_text_layout.h"
#include "tests/common/test_support.h"
#include "tests/ingest/ingest_test_util.h"

using namespace sl;
using ingest::IngestErrorKind;

namespace {

doc::Document read_pdf(const std::string& path, ingest::IngestOptions options = {},
                       ingest::ProgressFn progress = {},
                       const std::atomic<bool>* cancel = nullptr) {
    ingest::IngestContext ctx(std::move(options), std::move(progress), cancel);
    return ingest::make_pdf_reader()->read(path, ctx);
}

// The kind of IngestError reading `path` throws, or nullopt when it reads.
std::optional<IngestErrorKind> read_error(const std::string& path,
                                          ingest::IngestOptions options = {},
                                          std::string* message = nullptr) {
    try {
        read_pdf(path, std::move(options));
    } catch (const ingest::IngestError& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    return std::nullopt;
}

// Every box of the document inside the unit square.
bool all_boxes_valid(const doc::Document& d, QString* where) {
    for (const doc::Unit& u : d.units) {
        for (const doc::Block& b : u.blocks) {
            if (b.bbox && !b.bbox->valid()) {
                *where = QStringLiteral("block on page %1").arg(u.index + 1);
                return false;
            }
            for (const doc::Span& s : b.lines) {
                if (!s.bbox.valid()) {
                    *where = QStringLiteral("line '%1' on page %2")
                                 .arg(QString::fromStdString(s.text))
                                 .arg(u.index + 1);
                    return false;
                }
            }
        }
    }
    for (const doc::Link& l : d.links) {
        if (!l.bbox.valid()) {
            *where = QStringLiteral("link on page %1").arg(l.unit + 1);
            return false;
        }
    }
    return true;
}

QByteArray random_bytes(qsizetype n) {
    QByteArray b(n, '\0');
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& c : b) c = static_cast<char>(byte(test::rng()));
    return b;
}

}  // namespace

class TstPdfReader : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void layout_groups_lines_and_blocks();
    void sniff_and_extensions();
    void helloworld();
    void rintro_text_links_metadata();
    void rintro_rotated_page();
    void render_on_demand();
    void page_visuals_when_asked();
    void refman_whole_file();
    void refman_outline();
    void refman_page_text_data();
    void refman_page_text();
    void refman_cancel();
    void hostile_data();
    void hostile();
    void page_cap();

private:
    const doc::Document& refman();
    QTemporaryDir tmp_;
    std::optional<doc::Document> refman_;
    // Progress of the whole-file read: calls and the time they span.
    int progress_calls_ = 0;
    double progress_seconds_ = 0, last_fraction_ = -1;
    bool fractions_monotonic_ = true;
};

void TstPdfReader::initTestCase() {
    QVERIFY(tmp_.isValid());
}

void TstPdfReader::layout_groups_lines_and_blocks() {
    const QSizeF page(600, 800);
    using W = ingest::PdfWord;
    // A heading, a two-line paragraph (the first line in two words), a blank line, a paragraph.
    const std::vector<W> words = {
        {"Big", {50, 40, 80, 30}, true, false},     {"heading", {140, 40, 200, 30}, false, true},
        {"first", {50, 100, 40, 12}, true, false},  {"line", {95, 100, 30, 12}, false, true},
        {"second", {50, 114, 60, 12}, false, true}, {"after", {50, 160, 40, 12}, true, false},
        {"gap", {95, 160, 30, 12}, false, true},    {"  ", {300, 300, 10, 12}, false, true},
    };
    const std::vector<doc::Block> blocks = ingest::layout_blocks(words, page);
    QCOMPARE(blocks.size(), size_t{3});
    QCOMPARE(QString::fromStdString(blocks[0].text), QStringLiteral("Big heading"));
    QCOMPARE(blocks[0].role, doc::BlockRole::Title);
    QCOMPARE(QString::fromStdString(blocks[1].text), QStringLiteral("first line\nsecond"));
    QCOMPARE(blocks[1].role, doc::BlockRole::Body);
    QCOMPARE(blocks[1].lines.size(), size_t{2});
    QCOMPARE(QString::fromStdString(blocks[2].text), QStringLiteral("after gap"));
    const doc::BBox b = *blocks[1].bbox;
    QVERIFY(b.valid());
    QVERIFY(qAbs(b.x0 - 50.0f / 600) < 1e-5f && qAbs(b.y1 - 126.0f / 800) < 1e-5f);
    // Words outside the page are clamped to it.
    const auto out = ingest::layout_blocks({{"off", {-50, 790, 100, 40}, false, true}}, page);
    QCOMPARE(out.size(), size_t{1});
    QVERIFY(out[0].bbox->valid() && out[0].bbox->x0 == 0.0f && out[0].bbox->y1 == 1.0f);
}

void TstPdfReader::sniff_and_extensions() {
    const auto r = ingest::make_pdf_reader();
    QCOMPARE(QString::fromLatin1(r->name()), QStringLiteral("pdf"));
    QVERIFY(r->sniff("%PDF-1.7\n%\xe2\xe3"));
    QVERIFY(!r->sniff("\x89PNG\r\n\x1a\n"));
    QVERIFY(r->extensions() == std::vector<std::string>{"pdf"});
}

void TstPdfReader::helloworld() {
    REQUIRE_ASSET(p, "samples/pdf/helloworld.pdf");
    const doc::Document d = read_pdf(p.string());
    QCOMPARE(d.kind, doc::DocumentKind::Pdf);
    QCOMPARE(d.units.size(), size_t{1});
    QCOMPARE(d.id.size(), size_t{64});
    const doc::Unit& u = d.units[0];
    QCOMPARE(u.kind, doc::UnitKind::Page);
    QCOMPARE(u.label, std::string("1"));
    QVERIFY(u.width > 0 && u.height > 0);
    QVERIFY2(test::unit_text(u).contains(QStringLiteral("Hello, world!")),
             qPrintable(test::unit_text(u)));
    QVERIFY(d.title == "helloworld.pdf" || d.metadata.count("title"));
    QVERIFY(u.visuals.empty());  // no render asked for
}

void TstPdfReader::rintro_text_links_metadata() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    const doc::Document d = read_pdf(p.string());
    bool ok = false;
    const QString info =
        QString::fromUtf8(test::run_tool("pdfinfo", {QString::fromStdString(p.string())}, &ok));
    QVERIFY2(ok, "pdfinfo (poppler-utils) failed: run scripts/setup.sh");
    static const QRegularExpression pages_re(QStringLiteral("Pages:\\s+(\\d+)"));
    QCOMPARE(static_cast<int>(d.units.size()), pages_re.match(info).captured(1).toInt());
    QCOMPARE(d.metadata.at("producer"), std::string("pdfTeX-1.40.24"));
    QVERIFY(d.metadata.count("created"));
    QCOMPARE(d.metadata.at("pages"), std::to_string(d.units.size()));
    QVERIFY(!d.outline.empty());
    QVERIFY(!d.links.empty());
    int internal = 0;
    for (const doc::Link& l : d.links) {
        QVERIFY(l.unit >= 0 && l.unit < static_cast<int>(d.units.size()));
        if (l.target_unit >= 0) ++internal;
        QVERIFY(l.target_unit >= 0 || !l.uri.empty());
    }
    QVERIFY(internal > 0);
    QString where;
    QVERIFY2(all_boxes_valid(d, &where), qPrintable(where));
    // Page labels as the document defines them (qpdf --json-key=pagelabels): "T-" + decimal,
    // then roman front matter, then decimal.
    QCOMPARE(d.units[0].label, std::string("T-1"));
    QCOMPARE(d.units[2].label, std::string("i"));
    QCOMPARE(d.units[6].label, std::string("1"));
}

void TstPdfReader::rintro_rotated_page() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    QVERIFY2(test::have_tool("qpdf"), "qpdf is missing: run scripts/setup.sh");
    const QString rotated = tmp_.filePath("rotated.pdf");
    bool ok = false;
    test::run_tool("qpdf", {QString::fromStdString(p.string()), "--rotate=+90", "--", rotated},
                   &ok);
    QVERIFY(ok);
    const doc::Document a = read_pdf(p.string());
    const doc::Document b = read_pdf(rotated.toStdString());
    const doc::Unit& ua = a.units[0];
    const doc::Unit& ub = b.units[0];
    QCOMPARE(ua.rotation, 0);
    QCOMPARE(ub.rotation, 90);
    QCOMPARE(ub.width, ua.height);
    QCOMPARE(ub.height, ua.width);
    QCOMPARE(test::unit_text(ub), test::unit_text(ua));
    // Turned a quarter clockwise: (x, y) on the upright page lands at (1 - y, x).
    const doc::BBox ra = *ua.blocks[0].bbox, rb = *ub.blocks[0].bbox;
    QVERIFY(qAbs(rb.x0 - (1 - ra.y1)) < 0.01f && qAbs(rb.x1 - (1 - ra.y0)) < 0.01f);
    QVERIFY(qAbs(rb.y0 - ra.x0) < 0.01f && qAbs(rb.y1 - ra.x1) < 0.01f);
    QCOMPARE(ingest::rotate_box(ra, 90).x0, 1 - ra.y1);
    // Links turn the same way (the table of contents, page i, is full of them).
    std::vector<doc::BBox> la, lb;
    for (const doc::Link& l : a.links)
        if (l.unit == 2) la.push_back(ingest::rotate_box(l.bbox, 90));
    for (const doc::Link& l : b.links)
        if (l.unit == 2) lb.push_back(l.bbox);
    QVERIFY(la.size() > 10);
    QCOMPARE(lb.size(), la.size());
    for (size_t i = 0; i < la.size(); ++i) {
        QVERIFY(qAbs(la[i].x0 - lb[i].x0) < 0.01f && qAbs(la[i].y0 - lb[i].y0) < 0.01f);
        QVERIFY(qAbs(la[i].x1 - lb[i].x1) < 0.01f && qAbs(la[i].y1 - lb[i].y1) < 0.01f);
    }
    QString where;
    QVERIFY2(all_boxes_valid(b, &where), qPrintable(where));
}

void TstPdfReader::render_on_demand() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    const QImage img = ingest::render_page(p.string(), 0, 100);
    QVERIFY(!img.isNull());
    QVERIFY(qAbs(img.width() - 850) <= 1 && qAbs(img.height() - 1100) <= 1);  // letter at 100 DPI
    const ingest::PdfPageRenderer r(p.string());
    QVERIFY(r.page_count() > 100);
    QCOMPARE(r.render(3, 36).size(), QSize(306, 396));
    try {
        (void)r.render(r.page_count(), 72);
        QFAIL("rendering a page past the end should throw");
    } catch (const ingest::IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::Corrupt);
    }
}

void TstPdfReader::page_visuals_when_asked() {
    REQUIRE_ASSET(p, "samples/pdf/helloworld.pdf");
    ingest::IngestOptions o;
    o.render_dpi = 150;
    o.thumbnail_px = 128;
    const doc::Document d = read_pdf(p.string(), o);
    const doc::Unit& u = d.units.at(0);
    QCOMPARE(u.visuals.size(), size_t{1});
    const doc::Visual& v = u.visuals[0];
    QCOMPARE(v.kind, doc::VisualKind::PageRender);
    QCOMPARE(v.locator, std::string("page:0@150dpi"));
    QVERIFY(qAbs(v.width - u.width * 150 / 72) <= 1 && qAbs(v.height - u.height * 150 / 72) <= 1);
    QCOMPARE(v.mime, std::string("image/png"));
    const QImage thumb = QImage::fromData(v.encoded.data(), static_cast<int>(v.encoded.size()));
    QVERIFY(!thumb.isNull());
    QVERIFY(qMax(thumb.width(), thumb.height()) <= 128 &&
            qMax(thumb.width(), thumb.height()) >= 120);
}

const doc::Document& TstPdfReader::refman() {
    if (!refman_) {
        const std::filesystem::path p = test::require_asset("samples/pdf/refman.pdf");
        if (p.empty()) throw std::runtime_error("refman.pdf missing");
        QElapsedTimer t;
        t.start();
        refman_ = read_pdf(p.string(), {}, [this, &t](double f, const std::string&) {
            ++progress_calls_;
            progress_seconds_ = static_cast<double>(t.nsecsElapsed()) * 1e-9;
            fractions_monotonic_ = fractions_monotonic_ && f >= last_fraction_;
            last_fraction_ = f;
        });
        qInfo("refman.pdf: %zu pages in %.1f s, %d progress calls", refman_->units.size(),
              static_cast<double>(t.nsecsElapsed()) * 1e-9, progress_calls_);
    }
    return *refman_;
}

void TstPdfReader::refman_whole_file() {
    REQUIRE_ASSET(p, "samples/pdf/refman.pdf");
    const doc::Document& d = refman();
    QCOMPARE(d.units.size(), size_t{2415});
    QCOMPARE(d.title, std::string("refman.pdf"));  // its Info title is empty
    QCOMPARE(d.metadata.at("creator"), std::string("LaTeX with hyperref"));
    for (size_t i = 0; i < d.units.size(); ++i) QCOMPARE(d.units[i].index, static_cast<int>(i));
    QVERIFY(d.text_chars() > 4'000'000);
    QVERIFY(d.links.size() > 1000);
    QCOMPARE(d.units[0].label, std::string("I"));
    QCOMPARE(d.units[1].label, std::string("i"));
    QCOMPARE(d.units[31].label, std::string("1"));
    QString where;
    QVERIFY2(all_boxes_valid(d, &where), qPrintable(where));
    // Progress: first and last reported, fractions never go back, at most ~10 calls a second.
    QVERIFY(fractions_monotonic_);
    QCOMPARE(last_fraction_, 1.0);
    QVERIFY2(
        progress_calls_ <= 10 * progress_seconds_ + 3,
        qPrintable(QStringLiteral("%1 calls in %2 s").arg(progress_calls_).arg(progress_seconds_)));
    QVERIFY(progress_calls_ >= 2);
}

// qpdf's outline, depth first, as "level|title" (an independent reading of the same file).
static QStringList qpdf_outline(const std::string& path) {
    bool ok = false;
    const QByteArray json = test::run_tool(
        "qpdf", {"--json", "--json-key=outlines", QString::fromStdString(path)}, &ok);
    QStringList out;
    if (!ok) return out;
    std::function<void(const QJsonArray&, int)> walk = [&](const QJsonArray& items, int level) {
        for (const QJsonValue& v : items) {
            out << QStringLiteral("%1|%2").arg(level).arg(
                v[QLatin1String("title")].toString().simplified());
            walk(v[QLatin1String("kids")].toArray(), level + 1);
        }
    };
    walk(QJsonDocument::fromJson(json)[QLatin1String("outlines")].toArray(), 0);
    return out;
}

void TstPdfReader::refman_outline() {
    REQUIRE_ASSET(p, "samples/pdf/refman.pdf");
    QVERIFY2(test::have_tool("qpdf"), "qpdf is missing: run scripts/setup.sh");
    const doc::Document& d = refman();
    QStringList ours;
    for (const doc::OutlineEntry& e : d.outline) {
        ours << QStringLiteral("%1|%2").arg(e.level).arg(QString::fromStdString(e.title));
        QVERIFY2(e.unit >= 0 && e.unit < 2415, e.title.c_str());
    }
    const QStringList theirs = qpdf_outline(p.string());
    QCOMPARE(theirs.size(), 1426);
    QCOMPARE(ours, theirs);
    // Targets, resolved through the named destinations: the contents on page i (index 1), the
    // base package's chapter on page 1 (index 31), and in document order.
    QCOMPARE(d.outline[0].title, std::string("Contents"));
    QCOMPARE(d.outline[0].unit, 1);
    QCOMPARE(d.outline[1].title, std::string("The base package"));
    QCOMPARE(d.outline[1].unit, 31);
    int last = -1, back = 0;
    for (const doc::OutlineEntry& e : d.outline) {
        back += e.unit < last ? 1 : 0;
        last = e.unit;
    }
    QVERIFY(back < 5);
}

void TstPdfReader::refman_page_text_data() {
    QTest::addColumn<int>("page");  // 1-based
    for (int page : {1, 10, 500, 2000, 2415})
        QTest::newRow(qPrintable(QString::number(page))) << page;
}

void TstPdfReader::refman_page_text() {
    QFETCH(int, page);
    REQUIRE_ASSET(p, "samples/pdf/refman.pdf");
    const doc::Document& d = refman();
    bool ok = false;
    const auto reference = test::word_bag(test::pdftotext_page(p.string(), page, &ok));
    QVERIFY2(ok, "pdftotext (poppler-utils) failed: run scripts/setup.sh");
    const auto ours = test::word_bag(test::unit_text(d.units.at(static_cast<size_t>(page - 1))));
    const double recall = test::bag_recall(ours, reference);
    const double precision = test::bag_recall(reference, ours);
    qInfo("page %d: %d words (pdftotext %d), recall %.4f, precision %.4f", page,
          test::bag_size(ours), test::bag_size(reference), recall, precision);
    QVERIFY(test::bag_size(reference) > 0);
    QVERIFY(recall >= 0.98);
    QVERIFY(precision >= 0.98);
}

void TstPdfReader::refman_cancel() {
    REQUIRE_ASSET(p, "samples/pdf/refman.pdf");
    std::atomic<bool> cancel{false};
    QElapsedTimer t;
    t.start();
    double cancelled_at_s = 0, cancelled_at_fraction = 0;
    try {
        read_pdf(
            p.string(), {},
            [&](double f, const std::string&) {
                if (f >= 0.05 && !cancel) {
                    cancelled_at_s = static_cast<double>(t.nsecsElapsed()) * 1e-9;
                    cancelled_at_fraction = f;
                    cancel = true;
                }
            },
            &cancel);
        QFAIL("the read should have been cancelled");
    } catch (const ingest::IngestError& e) {
        QCOMPARE(e.kind(), IngestErrorKind::Cancelled);
        QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("refman.pdf")));
    }
    QVERIFY(cancel);
    // It stopped within ~50 pages of the cancellation: time after it <= 50 pages' worth.
    const double per_page = cancelled_at_s / (cancelled_at_fraction * 2415);
    const double after = static_cast<double>(t.nsecsElapsed()) * 1e-9 - cancelled_at_s;
    qInfo("cancelled at %.1f%% after %.2f s; stopped %.3f s later (%.1f ms/page)",
          cancelled_at_fraction * 100, cancelled_at_s, after, per_page * 1e3);
    QVERIFY(after <= 50 * per_page + 0.5);
}

void TstPdfReader::hostile_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QByteArray>("bytes");  // the file's contents; empty: made from a sample
    QTest::addColumn<int>("expected");      // an IngestErrorKind, or -1: reads (sanely)

    const int ok = -1;
    QTest::newRow("truncated R-intro (30%)") << "truncated.pdf" << QByteArray() << ok;
    QTest::newRow("random bytes") << "random.pdf" << random_bytes(20000)
                                  << int(IngestErrorKind::Unsupported);
    QTest::newRow("empty file") << "empty.pdf" << QByteArray() << int(IngestErrorKind::Unsupported);
    QTest::newRow("header then garbage")
        << "garbage.pdf"
        << "%PDF-1.4\n" + random_bytes(5000) << int(IngestErrorKind::Corrupt);
    QTest::newRow("no pages") << "nopages.pdf"
                              << test::make_pdf({"<< /Type /Catalog /Pages 2 0 R >>",
                                                 "<< /Type /Pages /Kids [] /Count 0 >>"})
                              << int(IngestErrorKind::Corrupt);
    // An /Encrypt dictionary whose /U matches no password: Poppler cannot open it without one.
    const QByteArray u = random_bytes(32).toHex(), o = random_bytes(32).toHex();
    QTest::newRow("encrypted (hand-made)")
        << "encrypted_hand.pdf"
        << test::make_pdf(
               {"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
                "<< /Filter /Standard /V 1 /R 2 /O <" + o + "> /U <" + u + "> /P -4 >>"},
               "/Encrypt 4 0 R /ID [<0123456789abcdef0123456789abcdef> "
               "<0123456789abcdef0123456789abcdef>]")
        << int(IngestErrorKind::Encrypted);
    QTest::newRow("encrypted (qpdf, AES-256)")
        << "encrypted_qpdf.pdf" << QByteArray() << int(IngestErrorKind::Encrypted);
    QTest::newRow("absurd MediaBox with text")
        << "huge_text.pdf" << test::make_simple_pdf(1e7, 1e7, "Huge page") << ok;
    QTest::newRow("absurd MediaBox, blank (OCR path)")
        << "huge_blank.pdf" << test::make_simple_pdf(1e7, 1e7, {}) << ok;
    QTest::newRow("negative MediaBox")
        << "negative.pdf" << test::make_simple_pdf(-500, -500, "Negative") << ok;
}

void TstPdfReader::hostile() {
    QFETCH(QString, file);
    QFETCH(QByteArray, bytes);
    QFETCH(int, expected);
    const QString path = tmp_.filePath(file);
    if (file == QLatin1String("truncated.pdf")) {
        REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
        QFile in(QString::fromStdString(p.string()));
        QVERIFY(in.open(QIODevice::ReadOnly));
        bytes = in.read(in.size() * 3 / 10);
    }
    if (file == QLatin1String("encrypted_qpdf.pdf")) {
        REQUIRE_ASSET(p, "samples/pdf/helloworld.pdf");
        QVERIFY2(test::have_tool("qpdf"), "qpdf is missing: run scripts/setup.sh");
        bool ran = false;
        test::run_tool(
            "qpdf",
            {"--encrypt", "user", "owner", "256", "--", QString::fromStdString(p.string()), path},
            &ran);
        QVERIFY(ran);
    } else {
        QFile out(path);
        QVERIFY(out.open(QIODevice::WriteOnly));
        QCOMPARE(out.write(bytes), bytes.size());
    }

    ingest::IngestOptions o;
    o.render_dpi = 150;  // renders and thumbnails must stay within budget too
    o.thumbnail_px = 64;
    std::string message;
    const auto kind = read_error(path.toStdString(), o, &message);
    if (expected >= 0) {
        QVERIFY2(kind, "read a file that should fail");
        QVERIFY2(int(*kind) == expected, message.c_str());
        QVERIFY2(QString::fromStdString(message).startsWith(path), message.c_str());
        if (*kind == IngestErrorKind::Encrypted)
            QVERIFY(QString::fromStdString(message).contains(QStringLiteral("needs a password")));
        return;
    }
    if (kind) {
        // A damaged file may fail, but only as damaged.
        QVERIFY2(*kind == IngestErrorKind::Corrupt, message.c_str());
        qInfo("%s: %s", qPrintable(file), message.c_str());
        return;
    }
    const doc::Document d = read_pdf(path.toStdString(), o);
    QVERIFY(!d.units.empty());
    QString where;
    QVERIFY2(all_boxes_valid(d, &where), qPrintable(where));
    for (const doc::Unit& u : d.units) {
        for (const doc::Visual& v : u.visuals) {
            QVERIFY(v.width <= ingest::kMaxRenderSide && v.height <= ingest::kMaxRenderSide);
            QVERIFY(double(v.width) * v.height <= ingest::kMaxRenderPixels * 1.01);
        }
    }
    qInfo("%s: %zu pages, %zu characters, page 1 %gx%g pt", qPrintable(file), d.units.size(),
          d.text_chars(), double(d.units[0].width), double(d.units[0].height));
    if (file == QLatin1String("huge_text.pdf"))
        QVERIFY(test::unit_text(d.units[0]).contains(QStringLiteral("Huge page")));
}

void TstPdfReader::page_cap() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    ingest::IngestOptions o;
    o.max_pages = 10;
    std::string message;
    QCOMPARE(read_error(p.string(), o, &message), std::optional(IngestErrorKind::TooLarge));
    QVERIFY2(QString::fromStdString(message).contains(QStringLiteral("over the limit of 10")),
             message.c_str());
}

QTEST_MAIN(TstPdfReader)
#include "tst_pdf_reader.moc"
