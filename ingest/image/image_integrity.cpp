#include "ingest/image/image_integrity.h"

#include <cstring>

namespace sl::ingest {

namespace {

uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Bits per pixel of a PNG from its IHDR (colour type and bit depth); 0 when unknown.
uint64_t png_bits_per_pixel(const uint8_t* data, size_t size) {
    // signature (8), IHDR length (4) and type (4), width (4), height (4), depth, colour type.
    if (size < 26 || std::memcmp(data + 12, "IHDR", 4) != 0) return 0;
    const uint64_t depth = data[24];
    switch (data[25]) {
        case 0: return depth;      // grey
        case 2: return 3 * depth;  // RGB
        case 3: return depth;      // palette
        case 4: return 2 * depth;  // grey + alpha
        case 6: return 4 * depth;  // RGBA
        default: return 0;
    }
}

// Whether the first frame header (SOFn) of a JPEG says arithmetic coding (SOF9..SOF15 but DAC).
bool jpeg_is_arithmetic(const uint8_t* data, size_t size) {
    size_t pos = 2;
    while (pos + 4 <= size && data[pos] == 0xFF) {
        const uint8_t m = data[pos + 1];
        if (m == 0xFF) {
            ++pos;
            continue;
        }
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) return m >= 0xC9;
        if (m == 0xDA || m == 0xD9) return false;  // a scan before any frame header: not ours to judge
        const size_t len = (size_t{data[pos + 2]} << 8) | data[pos + 3];
        if (len < 2) return false;
        pos += 2 + len;
    }
    return false;
}

}  // namespace

uint64_t min_plausible_bytes(const uint8_t* data, size_t size, uint64_t w, uint64_t h) {
    if (size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0) {
        const uint64_t bpp = png_bits_per_pixel(data, size);
        if (bpp == 0) return 0;
        const uint64_t raw = h * (1 + (w * bpp + 7) / 8);  // a filter byte per row
        return raw / 1032;
    }
    if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) {
        if (jpeg_is_arithmetic(data, size)) return 0;
        const uint64_t blocks = ((w + 7) / 8) * ((h + 7) / 8);
        return blocks / 8;  // one bit per block of the first component
    }
    return 0;
}

ImageSize gif_screen_size(const uint8_t* data, size_t size) {
    if (size < 10 || (std::memcmp(data, "GIF87a", 6) != 0 && std::memcmp(data, "GIF89a", 6) != 0))
        return {};
    return {uint32_t{data[6]} | (uint32_t{data[7]} << 8), uint32_t{data[8]} | (uint32_t{data[9]} << 8)};
}

bool png_is_complete(const uint8_t* data, size_t size) {
    size_t pos = 8;  // signature
    while (pos + 12 <= size) {
        const uint64_t len = be32(data + pos);
        const bool iend = data[pos + 4] == 'I' && data[pos + 5] == 'E' && data[pos + 6] == 'N' &&
                          data[pos + 7] == 'D';
        const uint64_t next = pos + 12 + len;  // length, type, data, CRC
        if (next > size) return false;
        if (iend) return true;
        pos = static_cast<size_t>(next);
    }
    return false;
}

bool jpeg_is_complete(const uint8_t* data, size_t size) {
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return false;
    size_t pos = 2;
    while (pos + 1 < size) {
        if (data[pos] != 0xFF) {  // entropy-coded data: skip to the next real marker
            ++pos;
            continue;
        }
        const uint8_t m = data[pos + 1];
        if (m == 0xD9) return true;  // EOI
        if (m == 0xFF) {
            ++pos;
            continue;
        }                                                          // fill byte
        if (m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {  // stuffing, RSTn, TEM
            pos += 2;
            continue;
        }
        // A segment with a length: skip it (its payload may hold an EXIF thumbnail's own EOI).
        if (pos + 4 > size) return false;
        const size_t len = (size_t{data[pos + 2]} << 8) | data[pos + 3];
        if (len < 2) return false;
        pos += 2 + len;
    }
    return false;
}

}  // namespace sl::ingest
