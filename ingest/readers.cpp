#include "ingest/readers.h"

#include "ingest/audio/audio_reader.h"
#include "ingest/docx/docx_reader.h"
#include "ingest/epub/epub_reader.h"
#include "ingest/image/image_reader.h"
#include "ingest/pdf/pdf_reader.h"
#include "ingest/slides/pptx_reader.h"
#include "ingest/text/text_reader.h"
#include "ingest/video/video_reader.h"

namespace sl::ingest {

void register_builtin_readers(std::vector<std::unique_ptr<Reader>>& out) {
    // Sniffing order: formats with unambiguous magic first; video before audio so that a
    // container with a video stream is read as video; text formats last (HTML is sniffed by its
    // start, plain text and Markdown by extension only).
    out.push_back(make_pdf_reader());
    out.push_back(make_pptx_reader());
    out.push_back(make_image_reader());
    out.push_back(make_video_reader());
    out.push_back(make_audio_reader());
    out.push_back(make_docx_reader());
    out.push_back(make_epub_reader());
    out.push_back(make_html_reader());
    out.push_back(make_text_reader());
}

}  // namespace sl::ingest
