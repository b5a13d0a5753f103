// OCR (Tesseract) and the image reader: scanned copies of real PDF pages made here (rendered with
// Poppler or pdftoppm, saved in every image format, and wrapped in an image-only PDF), compared
// with the page's text layer; hostile images (absurd headers, truncated files).
#include <QBuffer>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QImageWriter>
#include <QPainter>
#include <QPdfWriter>
#include <QTemporaryDir>
#include <QTest>

#include <optional>

#include "ingest/image/image_integrity.h"
#include "ingest/image/image_reader.h"
#include "ingest/ingest_error.h"
#include "ingest/ocr/ocr_engine.h"
#include "ingest/pdf/pdf_reader.h"
#include "ingest/pdf/pdf_render.h"
#include "tests/common/test_support.h"
#include "tests/ingest/ingest_test_util.h"

using namespace sl;
using ingest::IngestErrorKind;

namespace {

doc::Document read_with(const ingest::Reader& r, const std::string& path,
                        ingest::IngestOptions o = {}) {
    ingest::IngestContext ctx(std::move(o));
    return r.read(path, ctx);
}

std::optional<IngestErrorKind> image_error(const std::string& path, std::string* message) {
    try {
        read_with(*ingest::make_image_reader(), path);
    } catch (const ingest::IngestError& e) {
        *message = e.what();
        return e.kind();
    }
    return std::nullopt;
}

uint32_t crc32(const QByteArray& data) {
    uint32_t c = 0xFFFFFFFFu;
    for (char ch : data) {
        c ^= static_cast<uint8_t>(ch);
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

QByteArray be32(uint32_t v) {
    QByteArray b(4, '\0');
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (24 - 8 * i));
    return b;
}

QByteArray png_chunk(const QByteArray& type, const QByteArray& data) {
    return be32(static_cast<uint32_t>(data.size())) + type + data + be32(crc32(type + data));
}

// A complete, well-formed PNG whose header claims w x h pixels (RGB, 8 bits) and whose data is
// far too short for it.
QByteArray png_claiming(uint32_t w, uint32_t h) {
    const QByteArray ihdr = be32(w) + be32(h) + QByteArray("\x08\x02\x00\x00\x00", 5);
    return QByteArray("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
           png_chunk("IDAT", QByteArray::fromHex("789c030000000001")) + png_chunk("IEND", {});
}

// A 16-bit RGBA PNG header claiming w x h pixels, with a little data.
QByteArray png16_claiming(uint32_t w, uint32_t h) {
    const QByteArray ihdr = be32(w) + be32(h) + QByteArray("\x10\x06\x00\x00\x00", 5);
    return QByteArray("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
           png_chunk("IDAT", QByteArray::fromHex("789c030000000001")) + png_chunk("IEND", {});
}

// A real JPEG with its frame header's height and width changed: the scan stays as it was.
QByteArray jpeg_claiming(QByteArray jpeg, uint16_t w, uint16_t h) {
    for (qsizetype i = 2; i + 9 < jpeg.size(); ++i) {
        const auto m = static_cast<uint8_t>(jpeg[i + 1]);
        if (static_cast<uint8_t>(jpeg[i]) == 0xFF && (m == 0xC0 || m == 0xC1 || m == 0xC2)) {
            jpeg[i + 5] = static_cast<char>(h >> 8);
            jpeg[i + 6] = static_cast<char>(h & 0xFF);
            jpeg[i + 7] = static_cast<char>(w >> 8);
            jpeg[i + 8] = static_cast<char>(w & 0xFF);
            return jpeg;
        }
    }
    return {};
}

// A real 2x2 GIF89a (Qt has no GIF writer): a 2-colour palette and an LZW stream.
QByteArray gif_sample() {
    return QByteArray::fromBase64("R0lGODlhAgACAIAAAAAAAP///ywAAAAAAgACAAACAoRRADs=");
}

QByteArray le(uint32_t v, int bytes) {
    QByteArray b(bytes, '\0');
    for (int i = 0; i < bytes; ++i) b[i] = static_cast<char>(v >> (8 * i));
    return b;
}

// A 54-byte BMP header (BITMAPINFOHEADER, 24 bits) claiming w x h pixels, and no pixels.
QByteArray bmp_header_claiming(uint32_t w, uint32_t h) {
    return "BM" + le(54, 4) + le(0, 4) + le(54, 4) + le(40, 4) + le(w, 4) + le(h, 4) + le(1, 2) +
           le(24, 2) + le(0, 4) + le(0, 4) + le(2835, 4) + le(2835, 4) + le(0, 4) + le(0, 4);
}

QByteArray random_bytes(qsizetype n) {
    QByteArray b(n, '\0');
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& c : b) c = static_cast<char>(byte(test::rng()));
    return b;
}

QByteArray encode(const QImage& img, const char* format, int quality = -1) {
    QByteArray out;
    QBuffer buf(&out);
    buf.open(QIODevice::WriteOnly);
    QImageWriter w(&buf, format);
    if (quality >= 0) w.setQuality(quality);
    return w.write(img) ? out : QByteArray();
}

// Every block role Ocr, its boxes (and its words') inside the unit square, confidence in (0, 1].
bool ocr_blocks_sane(const doc::Unit& u, QString* why) {
    for (const doc::Block& b : u.blocks) {
        if (b.role != doc::BlockRole::Ocr) return *why = QStringLiteral("role"), false;
        if (!b.bbox || !b.bbox->valid()) return *why = QStringLiteral("block box"), false;
        if (!(b.confidence > 0 && b.confidence <= 1)) return *why = QStringLiteral("conf"), false;
        for (const doc::Span& s : b.lines)
            if (!s.bbox.valid() || s.text.empty()) return *why = QStringLiteral("word box"), false;
    }
    return true;
}

}  // namespace

class TstOcrImage : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void engine_loads();
    void sniff_and_extensions();
    void helloworld_scan_formats_data();
    void helloworld_scan_formats();
    void rintro_page_scan();
    void image_only_pdf();
    void integrity_checks_every_cut();
    void hostile_data();
    void hostile();

private:
    QTemporaryDir tmp_;
    QImage rintro_300_;    // R-intro.pdf page 1 at 300 DPI
    QString rintro_text_;  // its text layer, by pdftotext
};

void TstOcrImage::initTestCase() {
    QVERIFY(tmp_.isValid());
}

void TstOcrImage::engine_loads() {
    ingest::OcrEngine ocr("eng");
    QVERIFY2(ocr.ready(), ocr.error().c_str());
    QVERIFY(ocr.recognize(QImage()).empty());
    QImage blank(400, 300, QImage::Format_RGB32);
    blank.fill(Qt::white);
    QVERIFY(ocr.recognize(blank, 300).empty());
    ingest::OcrEngine missing("xx-no-such-language");
    QVERIFY(!missing.ready());
    QVERIFY(
        QString::fromStdString(missing.error()).contains(QStringLiteral("xx-no-such-language")));
}

void TstOcrImage::sniff_and_extensions() {
    const auto r = ingest::make_image_reader();
    QVERIFY(r->sniff("\x89PNG\r\n\x1a\n...."));
    QVERIFY(r->sniff("\xff\xd8\xff\xe0"));
    QVERIFY(r->sniff(std::string("RIFF\x10\0\0\0WEBPVP8 ", 16)));
    QVERIFY(r->sniff(std::string("II*\0", 4)));
    QVERIFY(!r->sniff("%PDF-1.4"));
    QVERIFY(r->sniff("GIF89a\x02\x00\x02\x00"));
    for (const char* ext : {"png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif"}) {
        const auto e = r->extensions();
        QVERIFY2(std::find(e.begin(), e.end(), ext) != e.end(), ext);
    }
}

void TstOcrImage::helloworld_scan_formats_data() {
    QTest::addColumn<QByteArray>("format");
    for (const char* f : {"png", "jpeg", "webp", "tiff", "bmp"}) QTest::newRow(f) << QByteArray(f);
}

void TstOcrImage::helloworld_scan_formats() {
    QFETCH(QByteArray, format);
    REQUIRE_ASSET(p, "samples/pdf/helloworld.pdf");
    QVERIFY2(
        QImageWriter::supportedImageFormats().contains(format),
        "no Qt image plugin for this format: run scripts/setup.sh (qt6-image-formats-plugins)");
    // A scan made the way a user would: pdftoppm at 150 DPI.
    const QString png = tmp_.filePath("hello-1.png");
    if (!QFile::exists(png)) {
        bool ok = false;
        test::run_tool("pdftoppm",
                       {"-r", "150", "-f", "1", "-l", "1", "-png", "-singlefile",
                        QString::fromStdString(p.string()), tmp_.filePath("hello-1")},
                       &ok);
        QVERIFY2(ok, "pdftoppm (poppler-utils) failed: run scripts/setup.sh");
    }
    const QImage scan(png);
    QVERIFY(!scan.isNull());
    const QString path = tmp_.filePath("hello." + QString::fromLatin1(format));
    QFile out(path);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(encode(scan, format.constData(), 90));
    out.close();

    ingest::IngestOptions o;
    o.thumbnail_px = 100;
    const doc::Document d = read_with(*ingest::make_image_reader(), path.toStdString(), o);
    QCOMPARE(d.kind, doc::DocumentKind::Image);
    QCOMPARE(d.units.size(), size_t{1});
    const doc::Unit& u = d.units[0];
    QCOMPARE(u.kind, doc::UnitKind::Image);
    QCOMPARE(int(u.width), scan.width());
    QCOMPARE(int(u.height), scan.height());
    QCOMPARE(u.visuals.size(), size_t{1});
    const doc::Visual& v = u.visuals[0];
    QCOMPARE(v.kind, doc::VisualKind::Picture);
    const QImage thumb = QImage::fromData(v.encoded.data(), static_cast<int>(v.encoded.size()));
    QVERIFY(!thumb.isNull() && qMax(thumb.width(), thumb.height()) == 100);
    QString why;
    QVERIFY2(ocr_blocks_sane(u, &why), qPrintable(why));
    const QString text = test::unit_text(u);
    QVERIFY2(text.contains(QStringLiteral("Hello, world!")), qPrintable(format + ": " + text));
}

void TstOcrImage::rintro_page_scan() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    bool ok = false;
    rintro_text_ = test::pdftotext_page(p.string(), 1, &ok);
    QVERIFY2(ok, "pdftotext (poppler-utils) failed: run scripts/setup.sh");
    rintro_300_ = ingest::render_page(p.string(), 0, 300);
    QCOMPARE(rintro_300_.size(), QSize(2550, 3300));
    const QString path = tmp_.filePath("rintro-1.png");
    QVERIFY(rintro_300_.save(path));

