// libFuzzer target for the PPTX reader and its zip layer: any bytes either read into a Document or
// throw sl::ingest::IngestError; anything else (a crash, a sanitizer report, another exception, a
// huge allocation, a hang) is a bug.
//
// Two kinds of input:
// - a zip (anything not starting with "SLPK"): the zip layer and the reader as a user meets them;
// - "SLPK" then parts, each "\n@@ <name>\n<bytes>": packed here into a stored zip with correct
//   CRCs (tests/fuzz/fuzz_zip_pack.h), so that mutations of the XML reach the parsers instead of
//   failing libzip's CRC check.
// Seeds: tests/fuzz/corpus/fuzz_pptx (written by tst_pptx_reader's writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/ingest_error.h"
#include "ingest/slides/pptx_reader.h"
#include "tests/fuzz/fuzz_zip_pack.h"

namespace {

void read_one(std::span<const uint8_t> bytes) {
    sl::ingest::IngestOptions options;
    options.thumbnail_px = 0;                             // image decoding is Qt's, not ours
    options.max_uncompressed_bytes = int64_t{256} << 20;  // keeps each run fast and small
    options.max_pages = 2000;
    sl::ingest::IngestContext ctx(options);
    try {
        const sl::doc::Document d = sl::ingest::read_pptx_bytes(bytes, "fuzz.pptx", ctx);
        // Everything the reader hands out must be well-formed.
        volatile size_t sum = d.title.size();
        for (const auto& u : d.units) {
            for (const auto& b : u.blocks) {
                if (b.bbox && !b.bbox->valid()) __builtin_trap();
                sum = sum + b.text.size() +
                      (b.text.empty() ? 0 : static_cast<uint8_t>(b.text.back()));
            }
            for (const auto& v : u.visuals) {
                if (v.bbox && !v.bbox->valid()) __builtin_trap();
                if (v.width < 0 || v.height < 0) __builtin_trap();
                sum = sum + v.locator.size();
            }
        }
        for (const auto& [k, v] : d.metadata) sum = sum + k.size() + v.size();
    } catch (const sl::ingest::IngestError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (in.substr(0, 4) == "SLPK") {
        const std::string zip = sl::fuzz::pack_parts(in);
        read_one({reinterpret_cast<const uint8_t*>(zip.data()), zip.size()});
    } else {
        read_one({data, size});
    }
    return 0;
}
