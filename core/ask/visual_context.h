// Visuals in the ask flow's context as image-patch tokens, for a language model with a vision
// tower (an mmproj file: core/vision). Without one the visuals enter as the OCR text the readers
// made of them; with one:
//
//   ContextBuilder (image_sequence hook) -> each visual the builder places takes its layout's
//       positions (patch_tokens.h: wrapper token ids + LlamaModel::kEmbeddingToken), so the budget
//       planner counts and cuts them like text, and citations name the visual's unit, region and
//       time like any span;
//   prefill -> VisualEmbeddings fills the rows of the embedding positions: each visual's pixels
//       come from AskVision::pixels (the adapters' renderers: PDF pages, slide pictures, images,
//       video frames) when the prefill reaches it, resized to the size its layout was planned for
//       and encoded once — or read from the library's cache of encoded visuals (visual_cache.h:
//       rows kept as f16, and fresh encodings rounded the same way, so both give the same rows);
//       released when the prefill has passed it.
//
// Which visuals: pictures (slides, images) and video frames always; a PDF page's render only when
// the page carries little text of its own (under kImagedPageChars characters outside OCR: scans,
// figure pages, slides exported as PDF) — a page of prose is read as its text, not twice.
// Sizes: the visual's own pixel size scaled down (never up) to the effort's render size.
//
// Threading: a VisualEmbeddings runs on the ask thread (its encoder uses the session's pool);
// the pixel source is called on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/context/context_builder.h"
#include "core/context/token_stream.h"
#include "core/document/document.h"
#include "core/vision/image_preprocess.h"
#include "core/vision/vision_config.h"

namespace sl {

class Session;
class VisualCache;
class Tokenizer;
class VisionEncoder;
struct VisionModel;

// The pixels of visual `v` of unit `u` of `d`, longest side about `max_px` (smaller when the
// source is smaller); nullopt when they cannot be had (the file moved, a frame not kept). May throw
// sl::Error naming the file; the caller treats that as nullopt with the message as its note.
using VisualPixelSource =
    std::function<std::optional<RgbImage>(const doc::Document& d, const doc::Unit& u, const doc::Visual& v, int max_px)>;

struct AskVision {
    const VisionModel* model = nullptr;  // null: visuals enter as their OCR text
    std::string identity;                // names the tower in saved contexts: the mmproj's sha256
    VisualPixelSource pixels;
};

inline constexpr int kImagedPageChars = 600;

// PDF pages stored without a page render (ingest keeps one only when asked: `add --dpi`) get one,
// rendered on demand ("page:N@150dpi", its size from the page's points and rotation): the pages a
// vision tower may read. Other units are left as they are.
void add_page_renders(std::vector<doc::Document>& docs);

// Whether `v` enters the context as image tokens under a vision model (the rule above).
bool visual_enters_as_image(const doc::Unit& u, const doc::Visual& v);

// The (width, height) `v` is encoded at under `render_px`; (0, 0) when its size is unknown.
std::pair<int, int> visual_encode_size(const doc::Visual& v, int render_px);

// The tiling edge for `render_px` (image_token_layout's longest_edge): the render size rounded up
// to whole tiles, at most the file's own (SmolVLM tiles every image up to 2048 px: 17 tiles, 1,088
// positions; at 672 px it is 2 x 2 tiles and the global one, 320). -1 for a tower that does not
// tile (Gemma 3, or no tiling key).
int visual_tile_edge(const VisionConfig& config, int render_px);

// The context builder's hook for `model` (both must outlive the builder).
ImageSequence image_sequence_for(const VisionModel& model, const Tokenizer& tokenizer);

// The rows of a stream's image positions, for prefill.
class VisualEmbeddings {
public:
    // The Visual spans of `ts` that hold embedding positions; their documents are found in `docs`
    // by id. `encoder` (of vision.model) and everything given must outlive this object.
    VisualEmbeddings(const TokenStream& ts, std::span<const doc::Document> docs, const AskVision& vision,
                     VisionEncoder& encoder, const Tokenizer& tokenizer, int render_px, const VisualCache* cache = nullptr);

    bool empty() const { return slots_.empty(); }
    int width() const { return width_; }
    // Whether [pos, pos + n) holds an embedding position.
    bool any_in(int64_t pos, int64_t n) const;
    // Rows (n, width) for positions [pos, pos + n): the encodings' rows at embedding positions,
    // zeros elsewhere. Encodes the visuals it reaches; drops the encodings of visuals before pos.
    // Throws sl::Error when an encoding does not match its planned layout.
    void fill(int64_t pos, int n, float* out);
    // [begin, end) runs of positions that attend both ways (Gemma 3 images), in order.
    const std::vector<std::pair<int64_t, int64_t>>& bidirectional() const { return runs_; }

    int visuals() const { return static_cast<int>(slots_.size()); }
    int encoded() const { return encoded_; }       // by the encoder
    int from_cache() const { return from_cache_; }  // read from the cache instead
    double encode_seconds() const { return encode_seconds_; }
    // One line per visual whose pixels could not be had (it was encoded as a grey image).
    const std::vector<std::string>& notes() const { return notes_; }

private:
    struct Slot {
        int64_t begin = 0, end = 0;       // the span's positions
        const doc::Document* doc = nullptr;
        const doc::Unit* unit = nullptr;
        const doc::Visual* visual = nullptr;
        int width = 0, height = 0;        // the planned encode size
        int64_t n_rows = 0;               // rows of its encoding (every tile's)
        std::vector<int32_t> rows;        // per position of the span: encoding row or -1
        std::vector<float> embeddings;    // (rows, width_) once encoded
        bool done = false;
    };
    void encode(Slot& s);

    const AskVision& vision_;
    VisionEncoder& encoder_;
    int render_px_ = 0;
    int width_ = 0;
    std::vector<Slot> slots_;
    std::vector<std::pair<int64_t, int64_t>> runs_;
    const VisualCache* cache_ = nullptr;
    int encoded_ = 0;
    int from_cache_ = 0;
    double encode_seconds_ = 0;
    std::vector<std::string> notes_;
};

// Prefills `tokens`, the stream's positions [pos0, pos0 + tokens.size()), into `session` in chunks
// of at most `chunk` tokens (one runs past that only to finish a bidirectional run it starts with),
// image rows from `vis` (null: plain tokens) and, when `bidirectional`, its runs attending both
// ways, never cut by a chunk. `before()` runs before each chunk (a cancel check may throw from it),
// `after(done)` after each with the tokens done so far.
void prefill_stream(Session& session, std::span<const int32_t> tokens, int64_t pos0, VisualEmbeddings* vis,
                    bool bidirectional, size_t chunk, const std::function<void()>& before,
                    const std::function<void(size_t)>& after);

}  // namespace sl
