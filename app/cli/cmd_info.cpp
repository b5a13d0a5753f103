// `sightline-cli info [--json] [--mmproj FILE] [MODEL]`: what a GGUF model file holds
// (architecture, hyperparameters, tokenizer, tensor types, chat template family), read with
// core/gguf, and how visuals enter its context: with --mmproj, the vision tower's config (loaded
// and validated by core/vision) and whether it fits the model; without, the text-only mode.
// MODEL defaults to the model scripts/setup.sh fetched.
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "core/gguf/gguf_reader.h"
#include "core/model/llama_model.h"
#include "core/model/model_loader.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/util/paths.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_model.h"
#include "kernels/cpu/tensor_types.h"

namespace {

const char* kUsage = "usage: sightline-cli info [--json] [--mmproj VISION.gguf] [MODEL.gguf]\n";

namespace fs = std::filesystem;

// The prompt format a chat template implements, recognised by its marker text.
const char* chat_template_family(std::optional<std::string_view> tmpl) {
    if (!tmpl) return "none";
    if (tmpl->find("<|im_start|>") != std::string_view::npos) return "ChatML";
    if (tmpl->find("<|start_header_id|>") != std::string_view::npos) return "Llama 3";
    if (tmpl->find("[INST]") != std::string_view::npos) return "Mistral";
    return "plain";
}

// What `info` reports; nullopt where the file does not say.
struct ModelInfo {
    std::string path;
    uint64_t file_size = 0;
    uint32_t version = 0;
    uint32_t alignment = 0;
    uint64_t data_offset = 0;
    std::string architecture, name;
    std::optional<uint32_t> layers, heads, kv_heads, head_dim, embedding, ffn, context;
    std::optional<float> rope_base, rms_eps;
    std::string rope_scaling = "none";
    std::optional<uint64_t> vocab;
    std::string tokenizer_model, tokenizer_pre;
    std::string chat_template;
    uint64_t tensor_count = 0;
    std::vector<std::pair<std::string, int>> tensor_types;  // most frequent first
    std::string supported;  // "yes", "yes, on the CPU only (...)" or "no: <what the loader refused>"
    // From the loaded model (empty when it did not load): mixture of experts, parameters, the MSA
    // indexer and the memory a context needs.
    std::string experts, parameters, indexer, memory;
    bool vision_tensors = false;  // the file holds a vision tower's tensors ("v.*")
};

std::string gib(double bytes) {
    char buf[48];
    std::snprintf(buf, sizeof buf, bytes >= 1024.0 * 1024 * 1024 ? "%.2f GiB" : "%.1f MiB",
                  bytes / (bytes >= 1024.0 * 1024 * 1024 ? 1024.0 * 1024 * 1024 : 1024.0 * 1024));
    return buf;
}

std::string count_text(double n) {
    char buf[32];
    if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
    else std::snprintf(buf, sizeof buf, "%.0f", n);
    return buf;
}

// The rows a loaded model adds: experts and active parameters, the indexer's shape, and memory.
void describe_loaded(const sl::GgufFile& f, const sl::LlamaConfig& c, ModelInfo& m) {
    double total = 0;
    for (const auto& t : f.tensors()) total += static_cast<double>(t.n_elements);
    double active = total;
    if (c.has_moe()) {
        const auto& e = c.moe;
        const int moe_layers = c.n_layer - e.dense_layers;
        char sbuf[32];
        std::snprintf(sbuf, sizeof sbuf, "%g", static_cast<double>(e.weights_scale));
        const std::string scale = sbuf;
        active -= static_cast<double>(moe_layers) * (e.n_expert - e.n_expert_used) * 3.0 * c.d_model * e.n_ff_exp;
        m.experts = std::to_string(e.n_expert) + " routed, " + std::to_string(e.n_expert_used) + " per token" +
                    (e.n_expert_shared > 0 ? ", " + std::to_string(e.n_expert_shared) + " shared" : std::string()) +
                    "; FFN " + std::to_string(e.n_ff_exp) + " each; " +
                    (e.gating == sl::LlamaConfig::Moe::Gating::Sigmoid ? "sigmoid" : "softmax") + " router" +
                    (e.norm_weights ? ", weights renormalised" : "") +
                    (e.weights_scale != 0.0f && e.weights_scale != 1.0f ? " x" + scale : "") +
                    "; layers " + std::to_string(e.dense_layers) +
                    "-" + std::to_string(c.n_layer - 1) + " (" + std::to_string(moe_layers) + ")";
    }
    m.parameters = count_text(total) + (c.has_moe() ? ", " + count_text(active) + " active per token" : std::string());
    if (c.has_indexer()) {
        const auto& x = c.indexer;
        m.indexer = "native MSA: " + std::to_string(x.n_head) + " index heads x " + std::to_string(x.head_dim) +
                    ", top " + std::to_string(x.top_k) + " blocks of " + std::to_string(x.block_size) +
                    " tokens, layers " + std::to_string(x.dense_layers) + "-" + std::to_string(c.n_layer - 1);
    }
    // K and V rows (f32 by default; --kv-type f16/q8_0 shrink them) and the index keys.
    const double kv_token = 2.0 * c.n_layer * c.n_kv_head * c.head_dim * 4.0 +
                            (c.has_indexer() ? 4.0 * (c.n_layer - c.indexer.dense_layers) * c.indexer.head_dim : 0.0);
    const double ctx = static_cast<double>(c.n_ctx_train);
    m.memory = "weights " + gib(static_cast<double>(f.file_size())) + " mapped" +
               (c.has_moe() ? " (experts read on demand)" : "") + "; context " +
               std::to_string(static_cast<long long>(kv_token / 1024.0 + 0.5)) + " KiB per token (f32 KV), " +
               gib(kv_token * ctx) + " at its " + std::to_string(c.n_ctx_train) + " tokens";
}

// Whether Sightline runs the model: the loader's whole check (hyperparameters, every tensor's
// shape and type, the tokenizer), and where it runs.
std::string support_line(const fs::path& path, ModelInfo* m = nullptr) {
    try {
        const auto loaded = sl::load_model(path);
        if (m) describe_loaded(loaded->file, loaded->model->config(), *m);
        const std::string cpu_only = sl::cuda_unsupported(loaded->model->config());
        return cpu_only.empty() ? std::string("yes") : "yes, on the CPU only (" + cpu_only + ")";
    } catch (const std::exception& e) {
        std::string why = e.what();
        const std::string prefix = path.string() + ": ";
        if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
        return "no: " + why;
    }
}

ModelInfo read_info(const fs::path& path) {
    const sl::GgufFile f = sl::GgufFile::open(path);
    ModelInfo m;
    m.path = path.string();
    m.file_size = f.file_size();
    m.version = f.version();
    m.alignment = f.alignment();
    m.data_offset = f.data_offset();
    m.architecture = std::string(f.architecture());
    m.name = std::string(f.get_string("general.name").value_or(""));
    if (!m.architecture.empty()) {
        const auto u32 = [&](const char* suffix) { return f.get_u32(sl::arch_key(f, suffix)); };
        const auto f32 = [&](const char* suffix) { return f.get_f32(sl::arch_key(f, suffix)); };
        m.layers = u32("block_count");
        m.heads = u32("attention.head_count");
        m.kv_heads = u32("attention.head_count_kv");
        m.embedding = u32("embedding_length");
        m.ffn = u32("feed_forward_length");
        m.context = u32("context_length");
        m.head_dim = u32("attention.key_length");
        if (!m.head_dim && m.embedding && m.heads && *m.heads > 0)
            m.head_dim = *m.embedding / *m.heads;
        m.rope_base = f32("rope.freq_base");
        m.rms_eps = f32("attention.layer_norm_rms_epsilon");
        const auto scaling = f.get_string(sl::arch_key(f, "rope.scaling.type"));
        if (scaling && *scaling != "none") {
            m.rope_scaling = std::string(*scaling);
            if (const auto factor = f32("rope.scaling.factor")) {
                char buf[32];
                std::snprintf(buf, sizeof buf, " x%g", static_cast<double>(*factor));
                m.rope_scaling += buf;
            }
        }
        if (const auto n = u32("vocab_size")) m.vocab = *n;
    }
    if (const auto tokens = f.get_string_array("tokenizer.ggml.tokens")) m.vocab = tokens->size();
    m.tokenizer_model = std::string(f.get_string("tokenizer.ggml.model").value_or(""));
    m.tokenizer_pre = std::string(f.get_string("tokenizer.ggml.pre").value_or(""));
    m.chat_template = chat_template_family(f.get_string("tokenizer.chat_template"));

    m.tensor_count = f.tensors().size();
    for (const auto& t : f.tensors())
        if (t.name.rfind("v.", 0) == 0) m.vision_tensors = true;
    std::map<std::string, int> counts;
    for (const auto& t : f.tensors()) ++counts[sl::kernels::tensor_type_info(t.type).name];
    m.tensor_types.assign(counts.begin(), counts.end());
    std::stable_sort(m.tensor_types.begin(), m.tensor_types.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    m.supported = support_line(path, &m);
    return m;
}

// The vision side: the mmproj's config when one is given.
struct VisionInfo {
    std::string path;
    std::optional<sl::VisionConfig> config;
    std::string mode;  // sl::vision_mode's line
};

VisionInfo read_vision(const std::optional<fs::path>& mmproj) {
    VisionInfo v;
    if (!mmproj) {
        v.mode = sl::vision_mode(nullptr).description;
        return v;
    }
    const auto vm = sl::load_mmproj(*mmproj);
    v.path = mmproj->string();
    v.config = vm->model.config;
    v.mode = sl::vision_mode(&vm->model).description;
    return v;
}

std::string rgb_text(const std::array<float, 3>& a) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%g, %g, %g", static_cast<double>(a[0]), static_cast<double>(a[1]),
                  static_cast<double>(a[2]));
    return buf;
}