    QElapsedTimer t;
    t.start();
    const doc::Document d = read_with(*ingest::make_image_reader(), path.toStdString());
    const double seconds = static_cast<double>(t.nsecsElapsed()) * 1e-9;
    const doc::Unit& u = d.units.at(0);
    QString why;
    QVERIFY2(ocr_blocks_sane(u, &why), qPrintable(why));
    const auto reference = test::word_bag(rintro_text_, true);
    const double recall = test::bag_recall(test::word_bag(test::unit_text(u), true), reference);
    const double exact =
        test::bag_recall(test::word_bag(test::unit_text(u)), test::word_bag(rintro_text_));
    double conf = 0;
    for (const doc::Block& b : u.blocks) conf += b.confidence / u.blocks.size();
    qInfo(
        "R-intro page 1 at 300 DPI: %zu OCR blocks, word recall %.3f (exact %.3f), mean "
        "confidence %.2f, %.1f s",
        u.blocks.size(), recall, exact, conf, seconds);
    QVERIFY(recall >= 0.80);
}

void TstOcrImage::image_only_pdf() {
    REQUIRE_ASSET(p, "samples/pdf/R-intro.pdf");
    if (rintro_300_.isNull()) rintro_300_ = ingest::render_page(p.string(), 0, 300);
    if (rintro_text_.isEmpty()) rintro_text_ = test::pdftotext_page(p.string(), 1);
    // A "scanned" PDF: the page as one picture, no text layer.
    const QString path = tmp_.filePath("scanned.pdf");
    {
        QPdfWriter w(path);
        w.setResolution(300);
        w.setPageSize(QPageSize(QPageSize::Letter));
        w.setPageMargins(QMarginsF(0, 0, 0, 0));
        QPainter painter(&w);
        painter.drawImage(QRect(0, 0, w.width(), w.height()), rintro_300_);
    }
    bool ok = false;
    const QByteArray layer = test::run_tool("pdftotext", {path, "-"}, &ok);
    QVERIFY(ok);
    QVERIFY(QString::fromUtf8(layer).trimmed().isEmpty());

    ingest::IngestOptions no_ocr;
    no_ocr.ocr = false;
    QVERIFY(read_with(*ingest::make_pdf_reader(), path.toStdString(), no_ocr)
                .units.at(0)
                .blocks.empty());

    const doc::Document d = read_with(*ingest::make_pdf_reader(), path.toStdString());
    const doc::Unit& u = d.units.at(0);
    QString why;
    QVERIFY(!u.blocks.empty());
    QVERIFY2(ocr_blocks_sane(u, &why), qPrintable(why));
    QCOMPARE(d.metadata.at("ocr_pages"), std::string("1"));
    const double recall = test::bag_recall(test::word_bag(test::unit_text(u), true),
                                           test::word_bag(rintro_text_, true));
    qInfo("image-only PDF, page 1: word recall %.3f", recall);
    QVERIFY(recall >= 0.80);
    // The title sits at the top of the page, in the middle.
    bool title_found = false;
    for (const doc::Block& b : u.blocks) {
        for (const doc::Span& s : b.lines) {
            if (s.text == "Introduction") {
                title_found = true;
                QVERIFY(s.bbox.y0 < 0.4f && s.bbox.x0 > 0.1f && s.bbox.x1 < 0.9f);
            }
        }
    }
    QVERIFY(title_found);
}

