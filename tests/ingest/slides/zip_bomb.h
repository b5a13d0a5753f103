// A real zip bomb for the tests: `gib` GiB of zeros deflated into about 1 MiB per GiB, built in
// milliseconds by repeating one full-flushed deflate block (identical input after a full flush
// deflates to identical bytes) instead of deflating the whole stream.
#pragma once

#include <QByteArray>

#include <stdexcept>
#include <string>
#include <zlib.h>

#include "tests/ingest/slides/pptx_fixture.h"

namespace sl::test::pptx {

inline ZipItem zeros_bomb(const std::string& name, int mib) {
    const QByteArray zeros(1 << 20, '\0');
    z_stream s{};
    if (deflateInit2(&s, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("deflateInit2");
    auto pump = [&](const QByteArray& in, int flush) {
        QByteArray out;
        s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.constData()));
        s.avail_in = static_cast<uInt>(in.size());
        char buf[1 << 16];
        do {
            s.next_out = reinterpret_cast<Bytef*>(buf);
            s.avail_out = sizeof buf;
            deflate(&s, flush);
            out.append(buf, static_cast<qsizetype>(sizeof buf - s.avail_out));
        } while (s.avail_out == 0);
        return out;
    };
    const QByteArray block = pump(zeros, Z_FULL_FLUSH);
    QByteArray raw;
    raw.reserve(block.size() * mib + 16);
    for (int i = 0; i < mib; ++i) raw.append(block);
    raw.append(pump(QByteArray(), Z_FINISH));
    deflateEnd(&s);
    uLong crc1 = ::crc32(0L, reinterpret_cast<const Bytef*>(zeros.constData()),
                         static_cast<uInt>(zeros.size()));
    uLong crc = 0;
    for (int i = 0; i < mib; ++i) crc = crc32_combine(crc, crc1, zeros.size());
    ZipItem item;
    item.name = name;
    item.raw = raw;
    item.crc = static_cast<uint32_t>(crc);
    item.size = static_cast<uint64_t>(mib) << 20;
    return item;
}

}  // namespace sl::test::pptx
