#include "app/common/visual_pixels.h"

#include <QBuffer>
#include <QImageReader>

#include <algorithm>
#include <cstring>

#include "core/library/library.h"
#include "core/util/error.h"
#include "ingest/ingest_context.h"
#include "ingest/pdf/pdf_render.h"
#include "ingest/qt_file_path.h"
#include "ingest/slides/zip_archive.h"

namespace sl::app {

namespace {

constexpr int kMaxEdge = 16384;
constexpr int64_t kMaxPictureBytes = int64_t{64} << 20;  // one embedded picture, inflated

// Reads with `reader`, scaled on decode so the longest side is at most max_px.
QImage read_scaled(QImageReader& reader, const std::string& what, int max_px) {
    const QSize size = reader.size();
    if (size.isValid() && (size.width() > kMaxEdge || size.height() > kMaxEdge))
        throw FormatError(what + ": image of " + std::to_string(size.width()) + " x " + std::to_string(size.height()) +
                          " pixels is too large (limit " + std::to_string(kMaxEdge) + " per edge)");
    if (max_px > 0 && size.isValid() && std::max(size.width(), size.height()) > max_px)
        reader.setScaledSize(size.scaled(max_px, max_px, Qt::KeepAspectRatio));
    QImage img = reader.read();
    if (img.isNull()) throw FormatError(what + ": cannot decode image: " + reader.errorString().toStdString());
    return img;
}

}  // namespace

RgbImage rgb_of(const QImage& src) {
    RgbImage out;
    if (src.isNull()) return out;
    const QImage img = src.convertToFormat(QImage::Format_RGB888);
    out.width = img.width();
    out.height = img.height();
    out.rgb.resize(static_cast<size_t>(out.width) * static_cast<size_t>(out.height) * 3);
    for (int y = 0; y < out.height; ++y)
        std::memcpy(out.rgb.data() + static_cast<size_t>(y) * static_cast<size_t>(out.width) * 3, img.constScanLine(y),
                    static_cast<size_t>(out.width) * 3);
    return out;
}

RgbImage load_rgb_file(const std::string& path) {
    const ingest::QtFilePath name(path);  // a file name need not be UTF-8
    QImageReader reader(name.qt());
    return rgb_of(read_scaled(reader, path, 0));
}

VisualPixels::VisualPixels(const Library* lib) : lib_(lib) {}
VisualPixels::~VisualPixels() = default;

std::optional<RgbImage> VisualPixels::operator()(const doc::Document& d, const doc::Unit& u, const doc::Visual& v,
                                                 int max_px) {
    const std::string& loc = v.locator;
    if (v.kind == doc::VisualKind::PageRender && loc.rfind("page:", 0) == 0) {
        auto& r = pdfs_[d.path];
        if (!r) r = std::make_unique<ingest::PdfPageRenderer>(d.path);
        const double side_pt = std::max({u.width, u.height, 1.0f});
        const int dpi = std::clamp(static_cast<int>(max_px * 72.0 / side_pt + 0.5), 1, 1200);
        QImage page = r->render(u.index, dpi);
        if (page.isNull()) return std::nullopt;
        if (std::max(page.width(), page.height()) > max_px)
            page = page.scaled(max_px, max_px, Qt::KeepAspectRatio, Qt::SmoothTransformation);
        return rgb_of(page);
    }
    if (loc.rfind("zip:", 0) == 0) {
        ingest::ZipArchive zip = ingest::ZipArchive::open_file(d.path, ingest::ZipLimits::from(ingest::IngestOptions{}));
        QByteArray bytes = zip.read(loc.substr(4), kMaxPictureBytes);
        QBuffer buf(&bytes);
        buf.open(QIODevice::ReadOnly);
        QImageReader reader(&buf);
        return rgb_of(read_scaled(reader, d.path + " (" + loc.substr(4) + ")", max_px));
    }
    if (loc == "file") {
        const ingest::QtFilePath name(d.path);
        QImageReader reader(name.qt());
        return rgb_of(read_scaled(reader, d.path, max_px));
    }
    return stored_frame(d, u, v);
}

std::optional<RgbImage> VisualPixels::stored_frame(const doc::Document& d, const doc::Unit& u, const doc::Visual& v) {
    std::vector<uint8_t> bytes = v.encoded;
    if (bytes.empty() && lib_) {
        if (doc_ids_.empty())
            for (const auto& info : lib_->list_documents()) doc_ids_[info.sha256] = info.id;
        const auto id = doc_ids_.find(d.id);
        if (id == doc_ids_.end()) return std::nullopt;
        const auto index = static_cast<int>(&v - u.visuals.data());
        if (index < 0 || static_cast<size_t>(index) >= u.visuals.size()) return std::nullopt;
        bytes = lib_->visual_bytes(id->second, u.index, index);
    }
    if (bytes.empty()) return std::nullopt;
    QImage img;
    if (!img.loadFromData(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
    return rgb_of(img);
}

}  // namespace sl::app
