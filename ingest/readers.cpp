#include "ingest/readers.h"

#include "ingest/audio/audio_reader.h"
#include "ingest/image/image_reader.h"
#include "ingest/pdf/pdf_reader.h"
#include "ingest/slides/pptx_reader.h"
#include "ingest/video/video_reader.h"

namespace sl::ingest {

void register_builtin_readers(std::vector<std::unique_ptr<Reader>>& out) {
    // Sniffing order: formats with unambiguous magic first; video before audio so that a
    // container with a video stream is read as video.
    out.push_back(make_pdf_reader());
    out.push_back(make_pptx_reader());
    out.push_back(make_image_reader());
    out.push_back(make_video_reader());
    out.push_back(make_audio_reader());
}

}  // namespace sl::ingest