void TstOcrImage::integrity_checks_every_cut() {
    QImage img(64, 48, QImage::Format_RGB32);
    img.fill(Qt::white);
    QPainter(&img).fillRect(10, 10, 30, 20, Qt::black);
    for (const char* f : {"png", "jpeg"}) {
        const QByteArray full = encode(img, f, 80);
        QVERIFY(!full.isEmpty());
        const auto* data = reinterpret_cast<const uint8_t*>(full.constData());
        auto complete = [&](size_t n) {
            return qstrcmp(f, "png") == 0 ? ingest::png_is_complete(data, n)
                                          : ingest::jpeg_is_complete(data, n);
        };
        QVERIFY(complete(static_cast<size_t>(full.size())));
        for (qsizetype n = 0; n < full.size(); ++n)
            QVERIFY2(!complete(static_cast<size_t>(n)),
                     qPrintable(QStringLiteral("%1 cut at %2").arg(f).arg(n)));
        // Data after the end (a motion photo's video) is fine.
        const QByteArray more = full + random_bytes(3000);
        QVERIFY(qstrcmp(f, "png") == 0
                    ? ingest::png_is_complete(reinterpret_cast<const uint8_t*>(more.constData()),
                                              static_cast<size_t>(more.size()))
                    : ingest::jpeg_is_complete(reinterpret_cast<const uint8_t*>(more.constData()),
                                               static_cast<size_t>(more.size())));
    }
}

