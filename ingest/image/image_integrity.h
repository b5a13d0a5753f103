// Whether a PNG or JPEG file is complete: Qt's decoders accept a truncated file and fill the
// missing rows with grey, so the reader checks the structure first. Pure functions over bytes;
// thread-safe; linear in the file size, no decoding.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::ingest {

// Walks the PNG chunks from the signature to IEND; false when the data ends before IEND.
bool png_is_complete(const uint8_t* data, size_t size);

// Walks the JPEG markers (segments by their lengths, entropy-coded data by its markers) from SOI
// to the first EOI; false when the data ends before it. Data after EOI (motion photos) is fine.
bool jpeg_is_complete(const uint8_t* data, size_t size);

}  // namespace sl::ingest
