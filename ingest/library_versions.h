// Versions of the third-party libraries the readers link, as the running process sees them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sl::ingest {

// (library, version) pairs: Poppler, libavformat, libavcodec, libavutil, libswscale,
// libswresample, libzip, Tesseract. Thread-safe.
std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace sl::ingest
