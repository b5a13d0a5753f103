#include "ingest/library_versions.h"

#include <poppler-version.h>
#include <tesseract/baseapi.h>
#include <zip.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

namespace sl::ingest {

namespace {

// libav* pack versions as major << 16 | minor << 8 | micro.
std::string av_version(unsigned v) {
    return std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." + std::to_string(v & 0xff);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> library_versions() {
    return {
        {"Poppler", Poppler::Version::string().toStdString()},
        {"libavformat", av_version(avformat_version())},
        {"libavcodec", av_version(avcodec_version())},
        {"libavutil", av_version(avutil_version())},
        {"libswscale", av_version(swscale_version())},
        {"libswresample", av_version(swresample_version())},
        {"libzip", zip_libzip_version()},
        {"Tesseract", tesseract::TessBaseAPI::Version()},
    };
}

}  // namespace sl::ingest
