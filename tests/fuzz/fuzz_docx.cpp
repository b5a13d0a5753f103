// libFuzzer target for the DOCX and EPUB readers (both zips of XML parts): any bytes either read
// into a Document or throw sl::ingest::IngestError; anything else (a crash, a sanitizer report,
// another exception, a huge allocation, a hang) is a bug.
//
// Inputs:
// - "SLDX" then parts ("\n@@ <name>\n<bytes>"): packed into a stored zip with correct CRCs and read
//   as a DOCX, so that mutations of the XML reach the parsers;
// - "SLEP" then parts: the same, read as an EPUB;
// - anything else: read as a DOCX and as an EPUB, as a user's file would be.
// Seeds: tests/fuzz/corpus/fuzz_docx (written by tst_docx_reader's and tst_text_readers'
// writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ingest/docx/docx_reader.h"
#include "ingest/epub/epub_reader.h"
#include "ingest/ingest_error.h"
#include "tests/fuzz/fuzz_zip_pack.h"

namespace {

void check(const sl::doc::Document& d) {
    volatile size_t sum = d.title.size();
    for (const auto& u : d.units) {
        if (u.kind != sl::doc::UnitKind::Section || u.blocks.empty()) __builtin_trap();
        for (const auto& b : u.blocks) {
            if (b.text.empty()) __builtin_trap();
            sum = sum + b.text.size() + static_cast<uint8_t>(b.text.back());
        }
    }
    for (const auto& [k, v] : d.metadata) sum = sum + k.size() + v.size();
}

template <typename Read>
void read_one(std::span<const uint8_t> bytes, const char* name, Read read) {
    sl::ingest::IngestOptions options;
    options.thumbnail_px = 0;
    options.max_uncompressed_bytes = int64_t{256} << 20;  // keeps each run fast and small
    options.max_pages = 2000;
    sl::ingest::IngestContext ctx(options);
    try {
        check(read(bytes, name, ctx));
    } catch (const sl::ingest::IngestError&) {
    }
}

std::span<const uint8_t> span_of(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (in.substr(0, 4) == "SLDX") {
        read_one(span_of(sl::fuzz::pack_parts(in)), "fuzz.docx", sl::ingest::read_docx_bytes);
    } else if (in.substr(0, 4) == "SLEP") {
        read_one(span_of(sl::fuzz::pack_parts(in)), "fuzz.epub", sl::ingest::read_epub_bytes);
    } else {
        read_one({data, size}, "fuzz.docx", sl::ingest::read_docx_bytes);
        read_one({data, size}, "fuzz.epub", sl::ingest::read_epub_bytes);
    }
    return 0;
}
