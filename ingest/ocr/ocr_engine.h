// Optical character recognition with Tesseract: an image in, text blocks out (role Ocr), each
// with its words and their boxes normalized to the image and a confidence in [0, 1].
//
// Threading: an OcrEngine wraps one tesseract::TessBaseAPI and is NOT thread-safe. Create one per
// thread (or per read() call) and use it from that thread only; creating one loads the language
// model (~0.1-0.3 s), so reuse it across the pages of a document.
//
// The language data ("eng.traineddata", Debian tesseract-ocr-eng) is found where Tesseract looks
// by default (/usr/share/tesseract-ocr/5/tessdata), or under $TESSDATA_PREFIX when it is set.
#pragma once

#include <QImage>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/document/document.h"

namespace tesseract {
class TessBaseAPI;
}

namespace sl::ingest {

class OcrEngine {
public:
    // Loads `language` (Tesseract's names: "eng", "eng+deu"). Never throws; check ready().
    explicit OcrEngine(const std::string& language = "eng");
    ~OcrEngine();
    OcrEngine(const OcrEngine&) = delete;
    OcrEngine& operator=(const OcrEngine&) = delete;

    // Whether the language model loaded; when not, error() says why and recognize() returns {}.
    bool ready() const { return api_ != nullptr; }
    const std::string& error() const { return error_; }

    // Recognizes the text of `image` (any format; converted to 8-bit grey). `dpi` is the image's
    // resolution when known (e.g. a page rendered at 300 DPI), 0 to let Tesseract estimate it.
    // `cancelled`, when set, is polled during recognition; returning true stops it early (the
    // words found so far are returned). One block per paragraph: text = its lines joined by
    // '\n' and words by ' '; lines = its words with their boxes; confidence = the mean of its
    // words'. Blocks of very low confidence (noise, pictures) are dropped.
    std::vector<doc::Block> recognize(const QImage& image, int dpi = 0,
                                      const std::function<bool()>& cancelled = {});

private:
    std::unique_ptr<tesseract::TessBaseAPI> api_;
    std::string error_;
};

}  // namespace sl::ingest
