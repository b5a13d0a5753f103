// libFuzzer target for the plain text, Markdown and HTML readers (UTF-8 repair, sections, the
// markup scanner): any bytes read into a Document of valid UTF-8 or throw
// sl::ingest::IngestError; anything else is a bug. The first byte picks the format: 'm' Markdown,
// 'h' HTML, anything else plain text.
// Seeds: tests/fuzz/corpus/fuzz_text (written by tst_text_readers' writeFuzzSeeds).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ingest/ingest_error.h"
#include "ingest/text/text_reader.h"
#include "ingest/text/text_sections.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const char* name = data[0] == 'm' ? "fuzz.md" : data[0] == 'h' ? "fuzz.html" : "fuzz.txt";
    sl::ingest::IngestContext ctx;
    try {
        const sl::doc::Document d = sl::ingest::read_text_bytes({data + 1, size - 1}, name, ctx);
        for (const auto& u : d.units) {
            if (u.blocks.empty() || u.kind != sl::doc::UnitKind::Section) __builtin_trap();
            for (const auto& b : u.blocks) {
                size_t bad = 0;
                if (b.text.empty() || sl::ingest::text::repair_utf8(b.text, &bad) != b.text || bad != 0)
                    __builtin_trap();
            }
        }
        size_t bad = 0;
        if (sl::ingest::text::repair_utf8(d.title, &bad) != d.title || bad != 0) __builtin_trap();
    } catch (const sl::ingest::IngestError&) {
    }
    return 0;
}
