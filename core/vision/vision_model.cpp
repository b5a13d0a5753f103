#include "core/vision/vision_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/runtime/linear.h"
#include "core/util/error.h"
#include "kernels/cpu/tensor_types.h"

namespace sl {

namespace {

[[noreturn]] void fail(const GgufFile& f, const std::string& what) {
    throw FormatError(f.name() + ": " + what);
}

std::string dims_text(const std::vector<uint64_t>& d) {
    std::string s = "{";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "}";
}

const GgufTensorInfo& find(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& want) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) fail(f, "mmproj tensor '" + name + "' is missing");
    // Trailing dims of 1 are the same shape (ggml drops them).
    std::vector<uint64_t> got = t->dims;
    while (got.size() > want.size() && got.back() == 1) got.pop_back();
    if (got != want)
        fail(f, "mmproj tensor '" + name + "' has shape " + dims_text(t->dims) + ", expected " + dims_text(want));
    const auto info = kernels::tensor_type_info(t->type);
    if (!info.name || !info.computable)
        fail(f, "mmproj tensor '" + name + "' has type " + (info.name ? info.name : std::to_string(t->type)) +
                    ", which Sightline cannot compute");
    if (want[0] % info.block_size)
        fail(f, "mmproj tensor '" + name + "' of type " + info.name + " has rows of " + std::to_string(want[0]) +
                    " elements, not a multiple of its block size " + std::to_string(info.block_size));
    return *t;
}

TensorView matrix(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1) {
    const GgufTensorInfo& t = find(f, name, {static_cast<uint64_t>(ne0), static_cast<uint64_t>(ne1)});
    TensorView v;
    v.type = static_cast<kernels::TensorType>(t.type);
    v.data = t.data;
    v.ne0 = ne0;
    v.ne1 = ne1;
    return v;
}

// A tensor of any shape `want` (elements n in total) dequantized to f32, checked finite.
std::vector<float> floats(const GgufFile& f, const std::string& name, const std::vector<uint64_t>& want) {
    const GgufTensorInfo& t = find(f, name, want);
    uint64_t n = 1;
    for (uint64_t d : want) n *= d;
    TensorView v;
    v.type = static_cast<kernels::TensorType>(t.type);
    v.data = t.data;
    v.ne0 = static_cast<int64_t>(want[0]);
    v.ne1 = static_cast<int64_t>(n / want[0]);
    std::vector<float> out(n);
    for (int64_t r = 0; r < v.ne1; ++r) embed_row(v, r, out.data() + r * v.ne0);
    for (float x : out)
        if (!std::isfinite(x)) fail(f, "mmproj tensor '" + name + "' holds a non-finite value");
    return out;
}

std::vector<float> vec(const GgufFile& f, const std::string& name, int64_t n) {
    return floats(f, name, {static_cast<uint64_t>(n)});
}

}  // namespace

