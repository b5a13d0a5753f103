// The audio reader: WAV, MP3, FLAC, Ogg/Opus, M4A/AAC and other sound files FFmpeg decodes, into a
// Document of kind Audio: time segments holding the speech transcript (when options.transcribe)
// and any embedded or sidecar subtitles (lyrics). Same pipeline as the video reader
// (video/media_reader.h). Stateless and thread-safe. Registered by ingest/readers.cpp.
#pragma once

#include <memory>

#include "ingest/reader.h"

namespace sl::ingest {

std::unique_ptr<Reader> make_audio_reader();

}  // namespace sl::ingest
