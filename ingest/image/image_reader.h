// The image reader (PNG, JPEG, WebP, TIFF, BMP, GIF's first frame through Qt's image plugins): one
// Unit (kind Image, size in pixels), a Picture visual with a PNG thumbnail, and the OCR text (role
// Ocr). Hostile files: the dimensions are checked from the header before anything is decoded
// (kMaxImageSide, kMaxImagePixels, and the memory decoding takes against kImageAllocationLimitMb ->
// TooLarge; a GIF by its logical screen); truncated files, files too small for the pixels their
// header claims, and undecodable ones -> Corrupt.
//
// Threading: stateless; read() may run on several threads at once (one OcrEngine per call).
// The first read() raises Qt's process-wide QImageReader allocation limit to
// kImageAllocationLimitMb when it is lower, so that images within the caps decode.
#pragma once

#include <cstdint>
#include <memory>

#include "ingest/reader.h"

namespace sl::ingest {

inline constexpr int kMaxImageSide = 20000;
inline constexpr int64_t kMaxImagePixels = 200'000'000;
inline constexpr int kImageAllocationLimitMb = 1024;
// Larger images are decoded scaled down to this many pixels (OCR and thumbnails need no more).
inline constexpr int64_t kMaxDecodedPixels = 64'000'000;

std::unique_ptr<Reader> make_image_reader();

}  // namespace sl::ingest
