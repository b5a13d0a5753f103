// Small encoded images kept in visuals (Visual::encoded): thumbnails of pages, pictures, frames.
// Pure functions; thread-safe (QImage is reentrant).
#pragma once

#include <QImage>

#include <cstdint>
#include <vector>

namespace sl::ingest {

// `image` scaled down (never up) so that its longest side is at most `max_px`; smooth.
QImage fit_within(const QImage& image, int max_px);

// `image` as PNG bytes; empty on failure.
std::vector<uint8_t> encode_png(const QImage& image);

}  // namespace sl::ingest
