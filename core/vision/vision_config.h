// The vision tower of a vision-language model as a GGUF `mmproj` file describes it (llama.cpp's
// `clip` architecture). Families implemented, both a SigLIP ViT followed by a projector:
// - SmolVLM / Idefics3 (`clip.projector_type` = "idefics3"): pixel shuffle by
//   `clip.vision.projector.scale_factor`, one linear projection (`mm.model.fc.weight`, no bias) to
//   the language model's width; images tiled up to `preproc_image_size`.
// - Gemma 3 (4B/12B/27B, "gemma3"): a k x k average pool of the patch grid (k =
//   `projector.scale_factor`, absent in real files: 4, so 896 px / 14 px patches -> 64 x 64 ->
//   256 tokens), an RMS norm (`mm.soft_emb_norm.weight`, stored with Gemma's +1 applied), one
//   linear projection (`mm.input_projection.weight`, stored transposed: {E, D}); one image = one
//   tile resized to image_size (no tiling: pan & scan is off, as in llama.cpp).
//
// Keys read (all under "clip."):
//   projector_type                        string, "idefics3" or "gemma3"
//   has_vision_encoder                    bool, optional; false is refused
//   vision.image_size                     tile side in pixels (square tiles)
//   vision.patch_size                     patch side; divides image_size
//   vision.embedding_length               ViT width D; a multiple of head_count
//   vision.feed_forward_length            MLP width
//   vision.block_count                    transformer blocks
//   vision.attention.head_count
//   vision.attention.layer_norm_epsilon
//   vision.image_mean, vision.image_std   3 floats each (RGB), std > 0
//   vision.projector.scale_factor         idefics3: pixel-shuffle factor s (required); gemma3: the
//                                         pool's side k (optional, 4); divides the patch grid
//   vision.projection_dim                 optional; when present must equal the projector's rows
//   vision.preproc_image_size             optional (gguf-py's Keys.ClipVision.PREPROC_IMAGE_SIZE;
//                                         not every converter writes it): longest edge an image is
//                                         resized to before it is split into tiles (Idefics3's
//                                         `size.longest_edge`); 0 or absent: no tiling, every
//                                         image becomes one resized tile (callers may still pass a
//                                         longest edge to plan_tiles, e.g. from the model card).
// Plain data; immutable after reading; safe to share.
#pragma once

#include <array>
#include <string>

namespace sl {

class GgufFile;

struct VisionConfig {
    std::string projector = "idefics3";
    int image_size = 0;     // tile side, pixels
    int patch_size = 0;
    int n_embd = 0;         // ViT width D
    int n_ff = 0;
    int n_layer = 0;
    int n_head = 0;
    float eps = 1e-6f;      // LayerNorm epsilon
    std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
    std::array<float, 3> std{0.5f, 0.5f, 0.5f};
    int scale_factor = 1;   // idefics3: pixel shuffle; gemma3: average-pool side
    int n_embd_out = 0;     // projector output: the language model's width
    int longest_edge = 0;   // resize target before tiling; 0: no tiling (always 0 for gemma3)

    bool gemma3() const { return projector == "gemma3"; }
    int grid() const { return image_size / patch_size; }            // patches per tile side
    int n_patches() const { return grid() * grid(); }                // patches per tile
    int tokens_per_tile() const {                                    // after the shuffle / pool
        const int g = grid() / scale_factor;
        return g * g;
    }
    int head_dim() const { return n_embd / n_head; }
    int merged_width() const {                                       // projector input
        return gemma3() ? n_embd : n_embd * scale_factor * scale_factor;
    }
};

// Hard caps on what a file may ask for (memory and time are allocated from these numbers).
struct VisionLimits {
    static constexpr int kMaxImageSize = 4096;
    static constexpr int kMaxPatchSize = 64;
    static constexpr int kMaxPatches = 16384;    // per tile
    static constexpr int kMaxEmbd = 8192;
    static constexpr int kMaxFf = 65536;
    static constexpr int kMaxLayers = 128;
    static constexpr int kMaxHeads = 256;
    static constexpr int kMaxScale = 16;
    static constexpr int kMaxEmbdOut = 65536;
    static constexpr int kMaxLongestEdge = 16384;
};

// Reads and checks the keys above (not the tensors; see load_mmproj). n_embd_out is left 0 here:
// it comes from the projector tensor. Throws FormatError naming the file and the key.
VisionConfig read_vision_config(const GgufFile& file);

// Checks ranges and divisibility of a config (also one built in code); throws FormatError whose
// message starts with `where`.
void validate_vision_config(const VisionConfig& c, const std::string& where);

// One line for people: "idefics3: SigLIP 12 x 768 (12 heads), 512 px tiles of 16 px patches,
// pixel shuffle 4 -> 64 tokens per tile of width 576"; "gemma3: SigLIP 27 x 1152 (...), 896 px
// images of 14 px patches, 4 x 4 average pool -> 256 tokens per image of width 2560".
std::string describe(const VisionConfig& c);

}  // namespace sl
