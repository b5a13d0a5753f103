// libFuzzer target for the media reader (FFmpeg demuxing and decoding through a custom AVIOContext
// over the input bytes, frame sampling, thumbnails, subtitles, audio resampling): any bytes either
// read into a Document or throw sl::ingest::IngestError; anything else (a crash, a sanitizer
// report, another exception, a huge allocation, a hang) is a bug. FFmpeg itself is the system's
// (not instrumented): this checks how Sightline drives it and what it makes of the results.
// Seeds: tests/fuzz/corpus/fuzz_video (1 s clips made with the ffmpeg CLI, a few KB each: MP4,
// Matroska, WebM, AVI, WAV, MP3, with subtitle tracks and chapters).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "ingest/ingest_error.h"
#include "ingest/video/media_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    sl::ingest::IngestOptions options;
    options.transcribe = false;  // loading the speech model takes a second; resampling still runs
    options.max_frames_per_minute = 60;
    options.thumbnail_px = 32;
    options.max_video_dimension = 1024;  // keeps each run small
    options.max_duration_s = 4 * 3600.0;
    sl::ingest::IngestContext ctx(options);
    sl::ingest::MediaReadOptions media;
    media.decoder_threads = 1;  // deterministic runs
    media.decode_audio = true;
    try {
        const sl::doc::Document d =
            sl::ingest::read_media_memory(std::span<const uint8_t>(data, size), "fuzz", ctx, media);
        // Everything the reader hands out must be well-formed.
        if (!(d.duration >= 0) || d.units.empty()) __builtin_trap();
        volatile size_t sum = d.title.size();
        double prev = -1;
        for (const auto& u : d.units) {
            if (!u.time || u.time->t1 < u.time->t0) __builtin_trap();
            for (const auto& b : u.blocks) {
                if (!b.time || !(b.time->t1 >= b.time->t0)) __builtin_trap();
                sum = sum + b.text.size() +
                      (b.text.empty() ? 0 : static_cast<uint8_t>(b.text.back()));
            }
            for (const auto& v : u.visuals) {
                if (!v.timestamp || !(*v.timestamp > prev) || !std::isfinite(*v.timestamp))
                    __builtin_trap();
                if (v.width <= 0 || v.height <= 0 || v.width > 1024 || v.height > 1024)
                    __builtin_trap();
                prev = *v.timestamp;
                sum = sum + v.locator.size() + v.encoded.size();
            }
        }
        for (const auto& o : d.outline)
            if (o.unit < 0 || static_cast<size_t>(o.unit) >= d.units.size()) __builtin_trap();
        for (const auto& [k, v] : d.metadata) sum = sum + k.size() + v.size();
    } catch (const sl::ingest::IngestError&) {
    }
    return 0;
}
