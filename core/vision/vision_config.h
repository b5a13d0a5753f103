// The vision tower of a vision-language model as a GGUF `mmproj` file describes it (llama.cpp's
// `clip` architecture). Family implemented: SmolVLM / Idefics3 (`clip.projector_type` =
// "idefics3"): a SigLIP ViT, pixel shuffle by `clip.vision.projector.scale_factor`, and one linear
// projection (`mm.model.fc.weight`, no bias) to the language model's width.
//
// Keys read (all under "clip."):
//   projector_type                        string, must be "idefics3"
//   has_vision_encoder                    bool, optional; false is refused
//   vision.image_size                     tile side in pixels (square tiles)
//   vision.patch_size                     patch side; divides image_size
//   vision.embedding_length               ViT width D; a multiple of head_count
//   vision.feed_forward_length            MLP width
//   vision.block_count                    transformer blocks
//   vision.attention.head_count
//   vision.attention.layer_norm_epsilon
//   vision.image_mean, vision.image_std   3 floats each (RGB), std > 0
//   vision.projector.scale_factor         pixel-shuffle factor s; divides image_size / patch_size
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
    int scale_factor = 1;   // pixel shuffle
    int n_embd_out = 0;     // projector output: the language model's width
    int longest_edge = 0;   // resize target before tiling; 0: no tiling

    int grid() const { return image_size / patch_size; }            // patches per tile side
    int n_patches() const { return grid() * grid(); }                // patches per tile
    int tokens_per_tile() const {                                    // after pixel shuffle
        const int g = grid() / scale_factor;
        return g * g;
    }
    int head_dim() const { return n_embd / n_head; }
    int merged_width() const { return n_embd * scale_factor * scale_factor; }  // projector input
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
// pixel shuffle 4 -> 64 tokens per tile of width 576".
std::string describe(const VisionConfig& c);

}  // namespace sl