VisionModel read_vision_model(const GgufFile& f) {
    VisionModel m;
    VisionConfig& c = m.config;
    c = read_vision_config(f);
    const int64_t D = c.n_embd, P = c.patch_size, F = c.n_ff, N = c.n_patches();
    VisionWeights& w = m.weights;

    const GgufTensorInfo& pe = find(f, "v.patch_embd.weight",
                                    {static_cast<uint64_t>(P), static_cast<uint64_t>(P), 3, static_cast<uint64_t>(D)});
    w.patch_embd.type = static_cast<kernels::TensorType>(pe.type);
    if (kernels::tensor_type_info(pe.type).block_size != 1 &&
        (3 * P * P) % kernels::tensor_type_info(pe.type).block_size)
        fail(f, "mmproj tensor 'v.patch_embd.weight' rows of " + std::to_string(3 * P * P) +
                    " elements do not fit its block type");
    w.patch_embd.data = pe.data;
    w.patch_embd.ne0 = 3 * P * P;
    w.patch_embd.ne1 = D;
    w.patch_bias = vec(f, "v.patch_embd.bias", D);
    w.pos_embd = floats(f, "v.position_embd.weight", {static_cast<uint64_t>(D), static_cast<uint64_t>(N)});

    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "v.blk." + std::to_string(il) + ".";
        VisionLayer& L = w.layers[static_cast<size_t>(il)];
        L.ln1_w = vec(f, p + "ln1.weight", D);
        L.ln1_b = vec(f, p + "ln1.bias", D);
        L.wq = matrix(f, p + "attn_q.weight", D, D);
        L.bq = vec(f, p + "attn_q.bias", D);
        L.wk = matrix(f, p + "attn_k.weight", D, D);
        L.bk = vec(f, p + "attn_k.bias", D);
        L.wv = matrix(f, p + "attn_v.weight", D, D);
        L.bv = vec(f, p + "attn_v.bias", D);
        L.wo = matrix(f, p + "attn_out.weight", D, D);
        L.bo = vec(f, p + "attn_out.bias", D);
        L.ln2_w = vec(f, p + "ln2.weight", D);
        L.ln2_b = vec(f, p + "ln2.bias", D);
        // Older converters wrote SigLIP's fc1 as "ffn_down" and fc2 as "ffn_up" (llama.cpp swaps
        // them back by shape): a "ffn_down" whose rows are D long is fc1.
        std::string up = p + "ffn_up", down = p + "ffn_down";
        if (const GgufTensorInfo* t = f.find_tensor(down + ".weight");
            t && F != D && t->dims.size() == 2 && t->dims[0] == static_cast<uint64_t>(D) &&
            t->dims[1] == static_cast<uint64_t>(F))
            std::swap(up, down);
        L.up = matrix(f, up + ".weight", D, F);
        L.b_up = vec(f, up + ".bias", F);
        L.down = matrix(f, down + ".weight", F, D);
        L.b_down = vec(f, down + ".bias", D);
    }
    w.post_ln_w = vec(f, "v.post_ln.weight", D);
    w.post_ln_b = vec(f, "v.post_ln.bias", D);

    if (c.gemma3()) {
        w.soft_norm = vec(f, "mm.soft_emb_norm.weight", D);
        const GgufTensorInfo* ip = f.find_tensor("mm.input_projection.weight");
        if (!ip) fail(f, "mmproj tensor 'mm.input_projection.weight' is missing");
        if (ip->dims.size() != 2 || ip->dims[1] != static_cast<uint64_t>(D))
            fail(f, "mmproj tensor 'mm.input_projection.weight' has shape " + dims_text(ip->dims) + ", expected {LM width, " +
                        std::to_string(D) + "}");
        if (ip->dims[0] < 1 || ip->dims[0] > static_cast<uint64_t>(VisionLimits::kMaxEmbdOut))
            fail(f, "mmproj tensor 'mm.input_projection.weight' projects to width " + std::to_string(ip->dims[0]) +
                        ", outside [1, " + std::to_string(VisionLimits::kMaxEmbdOut) + "]");
        c.n_embd_out = static_cast<int>(ip->dims[0]);
        const int64_t E = c.n_embd_out;
        // (D rows of E) as stored -> (E rows of D), the layout linear() computes with.
        const std::vector<float> stored = floats(f, "mm.input_projection.weight", {static_cast<uint64_t>(E), static_cast<uint64_t>(D)});
        w.proj_f32.resize(stored.size());
        for (int64_t d = 0; d < D; ++d)
            for (int64_t e = 0; e < E; ++e) w.proj_f32[static_cast<size_t>(e * D + d)] = stored[static_cast<size_t>(d * E + e)];
        w.proj.type = kernels::TensorType::F32;
        w.proj.data = w.proj_f32.data();
        w.proj.ne0 = D;
        w.proj.ne1 = E;
    } else {
        const GgufTensorInfo* fc = f.find_tensor("mm.model.fc.weight");
        if (!fc) fail(f, "mmproj tensor 'mm.model.fc.weight' is missing");
        if (fc->dims.size() != 2)
            fail(f, "mmproj tensor 'mm.model.fc.weight' has shape " + dims_text(fc->dims) + ", expected {" +
                        std::to_string(c.merged_width()) + ", LM width}");
        if (fc->dims[1] < 1 || fc->dims[1] > static_cast<uint64_t>(VisionLimits::kMaxEmbdOut))
            fail(f, "mmproj tensor 'mm.model.fc.weight' projects to width " + std::to_string(fc->dims[1]) +
                        ", outside [1, " + std::to_string(VisionLimits::kMaxEmbdOut) + "]");
        c.n_embd_out = static_cast<int>(fc->dims[1]);
        w.proj = matrix(f, "mm.model.fc.weight", c.merged_width(), c.n_embd_out);
    }
    if (const auto pd = f.get_u64("clip.vision.projection_dim"); pd && *pd != static_cast<uint64_t>(c.n_embd_out))
        fail(f, "clip.vision.projection_dim = " + std::to_string(*pd) + " but the projector maps to width " +
                    std::to_string(c.n_embd_out));
    validate_vision_config(c, f.name());
    return m;
}

std::unique_ptr<LoadedVisionModel> load_mmproj(const std::filesystem::path& path) {
    auto out = std::make_unique<LoadedVisionModel>(LoadedVisionModel{GgufFile::open(path), {}});
    out->model = read_vision_model(out->file);
    return out;
}

void check_vision_fits_lm(const VisionConfig& vision, int lm_width, const std::string& where) {
    if (vision.n_embd_out != lm_width)
        throw FormatError(where + ": the vision projector emits embeddings of width " +
                          std::to_string(vision.n_embd_out) + " but the language model's width is " +
                          std::to_string(lm_width) + " (mmproj and model do not belong together)");
}

}  // namespace sl
