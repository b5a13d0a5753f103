#include "ingest/image/image_reader.h"

#include <QFile>
#include <QImageReader>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

#include "core/util/sha256.h"
#include "ingest/image/image_integrity.h"
#include "ingest/image/thumbnail.h"
#include "ingest/ingest_error.h"
#include "ingest/ocr/ocr_engine.h"
#include "ingest/qt_file_path.h"

namespace sl::ingest {

namespace {

// Images larger than this are scaled down before OCR (Tesseract needs no more, and is slow).
constexpr int64_t kMaxOcrPixels = 25'000'000;

void raise_allocation_limit() {
    static std::once_flag once;
    std::call_once(once, [] {
        const int now = QImageReader::allocationLimit();
        if (now != 0 && now < kImageAllocationLimitMb)
            QImageReader::setAllocationLimit(kImageAllocationLimitMb);
    });
}

std::string dimensions(int64_t w, int64_t h) {
    return std::to_string(w) + "x" + std::to_string(h);
}

// What the bytes say before Qt reads them: whether a PNG or JPEG is complete (Qt's decoders fill
// a truncated file with grey, and libpng allocates what a chunk's length claims even in
// QImageReader::size(): a 277-byte PNG "with" a 1.6 GB text chunk), the GIF canvas Qt decodes to
// (QImageReader's size() is the first frame's), and, once the size is known, whether the file is
// large enough for the pixels its header claims.
class FileFacts {
public:
    explicit FileFacts(QFile& f) : f_(f), bytes_(f.size()) {
        if (bytes_ >= 8) data_ = f.map(0, bytes_);
    }
    ~FileFacts() {
        if (data_) f_.unmap(data_);
    }
    FileFacts(const FileFacts&) = delete;
    FileFacts& operator=(const FileFacts&) = delete;