void TstOcrImage::hostile_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<int>("expected");  // an IngestErrorKind, or -1: reads

    QImage img(320, 200, QImage::Format_RGB32);
    img.fill(Qt::white);
    QPainter(&img).fillRect(20, 20, 200, 100, Qt::darkBlue);
    const QByteArray jpeg = encode(img, "jpeg", 85), png = encode(img, "png");

    QTest::newRow("PNG claiming 100000x100000")
        << "huge.png" << png_claiming(100000, 100000) << int(IngestErrorKind::TooLarge);
    QTest::newRow("PNG claiming 30000x10")
        << "wide.png" << png_claiming(30000, 10) << int(IngestErrorKind::TooLarge);
    QTest::newRow("PNG claiming 1000x1000, data for none")
        << "short.png" << png_claiming(1000, 1000) << int(IngestErrorKind::Corrupt);
    QTest::newRow("truncated JPEG")
        << "cut.jpg" << jpeg.left(jpeg.size() / 2) << int(IngestErrorKind::Corrupt);
    QTest::newRow("truncated PNG")
        << "cut.png" << png.left(png.size() * 2 / 3) << int(IngestErrorKind::Corrupt);
    // A small PNG whose text chunk claims 1.6 GB: libpng would allocate it while Qt reads the size.
    {
        const QByteArray ihdr = be32(64) + be32(48) + QByteArray("\x08\x02\x00\x00\x00", 5);
        const QByteArray text = be32(0x65000000u) + QByteArray("tEXtComment") + QByteArray(1, '\0') + "x";
        QTest::newRow("PNG whose text chunk claims 1.6 GB")
            << "claims-text.png" << QByteArray("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + text
            << int(IngestErrorKind::Corrupt);
    }
    QTest::newRow("JPEG with data after the end")
        << "motion.jpg" << jpeg + QByteArray(5000, 'x') << -1;
    QTest::newRow("random bytes") << "random.png" << QByteArray(4096, '\x5a')
                                  << int(IngestErrorKind::Unsupported);
    QTest::newRow("empty") << "empty.jpg" << QByteArray() << int(IngestErrorKind::Unsupported);
    // A complete JPEG whose frame header claims 10000x19999 pixels and holds a few bytes of scan:
    // Qt would decode it to 200 MB of grey.
    QTest::newRow("JPEG claiming 10000x19999 in a few bytes")
        << "claims.jpg" << jpeg_claiming(jpeg, 10000, 19999) << int(IngestErrorKind::Corrupt);
    // A 16-bit RGBA PNG within the pixel caps whose decoding needs 8 bytes a pixel: over the limit.
    QTest::newRow("16-bit PNG over the decoding limit")
        << "deep.png" << png16_claiming(12000, 12000) << int(IngestErrorKind::TooLarge);
    // A 4x4 GIF frame on a 16000x16000 logical screen: Qt decodes the screen (1 GB).
    QTest::newRow("GIF whose screen dwarfs its frame")
        << "screen.gif"
        << QByteArray::fromBase64("R0lGODlhBGYEAIAAAAAAAP///ywAAAAABAAEAAACAAAAAAAAAAAKRIgwYECECAMGBQA7")
        << int(IngestErrorKind::TooLarge);
    QByteArray square = gif_sample();
    square.replace(6, 4, QByteArray("\x80\x3e\x80\x3e", 4));  // a 16000x16000 screen
    QTest::newRow("GIF on a 16000x16000 screen") << "square.gif" << square << int(IngestErrorKind::TooLarge);
    QTest::newRow("GIF misnamed .png") << "gif.png" << gif_sample() << -1;
    QTest::newRow("GIF") << "small.gif" << gif_sample() << -1;
    // Highly compressible real images stay readable (the size bounds leave room for them).
    QImage white(4000, 3000, QImage::Format_RGB32);
    white.fill(Qt::white);
    QTest::newRow("uniform 4000x3000 JPEG") << "white.jpg" << encode(white, "jpeg", 10) << -1;
    QTest::newRow("uniform 4000x3000 PNG") << "white.png" << encode(white, "png") << -1;
    QImage mono = white.convertToFormat(QImage::Format_Mono);
    QTest::newRow("uniform 4000x3000 1-bit PNG") << "mono.png" << encode(mono, "png") << -1;
    // Qt's BMP handler refuses such a header outright (no size to check): damaged, not decoded.
    QTest::newRow("BMP claiming 50000x50000")
        << "huge.bmp" << bmp_header_claiming(50000, 50000) << int(IngestErrorKind::Corrupt);
}

void TstOcrImage::hostile() {
    QFETCH(QString, file);
    QFETCH(QByteArray, bytes);
    QFETCH(int, expected);
    const QString path = tmp_.filePath(file);
    QFile out(path);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(bytes);
    out.close();
    std::string message;
    const auto kind = image_error(path.toStdString(), &message);
    if (expected < 0) {
        QVERIFY2(!kind, message.c_str());
        return;
    }
    QVERIFY2(kind, "read a file that should fail");
    QVERIFY2(int(*kind) == expected, message.c_str());
    QVERIFY2(QString::fromStdString(message).startsWith(path), message.c_str());
    qInfo("%s: %s", qPrintable(file), message.c_str());
}

QTEST_MAIN(TstOcrImage)
#include "tst_ocr_image.moc"
