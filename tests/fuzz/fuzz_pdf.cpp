// libFuzzer target for the PDF reader through the ingest path (ingest/pdf): open_pdf's checks,
// Poppler's open, metadata, outline, page labels, page sizes and rotation, text extraction and the
// reading-order layout, links; OCR and page renders are off (they are Tesseract's and Poppler's
// rasterizer, not parsing, and cost tens of milliseconds a page). Any bytes either read into a
// Document or throw sl::ingest::IngestError; anything else (a crash, a sanitizer report, another
// exception, a huge allocation, a hang) is a bug. Poppler itself is the system's (not
// instrumented): this checks how Sightline drives it and what it makes of the results.
//
// The input goes through the reader as a user's file does: it is written to a temporary file
// (in /dev/shm when there is one).
// Seeds: tests/fuzz/corpus/fuzz_pdf (hand-made PDFs written by tests/fuzz/make_seeds.py: text,
// outline, page labels, links, rotation, compressed content streams).
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ingest/ingest_error.h"
#include "ingest/pdf/pdf_reader.h"

namespace {

std::filesystem::path temp_path() {
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                          ? "/dev/shm"
                                          : std::filesystem::temp_directory_path();
    return dir / ("sightline-fuzz-" + std::to_string(::getpid()) + ".pdf");
}

bool box_ok(const sl::doc::BBox& b) {
    return std::isfinite(b.x0) && std::isfinite(b.y0) && std::isfinite(b.x1) && std::isfinite(b.y1) &&
           b.valid();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::filesystem::path path = temp_path();
    static const std::unique_ptr<sl::ingest::Reader> reader = [] {
        ::setenv("SIGHTLINE_PDF_THREADS", "1", 1);  // deterministic runs, one Poppler document
        return sl::ingest::make_pdf_reader();
    }();
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) __builtin_trap();
        if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
        std::fclose(f);
    }
    sl::ingest::IngestOptions options;
    options.ocr = false;
    options.render_dpi = 0;
    options.thumbnail_px = 0;
    options.page_threads = 1;
    options.max_pages = 200;  // keeps each run short
    sl::ingest::IngestContext ctx(options);
    try {
        const sl::doc::Document d = reader->read(path.string(), ctx);
        // Everything the reader hands out must be well-formed.
        const int n = static_cast<int>(d.units.size());
        if (n <= 0 || n > 200 || d.kind != sl::doc::DocumentKind::Pdf) __builtin_trap();
        volatile size_t sum = d.title.size();
        for (int i = 0; i < n; ++i) {
            const sl::doc::Unit& u = d.units[static_cast<size_t>(i)];
            if (u.index != i || u.label.empty() || u.rotation % 90) __builtin_trap();
            for (const auto& b : u.blocks) {
                if (b.bbox && !box_ok(*b.bbox)) __builtin_trap();
                sum = sum + b.text.size() + (b.text.empty() ? 0 : static_cast<uint8_t>(b.text.back()));
                for (const auto& l : b.lines) sum = sum + l.text.size();
            }
        }
        for (const auto& o : d.outline)
            if (o.unit < -1 || o.unit >= n || o.level < 0) __builtin_trap();
        for (const auto& l : d.links) {
            if (l.unit < 0 || l.unit >= n || l.target_unit < -1 || l.target_unit >= n) __builtin_trap();
            sum = sum + l.uri.size();
        }
        for (const auto& [k, v] : d.metadata) sum = sum + k.size() + v.size();
    } catch (const sl::ingest::IngestError&) {
    }
    return 0;
}
