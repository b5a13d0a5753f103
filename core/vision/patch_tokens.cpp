#include "core/vision/patch_tokens.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/model/llama_model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"

namespace sl {

namespace {

constexpr const char* kFake = "<fake_token_around_image>";
constexpr const char* kGlobal = "<global-img>";
constexpr const char* kGemmaStart = "<start_of_image>";
constexpr const char* kGemmaEnd = "<end_of_image>";

void text(ImageTokenLayout& l, std::string t) {
    l.pieces.push_back({ImagePiece::Kind::Text, std::move(t), -1, 0});
    ++l.n_positions;
}

void embeddings(ImageTokenLayout& l, int tile, int count) {
    l.pieces.push_back({ImagePiece::Kind::Embeddings, {}, tile, count});
    l.n_positions += count;
    l.n_embeddings += count;
}

std::vector<int32_t> piece_ids(const Tokenizer& tok, const std::string& piece) {
    const int32_t id = tok.find_token(piece);
    if (id >= 0) return {id};
    return tok.encode(piece, false, false);
}

}  // namespace

std::string frame_prefix(double seconds) {
    const auto total = static_cast<long long>(std::max(0.0, std::floor(seconds)));
    char buf[48];
    std::snprintf(buf, sizeof buf, "Frame from %02lld:%02lld:", total / 60, total % 60);
    return buf;
}

ImageTokenLayout image_token_layout(const VisionConfig& c, int width, int height, std::optional<double> timestamp,
                                    int longest_edge) {
    ImageTokenLayout l;
    l.plan = plan_tiles(c, width, height, longest_edge);
    const int T = c.tokens_per_tile();
    if (timestamp) text(l, frame_prefix(*timestamp));
    if (c.gemma3()) {
        l.bidirectional = true;
        text(l, "\n\n");
        text(l, kGemmaStart);
        embeddings(l, 0, T);
        text(l, kGemmaEnd);
        text(l, "\n\n");
        return l;
    }
    if (l.plan.rows > 0) {
        for (int r = 0; r < l.plan.rows; ++r) {
            for (int col = 0; col < l.plan.cols; ++col) {
                text(l, kFake);
                text(l, "<row_" + std::to_string(r + 1) + "_col_" + std::to_string(col + 1) + ">");
                embeddings(l, r * l.plan.cols + col, T);
            }
            text(l, "\n");
        }
        text(l, "\n");
    }
    text(l, kFake);
    text(l, kGlobal);
    embeddings(l, l.plan.rows * l.plan.cols, T);
    text(l, kFake);
    return l;
}

int image_tokens(const VisionConfig& c, int width, int height) {
    return image_token_layout(c, width, height).n_positions;
}

int count_positions(const ImageTokenLayout& layout, const Tokenizer& tokenizer) {
    int n = 0;
    for (const ImagePiece& p : layout.pieces)
        n += p.kind == ImagePiece::Kind::Embeddings ? p.count : static_cast<int>(piece_ids(tokenizer, p.text).size());
    return n;
}

doc::BBox tile_region(const TilePlan& plan, int tile) {
    if (tile < 0 || tile >= plan.rows * plan.cols) return {0, 0, 1, 1};
    const int cols = plan.cols, rows = plan.rows;
    const int r = tile / cols, c = tile % cols;
    return {static_cast<float>(c) / static_cast<float>(cols), static_cast<float>(r) / static_cast<float>(rows),
            static_cast<float>(c + 1) / static_cast<float>(cols), static_cast<float>(r + 1) / static_cast<float>(rows)};
}

std::vector<int32_t> layout_tokens(const ImageTokenLayout& layout, const Tokenizer& tokenizer,
                                   std::vector<int32_t>* rows, std::vector<std::pair<int64_t, int64_t>>* runs,
                                   std::vector<LayoutTile>* tiles) {
    std::vector<int32_t> ids;
    if (rows) rows->clear();
    if (runs) runs->clear();
    if (tiles) tiles->clear();
    for (const ImagePiece& p : layout.pieces) {
        if (p.kind == ImagePiece::Kind::Text) {
            const auto t = piece_ids(tokenizer, p.text);
            ids.insert(ids.end(), t.begin(), t.end());
            if (rows) rows->insert(rows->end(), t.size(), -1);
            continue;
        }
        const auto begin = static_cast<int64_t>(ids.size());
        ids.insert(ids.end(), static_cast<size_t>(p.count), LlamaModel::kEmbeddingToken);
        if (rows)
            for (int i = 0; i < p.count; ++i) rows->push_back(p.tile * p.count + i);
        if (runs && layout.bidirectional) runs->emplace_back(begin, static_cast<int64_t>(ids.size()));
        if (tiles) tiles->push_back({begin, static_cast<int64_t>(ids.size()), p.tile});
    }
    return ids;
}

void MultimodalStream::fill_embeddings(int64_t pos, int n, float* out) const {
    const size_t w = static_cast<size_t>(width);
    for (int i = 0; i < n; ++i) {
        const int32_t row = embedding_row[static_cast<size_t>(pos + i)];
        float* o = out + static_cast<size_t>(i) * w;
        if (row < 0)
            std::fill(o, o + w, 0.0f);
        else
            std::memcpy(o, embeddings.data() + static_cast<size_t>(row) * w, w * sizeof(float));
    }
}

const VisualSpan* MultimodalStream::span_at(int64_t pos) const {
    auto it = std::upper_bound(spans.begin(), spans.end(), pos,
                               [](int64_t p, const VisualSpan& s) { return p < s.end; });
    if (it == spans.end() || pos < it->begin) return nullptr;
    return &*it;
}

MultimodalStreamBuilder::MultimodalStreamBuilder(const Tokenizer& tokenizer, int width) : tokenizer_(tokenizer) {
    s_.width = width;
}

void MultimodalStreamBuilder::push_tokens(const std::vector<int32_t>& ids, int visual, int tile, doc::BBox region,
                                          std::optional<double> timestamp) {
    if (ids.empty()) return;
    const int64_t begin = s_.size();
    for (int32_t id : ids) {
        s_.tokens.push_back(id);
        s_.embedding_row.push_back(-1);
    }
    VisualSpan* last = s_.spans.empty() ? nullptr : &s_.spans.back();
    if (last && last->visual == visual && last->tile == tile && last->end == begin && visual < 0) {
        last->end = s_.size();  // merge adjacent plain-text runs
        return;
    }
    s_.spans.push_back({begin, s_.size(), visual, tile, region, timestamp});
}

void MultimodalStreamBuilder::push_piece(const std::string& text, int visual, std::optional<double> timestamp) {
    push_tokens(piece_ids(tokenizer_, text), visual, -1, doc::BBox{0, 0, 1, 1}, timestamp);
}

void MultimodalStreamBuilder::add_text(std::string_view text, bool parse_special) {
    push_tokens(tokenizer_.encode(text, false, parse_special), -1, -1, doc::BBox{0, 0, 1, 1}, std::nullopt);
}

void MultimodalStreamBuilder::add_image(const ImageTokenLayout& layout, const EncodedImage& image, int visual,
                                        std::optional<double> timestamp) {
    if (image.width != s_.width)
        throw Error("image embeddings of width " + std::to_string(image.width) + " do not fit a stream of width " +
                    std::to_string(s_.width));
    if (image.plan.rows != layout.plan.rows || image.plan.cols != layout.plan.cols)
        throw Error("encoded image has " + std::to_string(image.plan.n_tiles()) + " tiles, the layout " +
                    std::to_string(layout.plan.n_tiles()));
    const size_t w = static_cast<size_t>(s_.width);
    for (const ImagePiece& p : layout.pieces) {
        if (p.kind == ImagePiece::Kind::Text) {
            push_piece(p.text, visual, timestamp);
            continue;
        }
        if (p.count != image.tokens_per_tile || p.tile < 0 || p.tile >= image.plan.n_tiles())
            throw Error("image layout and encoding disagree on tile " + std::to_string(p.tile));
        const doc::BBox region = tile_region(layout.plan, p.tile);
        const int64_t begin = s_.size();
        const auto first_row = static_cast<int32_t>(s_.embeddings.size() / w);
        const float* src = image.embeddings.data() + static_cast<size_t>(p.tile) * static_cast<size_t>(p.count) * w;
        s_.embeddings.insert(s_.embeddings.end(), src, src + static_cast<size_t>(p.count) * w);
        for (int i = 0; i < p.count; ++i) {
            s_.tokens.push_back(LlamaModel::kEmbeddingToken);
            s_.embedding_row.push_back(first_row + i);
        }
        s_.spans.push_back({begin, s_.size(), visual, p.tile, region, timestamp});
        if (layout.bidirectional) s_.bidirectional.emplace_back(begin, s_.size());
    }
}

VisionModeInfo vision_mode(const VisionModel* vision) {
    if (!vision) return {VisualMode::OcrText, "text-only model: visuals as OCR text"};
    return {VisualMode::ImagePatches, "vision model: visuals as image-patch tokens (" + describe(vision->config) + ")"};
}

}  // namespace sl
