#include "ingest/slides/zip_picture.h"

#include <QBuffer>
#include <QImage>
#include <QImageReader>

#include <algorithm>
#include <cctype>

#include "ingest/ingest_error.h"

namespace sl::ingest {

namespace {

constexpr int64_t kHeaderBytes = 256 * 1024;  // enough for PNG/GIF/BMP/most JPEG headers
constexpr int64_t kMaxThumbnailSource = int64_t{32} << 20;
constexpr int64_t kMaxThumbnailPixels = int64_t{64} << 20;

std::string lower_extension(const std::string& name) {
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos || name.find('/', dot) != std::string::npos) return {};
    std::string ext = name.substr(dot + 1);
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext;
}

QSize header_size(const QByteArray& bytes) {
    QBuffer buf;
    buf.setData(bytes);
    if (!buf.open(QIODevice::ReadOnly)) return {};
    QImageReader r(&buf);
    return r.size();
}

}  // namespace

std::string mime_for_name(const std::string& name) {
    const std::string ext = lower_extension(name);
    if (ext == "png") return "image/png";
    if (ext == "jpg" || ext == "jpeg" || ext == "jpe" || ext == "jfif") return "image/jpeg";
    if (ext == "gif") return "image/gif";
    if (ext == "bmp") return "image/bmp";
    if (ext == "tif" || ext == "tiff") return "image/tiff";
    if (ext == "webp") return "image/webp";
    if (ext == "svg") return "image/svg+xml";
    if (ext == "emf") return "image/emf";
    if (ext == "wmf") return "image/wmf";
    return "application/octet-stream";
}

doc::Visual picture_visual(ZipArchive& zip, const std::string& entry,
                           const std::optional<doc::BBox>& bbox, const IngestOptions& options) {
    doc::Visual v;
    v.kind = doc::VisualKind::Picture;
    v.bbox = bbox;
    v.locator = "zip:" + entry;
    v.mime = mime_for_name(entry);
    if (!zip.contains(entry)) return v;

    const bool thumbnail = options.thumbnail_px > 0;
    QByteArray bytes;
    try {
        bytes = zip.read_prefix(entry, thumbnail ? kMaxThumbnailSource + 1 : kHeaderBytes);
    } catch (const IngestError& e) {
        if (e.kind() == IngestErrorKind::TooLarge) throw;
        return v;  // a damaged or encrypted picture does not spoil the deck
    }
    const bool complete = bytes.size() <= kMaxThumbnailSource;
    if (thumbnail && !complete) bytes.truncate(static_cast<qsizetype>(kHeaderBytes));

    const QSize size = header_size(bytes);
    if (!size.isValid()) return v;
    v.width = size.width();
    v.height = size.height();
    if (!thumbnail || !complete || int64_t{v.width} * int64_t{v.height} > kMaxThumbnailPixels)
        return v;

    QBuffer buf;
    buf.setData(bytes);
    if (!buf.open(QIODevice::ReadOnly)) return v;
    QImageReader r(&buf);
    const int px = options.thumbnail_px;
    if (v.width > px || v.height > px)
        r.setScaledSize(size.scaled(px, px, Qt::KeepAspectRatio).expandedTo(QSize(1, 1)));
    QImage img = r.read();
    if (img.isNull()) return v;
    if (img.width() > px || img.height() > px)
        img = img.scaled(px, px, Qt::KeepAspectRatio, Qt::SmoothTransformation);
    const bool jpeg = v.mime == "image/jpeg";
    QByteArray out;
    QBuffer sink(&out);
    if (!sink.open(QIODevice::WriteOnly)) return v;
    if (!img.save(&sink, jpeg ? "JPEG" : "PNG", jpeg ? 80 : -1)) return v;
    v.mime = jpeg ? "image/jpeg" : "image/png";
    v.encoded.assign(out.begin(), out.end());
    return v;
}

}  // namespace sl::ingest