template <typename T>
std::string text(const std::optional<T>& v) {
    if (!v) return "-";
    if constexpr (std::is_floating_point_v<T>) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", static_cast<double>(*v));
        return buf;
    } else {
        return std::to_string(*v);
    }
}

std::string or_dash(const std::string& s) {
    return s.empty() ? "-" : s;
}

std::string format_text(const ModelInfo& m, const VisionInfo& v) {
    char size[64];
    std::snprintf(size, sizeof size, "%.1f MiB (%llu bytes)",
                  static_cast<double>(m.file_size) / (1024.0 * 1024.0),
                  static_cast<unsigned long long>(m.file_size));
    std::string types;
    for (const auto& [name, n] : m.tensor_types)
        types += (types.empty() ? "" : ", ") + name + ": " + std::to_string(n);
    std::string tokenizer = or_dash(m.tokenizer_model);
    if (!m.tokenizer_pre.empty()) tokenizer += " (pre-tokenizer " + m.tokenizer_pre + ")";

    const std::vector<std::pair<const char*, std::string>> rows = {
        {"file", m.path},
        {"file size", size},
        {"GGUF version", std::to_string(m.version)},
        {"alignment",
         std::to_string(m.alignment) + " (data at byte " + std::to_string(m.data_offset) + ")"},
        {"architecture", or_dash(m.architecture)},
        {"name", or_dash(m.name)},
        {"layers", text(m.layers)},
        {"heads", text(m.heads)},
        {"KV heads", text(m.kv_heads)},
        {"head dim", text(m.head_dim)},
        {"embedding", text(m.embedding)},
        {"FFN", text(m.ffn)},
        {"context", text(m.context)},
        {"rope base", text(m.rope_base)},
        {"rope scaling", m.rope_scaling},
        {"RMS norm eps", text(m.rms_eps)},
        {"vocab size", text(m.vocab)},
        {"tokenizer", tokenizer},
        {"chat template", m.chat_template},
        {"tensors", std::to_string(m.tensor_count) + (types.empty() ? "" : " (" + types + ")")},
        {"visuals", v.mode},
        {"supported", m.supported},
    };
    std::vector<std::pair<const char*, std::string>> more;
    if (!m.parameters.empty()) more.push_back({"parameters", m.parameters});
    if (!m.experts.empty()) more.push_back({"experts", m.experts});
    if (!m.indexer.empty()) more.push_back({"indexer", m.indexer});
    if (!m.memory.empty()) more.push_back({"memory", m.memory});
    std::string out;
    for (const auto& list : {rows, more})
        for (const auto& [label, value] : list) {
            std::string l = label;
            out += l + std::string(l.size() < 15 ? 15 - l.size() : 1, ' ') + value + "\n";
        }
    if (!v.config) return out;
    const sl::VisionConfig& c = *v.config;
    const std::string fits = m.embedding && static_cast<int>(*m.embedding) == c.n_embd_out
                                 ? "yes"
                                 : "NO (model width " + text(m.embedding) + ")";
    const std::vector<std::pair<const char*, std::string>> vrows = {
        {"vision file", v.path},
        {"projector", c.projector},
        {"image size", std::to_string(c.image_size) + " px tiles"},
        {"patch size", std::to_string(c.patch_size) + " px (" + std::to_string(c.grid()) + " x " +
                           std::to_string(c.grid()) + " = " + std::to_string(c.n_patches()) + " patches)"},
        {"ViT", std::to_string(c.n_layer) + " layers x " + std::to_string(c.n_embd) + ", " +
                    std::to_string(c.n_head) + " heads, FFN " + std::to_string(c.n_ff)},
        {"LN eps", text(std::optional<float>(c.eps))},
        {"image mean", rgb_text(c.mean)},
        {"image std", rgb_text(c.std)},
        {"pixel shuffle", std::to_string(c.scale_factor) + " -> " + std::to_string(c.tokens_per_tile()) +
                              " tokens per tile"},
        {"projection", std::to_string(c.merged_width()) + " -> " + std::to_string(c.n_embd_out) + " (fits model: " +
                           fits + ")"},
        {"tiling", c.longest_edge ? "longest edge " + std::to_string(c.longest_edge) + " px, then " +
                                        std::to_string(c.image_size) + " px tiles + a global tile"
                                  : "none: one resized tile per image"},
    };
    for (const auto& [label, value] : vrows) {
        std::string l = label;
        out += l + std::string(l.size() < 15 ? 15 - l.size() : 1, ' ') + value + "\n";
    }
    return out;
}

