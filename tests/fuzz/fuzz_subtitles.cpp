// libFuzzer target for the sidecar subtitle parsers (ingest/video/subtitles.h): SubRip, WebVTT,
// ASS event text, markup stripping and the Latin-1 fallback take any bytes without crashing,
// hanging or growing without bound; every cue they return has a time range that is ordered and
// finite, and text that is valid UTF-8 after to_utf8.
// Seeds: tests/fuzz/corpus/fuzz_subtitles (hand-written .srt / .vtt / ASS lines).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/video/subtitles.h"

namespace {

void check(const std::vector<sl::doc::Block>& blocks, size_t input) {
    if (blocks.size() > input + 1) __builtin_trap();  // a cue needs at least a byte of input
    for (const auto& b : blocks) {
        if (b.time) {
            if (!std::isfinite(b.time->t0) || !std::isfinite(b.time->t1) || b.time->t1 < b.time->t0) __builtin_trap();
        }
        if (b.text.size() > 4 * input + 16) __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view raw(reinterpret_cast<const char*>(data), size);
    const std::string text = sl::ingest::to_utf8(raw);
    check(sl::ingest::parse_srt(text), size);
    check(sl::ingest::parse_vtt(text), size);
    volatile size_t sink = sl::ingest::ass_event_text(text).size() + sl::ingest::strip_markup(text).size();
    (void)sink;
    const double t = sl::ingest::parse_timestamp(raw.substr(0, 32));
    if (!(t == -1 || (t >= 0 && std::isfinite(t)))) __builtin_trap();
    return 0;
}
