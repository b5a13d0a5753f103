#include "core/vision/vision_config.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_reader.h"
#include "core/util/error.h"

namespace sl {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw FormatError(where + ": " + what);
}

int required_int(const GgufFile& f, std::string_view key, int lo, int hi) {
    const std::optional<uint64_t> v = f.get_u64(key);
    if (!v) fail(f.name(), "mmproj key '" + std::string(key) + "' is missing");
    if (*v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi))
        fail(f.name(), "mmproj key '" + std::string(key) + "' = " + std::to_string(*v) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(*v);
}

std::array<float, 3> rgb(const GgufFile& f, std::string_view key) {
    const auto v = f.get_f32_array(key);
    if (!v) fail(f.name(), "mmproj key '" + std::string(key) + "' is missing");
    if (v->size() != 3)
        fail(f.name(), "mmproj key '" + std::string(key) + "' has " + std::to_string(v->size()) +
                           " values, expected 3 (R, G, B)");
    return {(*v)[0], (*v)[1], (*v)[2]};
}

}  // namespace

void validate_vision_config(const VisionConfig& c, const std::string& where) {
    using L = VisionLimits;
    const auto range = [&](const char* what, int v, int lo, int hi) {
        if (v < lo || v > hi)
            fail(where, std::string(what) + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
    };
    if (c.projector != "idefics3" && c.projector != "gemma3")
        fail(where, "projector type '" + c.projector + "' is not supported (supported: idefics3, gemma3)");
    range("image_size", c.image_size, 1, L::kMaxImageSize);
    range("patch_size", c.patch_size, 1, L::kMaxPatchSize);
    if (c.image_size % c.patch_size)
        fail(where, "image_size " + std::to_string(c.image_size) + " is not a multiple of patch_size " +
                        std::to_string(c.patch_size));
    range("patches per tile", c.n_patches(), 1, L::kMaxPatches);
    range("embedding_length", c.n_embd, 1, L::kMaxEmbd);
    range("feed_forward_length", c.n_ff, 1, L::kMaxFf);
    range("block_count", c.n_layer, 1, L::kMaxLayers);
    range("head_count", c.n_head, 1, L::kMaxHeads);
    if (c.n_embd % c.n_head)
        fail(where, "embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " +
                        std::to_string(c.n_head));
    range("projector.scale_factor", c.scale_factor, 1, L::kMaxScale);
    if (c.grid() % c.scale_factor)
        fail(where, "patch grid " + std::to_string(c.grid()) + " is not a multiple of projector.scale_factor " +
                        std::to_string(c.scale_factor) + (c.gemma3() ? " (gemma3's pool side)" : ""));
    if (static_cast<int64_t>(c.n_embd) * c.scale_factor * c.scale_factor > L::kMaxFf)
        fail(where, "pixel-shuffled width " + std::to_string(int64_t{c.n_embd} * c.scale_factor * c.scale_factor) +
                        " is too large");
    if (!(c.eps > 0.0f && c.eps < 1.0f))
        fail(where, "attention.layer_norm_epsilon " + std::to_string(c.eps) + " is outside (0, 1)");
    for (int i = 0; i < 3; ++i) {
        if (!std::isfinite(c.mean[static_cast<size_t>(i)]) || !(c.std[static_cast<size_t>(i)] > 0.0f) ||
            !std::isfinite(c.std[static_cast<size_t>(i)]))
            fail(where, "image_mean/image_std must be finite with std > 0 (channel " + std::to_string(i) + ")");
    }
    if (c.n_embd_out != 0) range("projection width", c.n_embd_out, 1, L::kMaxEmbdOut);
    if (c.longest_edge != 0) range("preproc_image_size", c.longest_edge, c.image_size, L::kMaxLongestEdge);
    if (c.gemma3() && c.longest_edge != 0) fail(where, "gemma3 images are not tiled (preproc_image_size must be 0)");
}

VisionConfig read_vision_config(const GgufFile& f) {
    using L = VisionLimits;
    const std::string_view arch = f.architecture();
    if (arch != "clip")
        fail(f.name(), "not an mmproj file: general.architecture is '" + std::string(arch) + "', expected 'clip'");
    VisionConfig c;
    const auto proj = f.get_string("clip.projector_type");
    if (!proj) fail(f.name(), "mmproj key 'clip.projector_type' is missing");
    c.projector = std::string(*proj);
    if (c.projector != "idefics3" && c.projector != "gemma3")
        fail(f.name(), "projector type '" + c.projector + "' is not supported (supported: idefics3, gemma3)");
    if (const auto has = f.get_bool("clip.has_vision_encoder"); has && !*has)
        fail(f.name(), "clip.has_vision_encoder is false: the file has no vision tower");
    c.image_size = required_int(f, "clip.vision.image_size", 1, L::kMaxImageSize);
    c.patch_size = required_int(f, "clip.vision.patch_size", 1, L::kMaxPatchSize);
    c.n_embd = required_int(f, "clip.vision.embedding_length", 1, L::kMaxEmbd);
    c.n_ff = required_int(f, "clip.vision.feed_forward_length", 1, L::kMaxFf);
    c.n_layer = required_int(f, "clip.vision.block_count", 1, L::kMaxLayers);
    c.n_head = required_int(f, "clip.vision.attention.head_count", 1, L::kMaxHeads);
    const auto eps = f.get_f32("clip.vision.attention.layer_norm_epsilon");
    if (!eps) fail(f.name(), "mmproj key 'clip.vision.attention.layer_norm_epsilon' is missing");
    c.eps = *eps;
    c.mean = rgb(f, "clip.vision.image_mean");
    c.std = rgb(f, "clip.vision.image_std");
    if (c.gemma3()) {
        // llama.cpp's converter writes the pool side only when it is not Gemma 3's 4 (test models).
        c.scale_factor = f.find("clip.vision.projector.scale_factor")
                             ? required_int(f, "clip.vision.projector.scale_factor", 1, L::kMaxScale)
                             : 4;
    } else {
        c.scale_factor = required_int(f, "clip.vision.projector.scale_factor", 1, L::kMaxScale);
        if (f.find("clip.vision.preproc_image_size"))
            c.longest_edge = required_int(f, "clip.vision.preproc_image_size", 0, L::kMaxLongestEdge);
    }
    validate_vision_config(c, f.name());
    return c;
}

std::string describe(const VisionConfig& c) {
    if (c.gemma3()) {
        std::string s = c.projector + ": SigLIP " + std::to_string(c.n_layer) + " x " + std::to_string(c.n_embd) + " (" +
                        std::to_string(c.n_head) + " heads, FFN " + std::to_string(c.n_ff) + "), " +
                        std::to_string(c.image_size) + " px images of " + std::to_string(c.patch_size) + " px patches, " +
                        std::to_string(c.scale_factor) + " x " + std::to_string(c.scale_factor) + " average pool -> " +
                        std::to_string(c.tokens_per_tile()) + " tokens per image";
        if (c.n_embd_out) s += " of width " + std::to_string(c.n_embd_out);
        return s;
    }
    std::string s = c.projector + ": SigLIP " + std::to_string(c.n_layer) + " x " + std::to_string(c.n_embd) + " (" +
                    std::to_string(c.n_head) + " heads, FFN " + std::to_string(c.n_ff) + "), " +
                    std::to_string(c.image_size) + " px tiles of " + std::to_string(c.patch_size) +
                    " px patches, pixel shuffle " + std::to_string(c.scale_factor) + " -> " +
                    std::to_string(c.tokens_per_tile()) + " tokens per tile";
    if (c.n_embd_out) s += " of width " + std::to_string(c.n_embd_out);
    s += c.longest_edge ? ", tiling up to " + std::to_string(c.longest_edge) + " px" : ", one tile per image";
    return s;
}

}  // namespace sl