template <typename T>
QJsonValue json(const std::optional<T>& v) {
    if (!v) return QJsonValue(QJsonValue::Null);
    return QJsonValue(static_cast<double>(*v));
}

QJsonValue json(const std::string& s) {
    return s.empty() ? QJsonValue(QJsonValue::Null) : QJsonValue(QString::fromStdString(s));
}

std::string format_json(const ModelInfo& m, const VisionInfo& v) {
    QJsonObject types;
    for (const auto& [name, n] : m.tensor_types) types.insert(QString::fromStdString(name), n);
    QJsonObject o;
    o.insert(QStringLiteral("file"), QString::fromStdString(m.path));
    o.insert(QStringLiteral("file_size"), static_cast<double>(m.file_size));
    o.insert(QStringLiteral("gguf_version"), static_cast<int>(m.version));
    o.insert(QStringLiteral("alignment"), static_cast<double>(m.alignment));
    o.insert(QStringLiteral("data_offset"), static_cast<double>(m.data_offset));
    o.insert(QStringLiteral("architecture"), json(m.architecture));
    o.insert(QStringLiteral("name"), json(m.name));
    o.insert(QStringLiteral("layers"), json(m.layers));
    o.insert(QStringLiteral("heads"), json(m.heads));
    o.insert(QStringLiteral("kv_heads"), json(m.kv_heads));
    o.insert(QStringLiteral("head_dim"), json(m.head_dim));
    o.insert(QStringLiteral("embedding_length"), json(m.embedding));
    o.insert(QStringLiteral("feed_forward_length"), json(m.ffn));
    o.insert(QStringLiteral("context_length"), json(m.context));
    o.insert(QStringLiteral("rope_freq_base"), json(m.rope_base));
    o.insert(QStringLiteral("rope_scaling"), json(m.rope_scaling));
    o.insert(QStringLiteral("rms_norm_eps"), json(m.rms_eps));
    o.insert(QStringLiteral("vocab_size"), json(m.vocab));
    o.insert(QStringLiteral("tokenizer_model"), json(m.tokenizer_model));
    o.insert(QStringLiteral("tokenizer_pre"), json(m.tokenizer_pre));
    o.insert(QStringLiteral("chat_template"), QString::fromStdString(m.chat_template));
    o.insert(QStringLiteral("tensor_count"), static_cast<double>(m.tensor_count));
    o.insert(QStringLiteral("tensor_types"), types);
    o.insert(QStringLiteral("visual_mode"), QString::fromStdString(v.mode));
    o.insert(QStringLiteral("supported"), QString::fromStdString(m.supported));
    if (!m.parameters.empty()) o.insert(QStringLiteral("parameters"), json(m.parameters));
    if (!m.experts.empty()) o.insert(QStringLiteral("experts"), json(m.experts));
    if (!m.indexer.empty()) o.insert(QStringLiteral("indexer"), json(m.indexer));
    if (!m.memory.empty()) o.insert(QStringLiteral("memory"), json(m.memory));
    if (v.config) {
        const sl::VisionConfig& c = *v.config;
        QJsonObject vo;
        vo.insert(QStringLiteral("file"), QString::fromStdString(v.path));
        vo.insert(QStringLiteral("projector_type"), QString::fromStdString(c.projector));
        vo.insert(QStringLiteral("image_size"), c.image_size);
        vo.insert(QStringLiteral("patch_size"), c.patch_size);
        vo.insert(QStringLiteral("embedding_length"), c.n_embd);
        vo.insert(QStringLiteral("feed_forward_length"), c.n_ff);
        vo.insert(QStringLiteral("block_count"), c.n_layer);
        vo.insert(QStringLiteral("head_count"), c.n_head);
        vo.insert(QStringLiteral("layer_norm_eps"), static_cast<double>(c.eps));
        vo.insert(QStringLiteral("scale_factor"), c.scale_factor);
        vo.insert(QStringLiteral("tokens_per_tile"), c.tokens_per_tile());
        vo.insert(QStringLiteral("projection_width"), c.n_embd_out);
        vo.insert(QStringLiteral("longest_edge"), c.longest_edge);
        vo.insert(QStringLiteral("fits_model"), m.embedding && static_cast<int>(*m.embedding) == c.n_embd_out);
        o.insert(QStringLiteral("vision"), vo);
    } else {
        o.insert(QStringLiteral("vision"), QJsonValue(QJsonValue::Null));
    }
    return QJsonDocument(o).toJson(QJsonDocument::Indented).toStdString();
}

int run(const QStringList& args) {
    bool as_json = false;
    std::optional<fs::path> model, mmproj;
    for (qsizetype i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        if (a == QLatin1String("--json")) {
            as_json = true;
        } else if (a == QLatin1String("--mmproj") && i + 1 < args.size()) {
            mmproj = fs::path(sl::arg_bytes(args[++i]));
        } else if (a.startsWith(QLatin1Char('-')) || model) {
            sl::cli::err(kUsage);
            return 2;
        } else {
            model = fs::path(sl::arg_bytes(a));
        }
    }
    const ModelInfo m = read_info(model.value_or(sl::paths::default_model()));
    VisionInfo v = read_vision(mmproj);
    if (m.architecture == "minimax-m3" && !mmproj)  // natively multimodal: say what is missing
        v.mode = std::string("MiniMax-M3's vision tower ") +
                 (m.vision_tensors ? "is in this file but not supported yet" : "is not in this file (no v.* tensors)") +
                 "; " + v.mode;
    sl::cli::out(as_json ? format_json(m, v) : format_text(m, v));
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(info, "info", "what a GGUF model file holds ([--json] [--mmproj FILE] [MODEL])", kUsage, run);
