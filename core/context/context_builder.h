// Documents -> one long context (TokenStream) in the model's chat template, in two steps so the
// budget planner can decide what fits before anything is prefilled:
//
//   ContextBuilder b(tokenizer, chat_template, options);
//   PreparedContext p = b.prepare(docs);            // tokenizes every unit (the slow part)
//   BudgetPlan plan = plan_budget(p, n_ctx, effort); // budget_planner.h: what fits, what is cut
//   TokenStream ts = b.assemble(p, plan);            // the prefix: opening + kept units
//   tokens = b.question_tokens("What ...?");         // appended after ts.tokens for each question
//
// Layout, rendered through ChatTemplate so it is the string the model's own template produces:
//   [system: instructions][user: <documents> "\n\nQuestion: " <question>][assistant opening]
// The prefix ends after the documents, so it is identical for every question (KV reuse); the
// question turn is the rest. Each unit starts with a marker line "[R-intro.pdf p. 12]" (locator.h),
// then its text blocks in reading order, one per line. Visuals enter as image-patch tokens when
// options.image_patches says how many (vision models; the hook for the vision path), otherwise
// through the OCR text blocks the readers already made of them.
//
// The opening (template + instructions) is padded with newline tokens to `sink_block` tokens so
// that KV block 0 (the attention sink, always heavily attended) holds no document text and the
// citation collector can ignore it. Likewise a closing block after the documents absorbs the
// recency share of attention (options.closing).
//
// Threading: a ContextBuilder is immutable after construction; the Tokenizer it refers to must
// outlive it. prepare/assemble may run on any thread.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/context/token_stream.h"
#include "core/document/document.h"

namespace sl {

class Tokenizer;
class ChatTemplate;
struct BudgetPlan;

// A visual's context positions at `render_px`: its wrapper token ids and one
// LlamaModel::kEmbeddingToken (-1) per embedding position (patch_tokens.h: layout_tokens); empty:
// none (the visual's OCR text stands for it). `regions`: positions [begin, end) of the sequence
// that show only `box` of the visual (a tile; normalized to the visual): their spans cite that part
// (mapped onto the unit through the visual's bbox), the rest cites the whole visual. The ask
// flow's hook for a model with a vision tower (core/ask/visual_context.h).
struct VisualRegion {
    int64_t begin = 0, end = 0;
    doc::BBox box{0, 0, 1, 1};
};
struct VisualSequence {
    std::vector<int32_t> tokens;
    std::vector<VisualRegion> regions;  // in order, not overlapping
};
using ImageSequence =
    std::function<VisualSequence(const doc::Document& d, const doc::Unit& u, const doc::Visual& v, int render_px)>;

// Image-patch tokens a vision encoder would spend on `v` at `render_px`; 0 = none (use OCR text).
using ImagePatchCounter =
    std::function<int(const doc::Document& d, const doc::Unit& u, const doc::Visual& v, int render_px)>;

struct ContextOptions {
    std::string instructions =
        "You answer questions about the documents below. Each page, slide or video segment starts with "
        "a marker in square brackets naming the file and the place. Answer briefly, using only the "
        "documents.";
    std::string question_label = "Question: ";
    int sink_block = 128;            // pad the opening to this many tokens (0: no padding)
    // Text between the documents and the question, padded with newlines to `closing_block` tokens
    // (0: no padding). It takes the recency share of attention that the last page would otherwise
    // get from every answer token, so that page is not cited for being near, only for being read.
    std::string closing = "\n(End of the documents.)\n";
    int closing_block = 128;
    ImageSequence image_sequence;    // set: a visual's positions (takes precedence over the counter)
    ImagePatchCounter image_patches; // empty: text only
    int32_t image_token = -1;        // the id image-patch positions hold (vision models)
    int render_px = 672;             // passed to image_patches
};

// One piece of a unit (its marker, a text block or a visual), tokenized.
struct PreparedItem {
    SpanKind kind = SpanKind::Text;
    int block = -1;                       // block or visual index in the unit
    std::vector<int32_t> tokens;
    doc::SourceRef ref;
    std::optional<double> frame_time;     // video frame (or OCR of one): its time, for downsampling
    std::vector<VisualRegion> regions;    // Visual: parts of it (tiles), boxes in unit coordinates
};

struct PreparedUnit {
    StreamUnit meta;                      // begin/end are filled by assemble
    std::vector<PreparedItem> items;      // items[0] is the marker
    int64_t tokens() const;
};

struct PreparedContext {
    std::vector<StreamSource> sources;
    std::vector<PreparedUnit> units;      // in document order, sources in the order given
    std::vector<int32_t> opening;         // template + instructions (+ padding)
    std::vector<int32_t> closing;         // after the documents (+ padding); part of the prefix
    int64_t question_reserve = 0;         // tokens of the question turn's fixed text (no question)
    int64_t tokens_of_source(int source) const;
};

class ContextBuilder {
public:
    ContextBuilder(const Tokenizer& tok, const ChatTemplate& chat, ContextOptions options = {});

    // Tokenizes every unit of `docs` (null entries are skipped). Throws sl::Error when the chat
    // template's rendering cannot be split around the documents.
    PreparedContext prepare(std::span<const doc::Document* const> docs) const;

    // The stream: opening, then the units (and items) the plan keeps; everything when plan is null.
    TokenStream assemble(const PreparedContext& p, const BudgetPlan* plan = nullptr) const;

    // Appends units p.units[i], i in `units` (in the order given), to `ts` (a stream of the same
    // PreparedContext, e.g. a clipped prefix: TokenStream::clipped), then the closing when asked;
    // items are those `plan` keeps of a unit it keeps, else all. prefix_tokens becomes the size.
    void append(TokenStream& ts, const PreparedContext& p, std::span<const size_t> units, const BudgetPlan* plan,
                bool closing) const;

    // prepare + assemble, everything kept.
    TokenStream build(std::span<const doc::Document* const> docs) const;

    // The question turn to append after the prefix: "\n\nQuestion: <q>" + end of the user turn +
    // the assistant's opening.
    std::vector<int32_t> question_tokens(std::string_view question) const;

    const ContextOptions& options() const { return options_; }

private:
    const Tokenizer& tok_;
    ContextOptions options_;
    std::string head_;   // rendered template text before the documents
    std::string mid_;    // between the documents and the question
    std::string tail_;   // after the question
};

}  // namespace sl
