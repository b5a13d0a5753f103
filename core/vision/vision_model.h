// The weights of an Idefics3 / SmolVLM vision tower and the mmproj loader.
//
// Tensor names (llama.cpp's clip converter), ggml dims (ne0 first), D = embedding_length,
// P = patch_size, N = patches per tile, F = feed_forward_length, s = scale_factor, E = LM width:
//   v.patch_embd.weight      {P, P, 3, D}   conv kernel; a (D rows of 3*P*P) matrix, (c, ky, kx)
//   v.patch_embd.bias        {D}
//   v.position_embd.weight   {D, N}
//   v.blk.L.ln1.{weight,bias}, v.blk.L.ln2.{weight,bias}          {D}
//   v.blk.L.attn_{q,k,v,out}.weight {D, D}, .bias {D}
//   v.blk.L.ffn_up.weight {D, F}, .bias {F};  v.blk.L.ffn_down.weight {F, D}, .bias {D}
//     (files from older converters have the two names swapped; recognised by shape, as llama.cpp
//     does: a ffn_down of shape {D, F} is the up projection)
//   v.post_ln.{weight,bias}  {D}
//   mm.model.fc.weight       {D*s*s, E}     no bias                     (idefics3)
//   mm.soft_emb_norm.weight  {D}            RMS norm weight, +1 applied  (gemma3)
//   mm.input_projection.weight {E, D}       HF's (D, E) parameter, used as x @ W: transposed at
//                                           load into an f32 matrix of E rows of D (gemma3)
// Matrices may be any type the CPU kernels compute (F32, F16, BF16, Q8_0, ...) whose block size
// divides the row length; vectors (norms, biases, positions) are dequantized to f32 at load.
//
// Ownership: a LoadedVisionModel owns its mapped file; the VisionModel's TensorViews point into
// it, its vectors are its own. Immutable after load; share it freely between threads.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "core/gguf/gguf_reader.h"
#include "core/model/tensor_view.h"
#include "core/vision/vision_config.h"

namespace sl {

struct VisionLayer {
    std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;   // (D)
    TensorView wq, wk, wv, wo;                       // D rows of D
    std::vector<float> bq, bk, bv, bo;               // (D)
    TensorView up, down;                             // up: F rows of D; down: D rows of F
    std::vector<float> b_up, b_down;                 // (F), (D)
};

struct VisionWeights {
    TensorView patch_embd;              // D rows of 3*P*P
    std::vector<float> patch_bias;      // (D)
    std::vector<float> pos_embd;        // (N, D)
    std::vector<VisionLayer> layers;
    std::vector<float> post_ln_w, post_ln_b;  // (D)
    TensorView proj;                    // E rows of merged_width(); gemma3: points into proj_f32
    std::vector<float> soft_norm;       // gemma3: (D)
    std::vector<float> proj_f32;        // gemma3: (E, D), the transposed input projection
};

struct VisionModel {
    VisionConfig config;                // n_embd_out filled from `proj`
    VisionWeights weights;              // move-only in effect: `proj` may point into proj_f32
                                        // (a move keeps the vector's buffer; a copy would not)
    VisionModel() = default;
    VisionModel(VisionModel&&) = default;
    VisionModel& operator=(VisionModel&&) = default;
    VisionModel(const VisionModel&) = delete;
    VisionModel& operator=(const VisionModel&) = delete;
};

struct LoadedVisionModel {
    GgufFile file;
    VisionModel model;
};

// Opens an mmproj GGUF file and checks every key and tensor (present, shape, type, sizes under
// VisionLimits). Throws IoError / FormatError whose message starts with the path and names the key
// or tensor and what is wrong.
std::unique_ptr<LoadedVisionModel> load_mmproj(const std::filesystem::path& path);

// The same from a parsed file (the fuzzer's and tests' entry point). `file` must outlive the result.
VisionModel read_vision_model(const GgufFile& file);

// Checks that embeddings of `vision` fit a language model of width `lm_width`; throws FormatError
// naming both widths when they do not.
void check_vision_fits_lm(const VisionConfig& vision, int lm_width, const std::string& where);

}  // namespace sl
