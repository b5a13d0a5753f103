// The video reader: MP4/MOV, Matroska/WebM, AVI, ASF/WMV, FLV, MPEG-PS/TS and whatever else FFmpeg
// demuxes, into a Document of kind Video (or Audio when the file has no video stream). Stateless
// and thread-safe, like every Reader. Registered by ingest/readers.cpp.
#pragma once

#include <memory>

#include "ingest/reader.h"

namespace sl::ingest {

std::unique_ptr<Reader> make_video_reader();

}  // namespace sl::ingest
