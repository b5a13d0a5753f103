// Whether a PNG or JPEG file is complete (Qt's decoders accept a truncated file and fill the
// missing rows with grey), whether its size can hold the pixels its header claims, and the GIF
// logical screen (which Qt decodes to, whatever the first frame's size). Pure functions over bytes;
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

// The fewest bytes a PNG or Huffman-coded JPEG of w x h pixels can take: a PNG's rows through
// deflate (at most 1032:1), a JPEG's 8x8 blocks (at least one bit each, in any scan). A file
// smaller than that claims pixels it does not hold (a 244-byte JPEG "of" 10000x19999 pixels decodes
// to 200 MB of grey). 0 for other formats and for arithmetic-coded JPEGs: no bound.
uint64_t min_plausible_bytes(const uint8_t* data, size_t size, uint64_t w, uint64_t h);

// A GIF's logical screen (bytes 6..9 of the header, little-endian): Qt decodes the first frame onto
// a canvas of this size. {0, 0} when the data is not a GIF.
struct ImageSize {
    uint32_t width = 0, height = 0;
};
ImageSize gif_screen_size(const uint8_t* data, size_t size);

}  // namespace sl::ingest
