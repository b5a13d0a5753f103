#include "ingest/ocr/ocr_engine.h"

#include <algorithm>
#include <cstdlib>
#include <tesseract/baseapi.h>
#include <tesseract/ocrclass.h>
#include <tesseract/resultiterator.h>

namespace sl::ingest {

namespace {

// Blocks whose mean word confidence is below this are noise (pictures, rules, specks).
constexpr float kMinBlockConfidence = 0.45f;

bool poll_cancel(void* closure, int /*words*/) {
    const auto* fn = static_cast<const std::function<bool()>*>(closure);
    return (*fn)();
}

struct BlockAcc {
    doc::Block block;
    float conf_sum = 0;  // confidence x characters
    size_t conf_chars = 0;
    int lines = 0;
};

}  // namespace

OcrEngine::OcrEngine(const std::string& language) {
    auto api = std::make_unique<tesseract::TessBaseAPI>();
    const char* prefix = std::getenv("TESSDATA_PREFIX");
    // nullptr: Tesseract's own default, which also honours TESSDATA_PREFIX.
    const char* datapath = (prefix && *prefix) ? prefix : nullptr;
    if (api->Init(datapath, language.c_str(), tesseract::OEM_DEFAULT) != 0) {
        error_ = "Tesseract cannot load the language '" + language + "' (install tesseract-ocr-" +
                 language + ", or set TESSDATA_PREFIX)";
        return;
    }
    // Tesseract's diagnostics ("Estimating resolution...", "Empty page!!") are not for the user.
    api->SetVariable("debug_file", "/dev/null");
    api->SetPageSegMode(tesseract::PSM_AUTO);
    api_ = std::move(api);
}

OcrEngine::~OcrEngine() {
    if (api_) api_->End();
}

std::vector<doc::Block> OcrEngine::recognize(const QImage& image, int dpi,
                                             const std::function<bool()>& cancelled) {
    if (!api_ || image.isNull() || image.width() < 8 || image.height() < 8) return {};
    const QImage grey = image.convertToFormat(QImage::Format_Grayscale8);
    if (grey.isNull()) return {};
    const double w = grey.width(), h = grey.height();
    api_->SetImage(grey.constBits(), grey.width(), grey.height(), 1,
                   static_cast<int>(grey.bytesPerLine()));
    if (dpi > 0) api_->SetSourceResolution(dpi);

    tesseract::ETEXT_DESC monitor;
    if (cancelled) {
        monitor.cancel = &poll_cancel;
        monitor.cancel_this = const_cast<std::function<bool()>*>(&cancelled);
    }
    // A cancelled run still leaves what it found; the caller decides whether to use it.
    api_->Recognize(&monitor);

    std::vector<doc::Block> out;
    std::unique_ptr<tesseract::ResultIterator> it(api_->GetIterator());
    if (!it) {
        api_->Clear();
        return out;
    }
    auto norm = [&](int l, int t, int r, int b) {
        auto cx = [&](double v) { return static_cast<float>(std::clamp(v / w, 0.0, 1.0)); };
        auto cy = [&](double v) { return static_cast<float>(std::clamp(v / h, 0.0, 1.0)); };
        return doc::BBox{cx(l), cy(t), cx(r), cy(b)};
    };
    auto flush = [&](BlockAcc& acc) {
        if (acc.block.lines.empty()) return;
        acc.block.confidence =
            acc.conf_chars ? acc.conf_sum / static_cast<float>(acc.conf_chars) : 0.0f;
        if (acc.block.confidence >= kMinBlockConfidence) out.push_back(std::move(acc.block));
        acc = BlockAcc{};
    };

    constexpr auto kWord = tesseract::RIL_WORD;
    BlockAcc acc;
    float bx0 = 1, by0 = 1, bx1 = 0, by1 = 0;
    do {
        if (it->Empty(kWord)) continue;
        const bool new_para = it->IsAtBeginningOf(tesseract::RIL_PARA);
        const bool new_line = it->IsAtBeginningOf(tesseract::RIL_TEXTLINE);
        if (new_para && !acc.block.lines.empty()) {
            acc.block.bbox = doc::BBox{bx0, by0, bx1, by1};
            flush(acc);
            bx0 = by0 = 1;
            bx1 = by1 = 0;
        }
        const std::unique_ptr<char[]> text(it->GetUTF8Text(kWord));
        if (!text || !text[0]) continue;
        std::string word(text.get());
        const auto not_space = [](char c) { return c != ' ' && c != '\n' && c != '\t'; };
        word.erase(word.begin(), std::find_if(word.begin(), word.end(), not_space));
        word.erase(std::find_if(word.rbegin(), word.rend(), not_space).base(), word.end());
        if (word.empty()) continue;
        int l = 0, t = 0, r = 0, b = 0;
        if (!it->BoundingBox(kWord, &l, &t, &r, &b)) continue;
        const doc::BBox box = norm(l, t, r, b);
        const float conf = std::clamp(it->Confidence(kWord) / 100.0f, 0.0f, 1.0f);

        doc::Block& blk = acc.block;
        blk.role = doc::BlockRole::Ocr;
        if (!blk.text.empty()) blk.text += (new_line ? '\n' : ' ');
        blk.text += word;
        blk.lines.push_back({word, box});
        acc.conf_sum += conf * static_cast<float>(word.size());
        acc.conf_chars += word.size();
        bx0 = std::min(bx0, box.x0);
        by0 = std::min(by0, box.y0);
        bx1 = std::max(bx1, box.x1);
        by1 = std::max(by1, box.y1);
    } while (it->Next(kWord));
    if (!acc.block.lines.empty()) {
        acc.block.bbox = doc::BBox{bx0, by0, bx1, by1};
        flush(acc);
    }
    it.reset();
    api_->Clear();
    return out;
}

}  // namespace sl::ingest
