#include "ingest/image/thumbnail.h"

#include <QBuffer>

namespace sl::ingest {

QImage fit_within(const QImage& image, int max_px) {
    if (image.isNull() || max_px <= 0) return {};
    if (image.width() <= max_px && image.height() <= max_px) return image;
    return image.scaled(max_px, max_px, Qt::KeepAspectRatio, Qt::SmoothTransformation);
}

std::vector<uint8_t> encode_png(const QImage& image) {
    if (image.isNull()) return {};
    QByteArray bytes;
    QBuffer buf(&bytes);
    if (!buf.open(QIODevice::WriteOnly) || !image.save(&buf, "PNG")) return {};
    return {reinterpret_cast<const uint8_t*>(bytes.constData()),
            reinterpret_cast<const uint8_t*>(bytes.constData()) + bytes.size()};
}

}  // namespace sl::ingest
