// Reads a media file (video or audio) into a Document with FFmpeg: fixed-length time segments
// holding the sampled frames and the timed text (embedded subtitles, sidecar .srt/.vtt files,
// speech transcript) that falls in each; chapters become the outline. The video and audio readers
// (video_reader.h, audio/audio_reader.h) are thin Reader wrappers around it.
//
// Threading: runs on the calling thread (decoders may use their own worker threads, joined before
// return); progress and cancellation through the IngestContext. Memory stays bounded for long
// media: packets and frames are streamed, never collected.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/document/document.h"
#include "ingest/ingest_context.h"

namespace sl::ingest {

struct MediaReadOptions {
    int decoder_threads = 2;        // video decoder threads (frame + slice threading)
    bool sidecar_subtitles = true;  // look for movie.srt / movie.en.vtt next to a file
    bool decode_audio = false;      // decode and resample audio even when not transcribing
    double segment_seconds = 30.0;  // length of the Segment units
};

// Throws IngestError naming the file: Io, Unsupported (not media, no streams), Corrupt (nothing
// decodable), TooLarge (dimensions or duration over the caps), Cancelled.
doc::Document read_media_file(const std::string& path, IngestContext& ctx,
                              const MediaReadOptions& options = {});

// The same from bytes in memory, demuxed through a custom AVIOContext (fuzzing, embedded media).
// `name` names the input in messages and hints the format by its extension; no sidecars.
doc::Document read_media_memory(std::span<const uint8_t> bytes, const std::string& name,
                                IngestContext& ctx, const MediaReadOptions& options = {});

// "hh:mm:ss" of a time in seconds (floor), the label of segments.
std::string time_label(double seconds);

}  // namespace sl::ingest
