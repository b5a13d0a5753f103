#include "ingest/image/image_integrity.h"

namespace sl::ingest {

namespace {

uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

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
