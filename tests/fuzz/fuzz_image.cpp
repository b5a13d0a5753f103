// libFuzzer target for the image reader (ingest/image) with OCR off: the PNG and JPEG structure
// walks that refuse truncated files (png_is_complete, jpeg_is_complete: pure functions over the
// bytes, run on every input directly as well), the dimension caps read from the header, Qt's
// decoders as the reader drives them, text keys into metadata, and the thumbnail. Any bytes either
// read into a Document or throw sl::ingest::IngestError; anything else (a crash, a sanitizer
// report, another exception, a huge allocation, a hang) is a bug. Qt's image plugins are the
// system's (not instrumented).
//
// The input goes through the reader as a user's file does: it is written to a temporary file
// without an extension (in /dev/shm when there is one), so Qt picks the decoder by content.
// Images over 4 megapixels by their header are left to the unit tests (tst_ocr_image checks the
// caps): decoding them takes long enough to drown the fuzzer.
// Seeds: tests/fuzz/corpus/fuzz_image (tiny PNG, JPEG, BMP, TIFF, WebP files written by
// tests/fuzz/make_seeds.py).
#include <unistd.h>

#include <QImageReader>
#include <QString>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "ingest/image/image_integrity.h"
#include "ingest/image/image_reader.h"
#include "ingest/ingest_error.h"

namespace {

std::filesystem::path temp_path() {
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                          ? "/dev/shm"
                                          : std::filesystem::temp_directory_path();
    return dir / ("sightline-fuzz-image-" + std::to_string(::getpid()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::filesystem::path path = temp_path();
    static const std::unique_ptr<sl::ingest::Reader> reader = sl::ingest::make_image_reader();

    const bool png = size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0;
    const bool png_complete = sl::ingest::png_is_complete(data, size);
    volatile bool complete = sl::ingest::jpeg_is_complete(data, size);
    (void)complete;

    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) __builtin_trap();
        if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
        std::fclose(f);
    }
    if (!png || png_complete) {  // the reader refuses an incomplete PNG before Qt sees it; so does this peek
        QImageReader peek(QString::fromStdString(path.string()));
        const QSize s = peek.size();
        if (s.isValid() && int64_t{s.width()} * s.height() > 4'000'000) return 0;
    }
    sl::ingest::IngestOptions options;
    options.ocr = false;
    options.thumbnail_px = 32;
    sl::ingest::IngestContext ctx(options);
    try {
        const sl::doc::Document d = reader->read(path.string(), ctx);
        // Everything the reader hands out must be well-formed.
        if (d.units.size() != 1 || d.kind != sl::doc::DocumentKind::Image) __builtin_trap();
        const sl::doc::Unit& u = d.units[0];
        if (!(u.width >= 1 && u.height >= 1) || u.width > sl::ingest::kMaxImageSide ||
            u.height > sl::ingest::kMaxImageSide)
            __builtin_trap();
        if (u.visuals.size() != 1 || !u.blocks.empty()) __builtin_trap();
        volatile size_t sum = u.visuals[0].encoded.size();
        for (const auto& [k, v] : d.metadata) sum = sum + k.size() + v.size();
    } catch (const sl::ingest::IngestError&) {
    }
    return 0;
}