    // Empty when the structure is sound (or the file cannot be mapped: the decoder judges).
    std::string truncation() const {
        if (!data_) return {};  // under 8 bytes, or not mappable: Qt judges
        const auto n = static_cast<size_t>(bytes_);
        const bool png = std::memcmp(data_, "\x89PNG\r\n\x1a\n", 8) == 0;
        const bool jpeg = data_[0] == 0xFF && data_[1] == 0xD8;
        if ((png && !png_is_complete(data_, n)) || (jpeg && !jpeg_is_complete(data_, n)))
            return "the image is truncated (it ends before its end-of-image marker, or a part claims more bytes "
                   "than the file has)";
        return {};
    }
    // The size Qt will decode to: a GIF's logical screen when larger than its first frame.
    QSize canvas(QSize size) const {
        if (!data_) return size;
        const ImageSize gif = gif_screen_size(data_, static_cast<size_t>(bytes_));
        if (gif.width == 0 && gif.height == 0) return size;
        return QSize(std::max<int>(size.width(), static_cast<int>(std::min<uint32_t>(gif.width, 65535))),
                     std::max<int>(size.height(), static_cast<int>(std::min<uint32_t>(gif.height, 65535))));
    }
    // Empty when the file can hold w x h pixels.
    std::string too_small_for(QSize size) const {
        if (!data_) return {};
        const auto n = static_cast<size_t>(bytes_);
        const uint64_t least = min_plausible_bytes(data_, n, static_cast<uint64_t>(size.width()),
                                                   static_cast<uint64_t>(size.height()));
        if (least <= n) return {};
        return "the header claims " + dimensions(size.width(), size.height()) + " pixels, which cannot fit in " +
               std::to_string(n) + " bytes (at least " + std::to_string(least) + " are needed)";
    }

private:
    QFile& f_;
    qint64 bytes_ = 0;
    uchar* data_ = nullptr;
};

// Bits a pixel of this reader's decoded format takes (32 when Qt cannot say before decoding).
int bits_per_pixel(const QImageReader& reader) {
    const QImage::Format format = reader.imageFormat();
    const int bits = format == QImage::Format_Invalid ? 0 : QImage::toPixelFormat(format).bitsPerPixel();
    return bits > 0 ? bits : 32;
}

class ImageReader final : public Reader {
public:
    const char* name() const override { return "image"; }
    std::vector<std::string> extensions() const override {
        return {"png", "jpg", "jpeg", "webp", "tif", "tiff", "bmp", "gif"};
    }
    bool sniff(const std::string& h) const override {
        auto is = [&](const char* m, size_t n, size_t at = 0) {
            return h.size() >= at + n && h.compare(at, n, m, n) == 0;
        };
        return is("\x89PNG\r\n\x1a\n", 8) || is("\xff\xd8\xff", 3) ||
               (is("RIFF", 4) && is("WEBP", 4, 8)) || is("II*\0", 4) || is("MM\0*", 4) ||
               is("BM", 2) || is("GIF87a", 6) || is("GIF89a", 6);
    }
    doc::Document read(const std::string& path, IngestContext& ctx) const override;
};

doc::Document ImageReader::read(const std::string& path, IngestContext& ctx) const {
    ctx.check_cancelled(path);
    raise_allocation_limit();
    const QtFilePath name(path);  // a file name need not be UTF-8
    const QString& qpath = name.qt();
    QFile file(qpath);
    if (!file.open(QIODevice::ReadOnly))
        throw IngestError(IngestErrorKind::Io, path,
                          "cannot open: " + file.errorString().toStdString());

    const FileFacts facts(file);
    if (const std::string damage = facts.truncation(); !damage.empty())
        throw IngestError(IngestErrorKind::Corrupt, path, damage);

    QImageReader reader(qpath);
    reader.setAutoTransform(true);
    const QByteArray format = reader.format();
    if (format.isEmpty()) {
        const QString ext = QString::fromStdString(extension_of(path));
        const bool plugin = ext == QLatin1String("webp") || ext == QLatin1String("tif") ||
                            ext == QLatin1String("tiff");
        throw IngestError(IngestErrorKind::Unsupported, path,
                          plugin && !QImageReader::supportedImageFormats().contains(ext.toLatin1())
                              ? "no Qt plugin for this image format (install "
                                "qt6-image-formats-plugins)"
                              : "not an image Sightline reads (or a damaged one)");
    }
    const QSize frame = reader.size();
    if (!frame.isValid() || frame.isEmpty())
        throw IngestError(IngestErrorKind::Corrupt, path, "cannot read the image's dimensions");
    const QSize size = facts.canvas(frame);  // a GIF decodes to its logical screen
    const bool gif_canvas = size != frame;
    const int64_t pixels = int64_t{size.width()} * size.height();
    if (size.width() > kMaxImageSide || size.height() > kMaxImageSide || pixels > kMaxImagePixels)
        throw IngestError(IngestErrorKind::TooLarge, path,
                          "the image is " + dimensions(size.width(), size.height()) +
                              " pixels, over the limit of " + std::to_string(kMaxImageSide) +
                              " per side and " + std::to_string(kMaxImagePixels / 1'000'000) +
                              " megapixels");
    double scale = 1.0;
    QSize target = size;
    if (pixels > kMaxDecodedPixels && !gif_canvas) {
        scale = std::sqrt(static_cast<double>(kMaxDecodedPixels) / static_cast<double>(pixels));
        target = QSize(std::max(1, static_cast<int>(size.width() * scale)),
                        std::max(1, static_cast<int>(size.height() * scale)));
        reader.setScaledSize(target);
    }
    // JPEG scales while it decodes (DCT scaling); the other handlers decode the whole image first.
    const bool scales_natively = format == "jpeg" || format == "jpg";
    const QSize held = scales_natively ? target : size;
    const int bits = bits_per_pixel(reader);
    const int64_t need = (int64_t{held.width()} * bits + 31) / 32 * 4 * held.height();  // Qt's rows
    if (need > int64_t{kImageAllocationLimitMb} << 20)
        throw IngestError(IngestErrorKind::TooLarge, path,
                          "decoding the " + dimensions(size.width(), size.height()) + " image (" +
                              std::to_string(bits) + " bits per pixel) needs " +
                              std::to_string(need >> 20) + " MiB, over the limit of " +
                              std::to_string(kImageAllocationLimitMb) + " MiB");
    if (const std::string damage = facts.too_small_for(frame); !damage.empty())
        throw IngestError(IngestErrorKind::Corrupt, path, damage);
    ctx.progress(0.0, "decoding");
    QImage img;
    try {
        img = reader.read();
    } catch (const std::bad_alloc&) {
        throw IngestError(IngestErrorKind::TooLarge, path,
                          "the image needs more memory than there is");
    }
    if (img.isNull())
        throw IngestError(IngestErrorKind::Corrupt, path,
                          "cannot decode the image: " + reader.errorString().toStdString());
    if (int64_t{img.width()} * img.height() > pixels)  // EXIF may swap the sides, not add pixels
        throw IngestError(IngestErrorKind::Corrupt, path,
                          "the image decoded to " + dimensions(img.width(), img.height()) +
                              " pixels, more than its header's " +
                              dimensions(size.width(), size.height()));

    doc::Document d;
    d.path = path;
    d.kind = doc::DocumentKind::Image;
    d.id = sha256_file_hex(path);
    d.title = file_name_of(path);
    d.metadata["format"] = format.toStdString();
    for (const QString& key : img.textKeys()) {
        const QString value = img.text(key).simplified().left(1000);
        if (!value.isEmpty()) d.metadata[key.toLower().toStdString()] = value.toStdString();
    }

    doc::Unit u;
    u.kind = doc::UnitKind::Image;
    u.index = 0;
    u.label = "1";
    // The size of the whole image as displayed (after EXIF orientation), even when decoded smaller.
    u.width = static_cast<float>(std::lround(img.width() / scale));
    u.height = static_cast<float>(std::lround(img.height() / scale));
    d.metadata["width"] = std::to_string(static_cast<int>(u.width));
    d.metadata["height"] = std::to_string(static_cast<int>(u.height));

    doc::Visual v;
    v.kind = doc::VisualKind::Picture;
    v.bbox = doc::BBox{0, 0, 1, 1};
    v.width = static_cast<int>(u.width);
    v.height = static_cast<int>(u.height);
    v.locator = "file";  // the document's own file
    if (ctx.options().thumbnail_px > 0) {
        v.encoded = encode_png(fit_within(img, ctx.options().thumbnail_px));
        if (!v.encoded.empty()) v.mime = "image/png";
    }
    u.visuals.push_back(std::move(v));

    if (ctx.options().ocr) {
        ctx.check_cancelled(path);
        ctx.progress(0.2, "recognizing text");
        OcrEngine ocr(ctx.options().ocr_language);
        if (!ocr.ready()) {
            d.metadata["ocr_error"] = ocr.error();
        } else {
            QImage input = img;
            const int64_t decoded = int64_t{img.width()} * img.height();
            if (decoded > kMaxOcrPixels) {
                const double s = std::sqrt(static_cast<double>(kMaxOcrPixels) / decoded);
                input = img.scaled(static_cast<int>(img.width() * s),
                                   static_cast<int>(img.height() * s), Qt::KeepAspectRatio,
                                   Qt::SmoothTransformation);
            }
            const double dpm = img.dotsPerMeterX();
            int dpi = static_cast<int>(std::lround(dpm * 0.0254 * input.width() / img.width()));
            if (dpi < 70 || dpi > 1200) dpi = 0;  // absent or implausible: let Tesseract estimate
            u.blocks = ocr.recognize(input, dpi, [&ctx] { return ctx.cancelled(); });
            ctx.check_cancelled(path);
        }
    }
    d.units.push_back(std::move(u));
    ctx.progress(1.0, "done");
    return d;
}

}  // namespace

std::unique_ptr<Reader> make_image_reader() {
    return std::make_unique<ImageReader>();
}

}  // namespace sl::ingest
