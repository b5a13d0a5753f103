// Image-patch tokens in the language model's context: how many positions a visual takes (known
// before anything is encoded, for the budget planner), the family's wrapper tokens around them,
// timestamps of video frames, and the provenance of every position.
//
// Idefics3 / SmolVLM layout (Hugging Face's Idefics3Processor; T = tokens_per_tile, <img>xT are
// embedding positions):
//   tiled:   for each row r, col c:  <fake_token_around_image> <row_{r+1}_col_{c+1}> <img>xT
//            after each row:         "\n"
//            then:                   "\n" <fake_token_around_image> <global-img> <img>xT
//                                    <fake_token_around_image>
//   single:  <fake_token_around_image> <global-img> <img>xT <fake_token_around_image>
//   frames:  prefixed by the text "Frame from MM:SS:" (SmolVLM2's video prompt), which carries
//            the frame's timestamp into the context; provenance keeps the exact time.
// Gemma 3 layout (Gemma3Processor's full_image_sequence; T = 256 for the released models):
//   [frame prefix] "\n\n" <start_of_image> <img>xT <end_of_image> "\n\n"
// ("\n\n" and both markers are single tokens in Gemma 3's vocabulary).
// Each wrapper piece is one token in SmolVLM's vocabulary (they are added tokens), so
// image_tokens() is exact for that family. A language model whose vocabulary lacks a piece gets it
// encoded as text (count_positions() then gives the exact number for that tokenizer).
//
// Pure functions and plain data; MultimodalStream is a value, built on one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document/document.h"
#include "core/vision/image_preprocess.h"
#include "core/vision/vision_config.h"

namespace sl {

class Tokenizer;
struct EncodedImage;
struct VisionModel;

struct ImagePiece {
    enum class Kind { Text, Embeddings };
    Kind kind = Kind::Text;
    std::string text;   // Text: the wrapper piece ("<global-img>", "\n", "Frame from 00:12:")
    int tile = -1;      // Embeddings: tile index in plan order (global last)
    int count = 0;      // Embeddings: positions (tokens_per_tile)
};

struct ImageTokenLayout {
    TilePlan plan;
    std::vector<ImagePiece> pieces;
    int n_positions = 0;   // every text piece counted as one token, plus all embeddings
    int n_embeddings = 0;
    // Gemma 3: each tile's embedding positions attend to each other both ways (run them as one
    // non-causal forward call: MultimodalStream::bidirectional, Session::prefill).
    bool bidirectional = false;
};

// The layout for a width x height visual; `timestamp` (seconds) for video frames. `longest_edge`
// as in plan_tiles (the budget planner's downsampling knob). Throws FormatError on bad sizes.
ImageTokenLayout image_token_layout(const VisionConfig& config, int width, int height,
                                    std::optional<double> timestamp = std::nullopt, int longest_edge = -1);

// Context positions one image takes, wrapper tokens included: the budget planner's number.
int image_tokens(const VisionConfig& config, int width, int height);

// Exact positions of `layout` under `tokenizer` (wrapper pieces missing from its vocabulary are
// encoded as text).
int count_positions(const ImageTokenLayout& layout, const Tokenizer& tokenizer);

// The positions of `layout` as ids: each wrapper piece as `tokenizer`'s ids (as
// MultimodalStreamBuilder writes it), each embedding position as LlamaModel::kEmbeddingToken.
// count_positions(layout, tokenizer) of them. With `rows`, also each position's row in the
// image's encoding (EncodedImage::embeddings: tile * tokens_per_tile + i), -1 for wrapper tokens;
// with `runs`, the [begin, end) runs (positions within the layout) that attend both ways
// (layout.bidirectional: one per tile).
// With `tiles`, the [begin, end) positions of each tile's embeddings (within the layout) and the
// tile index, in layout order.
struct LayoutTile {
    int64_t begin = 0, end = 0;
    int tile = -1;
};
std::vector<int32_t> layout_tokens(const ImageTokenLayout& layout, const Tokenizer& tokenizer,
                                   std::vector<int32_t>* rows = nullptr,
                                   std::vector<std::pair<int64_t, int64_t>>* runs = nullptr,
                                   std::vector<LayoutTile>* tiles = nullptr);

// The area tile `tile` of `plan` shows, in the image's normalized coordinates ({0, 0, 1, 1} for
// the global tile and for an untiled image).
doc::BBox tile_region(const TilePlan& plan, int tile);

// "Frame from 01:05:" for 65.4 s (minutes may exceed 59).
std::string frame_prefix(double seconds);

// Where a run of context positions came from.
struct VisualSpan {
    int64_t begin = 0, end = 0;        // positions [begin, end) in the stream
    int visual = -1;                   // the caller's visual id; -1 for plain text
    int tile = -1;                     // tile in plan order; -1 for wrapper tokens
    doc::BBox region{0, 0, 1, 1};      // the tile's area in the visual's normalized coordinates
    std::optional<double> timestamp;   // video frames
};

// A token stream with image embeddings: tokens[i] == LlamaModel::kEmbeddingToken marks an
// embedding position whose row is embeddings[embedding_row[i]].
struct MultimodalStream {
    int width = 0;                       // embedding width (the LM's d_model)
    std::vector<int32_t> tokens;
    std::vector<int32_t> embedding_row;  // per position; -1 for tokens
    std::vector<float> embeddings;       // (n_embedding_rows, width)
    std::vector<VisualSpan> spans;       // run-length provenance, covering every position in order
    // [begin, end) runs of embedding positions that attend both ways (Gemma 3 images), in order.
    std::vector<std::pair<int64_t, int64_t>> bidirectional;

    int64_t size() const { return static_cast<int64_t>(tokens.size()); }
    // Rows (n, width) for forward(tokens + pos, n, ..., embeddings): embedding rows copied, rows of
    // token positions zeroed. `out` has n * width floats.
    void fill_embeddings(int64_t pos, int n, float* out) const;
    // The span holding position `pos` (binary search); nullptr when out of range.
    const VisualSpan* span_at(int64_t pos) const;
};

// Appends text and images to a MultimodalStream. `tokenizer` must outlive the builder.
class MultimodalStreamBuilder {
public:
    MultimodalStreamBuilder(const Tokenizer& tokenizer, int width);

    void add_text(std::string_view text, bool parse_special = true);
    // Appends the layout's wrapper tokens and embedding positions; `image` must be the encoding of
    // the same plan (its tiles and width are checked; throws Error on a mismatch).
    void add_image(const ImageTokenLayout& layout, const EncodedImage& image, int visual,
                   std::optional<double> timestamp = std::nullopt);

    const MultimodalStream& stream() const { return s_; }
    MultimodalStream take() { return std::move(s_); }

private:
    void push_tokens(const std::vector<int32_t>& ids, int visual, int tile, doc::BBox region,
                     std::optional<double> timestamp);
    void push_piece(const std::string& text, int visual, std::optional<double> timestamp);

    const Tokenizer& tokenizer_;
    MultimodalStream s_;
};

// How visuals enter the context for a loaded model.
enum class VisualMode { OcrText, ImagePatches };

struct VisionModeInfo {
    VisualMode mode = VisualMode::OcrText;
    std::string description;   // for the UI / CLI
};

// nullptr (no mmproj): "text-only model: visuals as OCR text"; otherwise the patch mode and the
// config in one line.
VisionModeInfo vision_mode(const VisionModel* vision);

}  // namespace sl
