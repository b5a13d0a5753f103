// `sightline-cli generate [--model M] --prompt TEXT [--chat] [--system TEXT] [--greedy] [-n N]
// [--seed S] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--threads N]
// [--ctx N] [--stats] [--attention dense|msa] [--topk K] [--block B] [--msa-mode MODE]
// (MODE: block-max|mean-key|hybrid[N[dM]]|native, optionally /head-max or /group-mean, then /sink
// to force block 0, then /wN for a local window of N blocks, then /pN[xM] to grow a selection to N%
// of its estimated mass, then /cNk to shrink that growth past N x 1024 tokens of context; see
// parse_msa_scoring; default: what ask and the library prefill choose, core/ask/attention_choice.h)
// [--dense-layers L] [--positions original|remap] [--remap-window N] [--kv-type f32|f16|int8] [--kv-budget SIZE] [--kv-spill-dir DIR]`: streams a
// continuation (or, with --chat, the assistant's answer) to stdout.
// --prompt-file FILE reads the prompt from FILE (`-`: stdin) instead of --prompt, for prompts past the
// argv limit (128 KiB); the bytes are taken as they are (UTF-8).
// --mmproj VISION.gguf --image FILE puts FILE (PNG/JPEG/...) before the prompt as image-patch tokens
// encoded by the vision tower (core/vision); without --mmproj the model is text-only and says so.
// --device picks where the model runs (core/runtime/backend.h): auto (CUDA when usable, else the CPU,
// saying why), cpu, or cuda (an error without a usable device).
// --attention msa runs MSA sparse attention (training-free) with top-k blocks of B tokens; on a model
// whose file has an MSA indexer (attention.indexer.*) it runs native MSA by default (the model's own
// index projections, its top-k / block size / dense layers unless --topk / --block / --dense-layers
// say otherwise) and says so; --msa-mode native asks for it explicitly (an error without an indexer).
// --positions remap (MSA) attends far selected blocks at a fixed distance (--remap-window, default
// 4096) for models trained on shorter contexts. --kv-type sets the KV cache storage (default f16); --kv-budget (e.g. 512M, 2G) caps the RAM of
// the KV pages, the rest spilling to a memory-mapped temp file (in --kv-spill-dir).
// --device-kv-budget (CUDA with MSA) keeps that much of the KV cache on the GPU and the rest in
// pinned host memory, the MSA index fetching the far blocks it shortlists; --kv-budget bounds that
// pinned memory too (generate saves nothing, so a prompt past both goes on on the CPU and says so).
#include <QStringList>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "app/cli/cli_command.h"
#include "app/common/byte_args.h"
#include "app/common/visual_pixels.h"
#include "core/ask/attention_choice.h"
#include "core/attention/msa_attention.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/runtime/thread_pool.h"
#include "core/util/error.h"
#include "core/util/paths.h"
#include "core/vision/patch_tokens.h"
#include "core/vision/vision_encoder.h"
#include "core/vision/vision_model.h"

namespace {

const char* kUsage =
    "usage: sightline-cli generate [--model M] (--prompt TEXT | --prompt-file FILE|-) [--chat] [--system TEXT] [--greedy] [-n N]\n"
    "       [--seed S] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
    "       [--threads N] [--ctx N] [--stats]\n"
    "       [--attention dense|msa] [--topk K] [--block B] [--msa-mode block-max|mean-key|hybrid[N[dM]]|native[/group-mean][/sink][/wN][/pN[xM][/cNk]]]\n"
    "       [--dense-layers L]\n"
    "       [--positions original|remap] [--remap-window N]\n"
    "       [--kv-type f32|f16|int8] [--kv-budget SIZE] [--kv-spill-dir DIR]\n"
    "       [--device auto|cpu|cuda] [--device-kv-budget SIZE]\n"
    "       [--mmproj VISION.gguf --image FILE]\n";


// Reads a whole prompt file (`-`: stdin); throws IoError naming the file when it cannot.
std::string read_prompt_file(const std::string& path) {
    const bool std_in = path == "-";
    auto fail = [&](const char* what) {
        std::string msg = std_in ? std::string("stdin") : path;
        msg += what;
        msg += std::strerror(errno);
        return sl::IoError(msg);
    };
    std::FILE* f = std_in ? stdin : std::fopen(path.c_str(), "rb");
    if (!f) throw fail(": cannot open prompt file: ");
    std::string s;
    char buf[65536];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, got);
    const bool bad = std::ferror(f) != 0;
    if (!std_in) std::fclose(f);
    if (bad) throw fail(": cannot read prompt file: ");
    return s;
}

int run(const QStringList& args) {
    std::string model_path = sl::paths::default_model().string();
    std::string prompt, system, image_path, mmproj_path;
    bool chat = false, stats = false, have_prompt = false;
    sl::GenerateOptions gen;
    sl::SessionOptions so;
    bool msa = false;
    // MSA: chosen as ask and the library prefill choose (sl::choose_attention) once the prompt's
    // length is known; the flags below override parts of that choice.
    std::string msa_mode;  // --msa-mode (empty: the product's choice)
    std::optional<int> user_topk, user_block, user_dense, user_remap;
    std::optional<sl::PositionMode> user_positions;
    // --greedy is the model's own argmax (what llama.cpp's greedy gives): no repetition penalty
    // unless --repeat-penalty asks for one. Sampling keeps the sampler's default penalty.
    std::optional<float> user_penalty;
    for (int i = 0; i < args.size(); ++i) {
        const QString& a = args[i];
        const bool has_value = i + 1 < args.size();
        auto value = [&]() { return args[++i]; };
        if (a == QLatin1String("--chat")) chat = true;
        else if (a == QLatin1String("--greedy")) gen.sampling.greedy = true;
        else if (a == QLatin1String("--stats")) stats = true;
        else if (!has_value) {
            sl::cli::err(std::string("sightline-cli generate: ") + (a.startsWith(QLatin1Char('-')) ? "missing value for " + a.toStdString() : "unexpected " + a.toStdString()) + "\n" + kUsage);
            return 2;
        } else if (a == QLatin1String("--model")) model_path = sl::arg_bytes(value());
        else if (a == QLatin1String("--prompt")) { prompt = value().toStdString(); have_prompt = true; }
        else if (a == QLatin1String("--prompt-file")) { prompt = read_prompt_file(sl::arg_bytes(value())); have_prompt = true; }
        else if (a == QLatin1String("--system")) system = value().toStdString();
        else if (a == QLatin1String("--image")) image_path = sl::arg_bytes(value());
        else if (a == QLatin1String("--mmproj")) mmproj_path = sl::arg_bytes(value());
        else if (a == QLatin1String("-n")) gen.max_tokens = value().toInt();
        else if (a == QLatin1String("--seed")) gen.sampling.seed = value().toULongLong();
        else if (a == QLatin1String("--temp")) gen.sampling.temperature = value().toFloat();
        else if (a == QLatin1String("--top-k")) gen.sampling.top_k = value().toInt();
        else if (a == QLatin1String("--top-p")) gen.sampling.top_p = value().toFloat();
        else if (a == QLatin1String("--min-p")) gen.sampling.min_p = value().toFloat();
        else if (a == QLatin1String("--repeat-penalty")) user_penalty = value().toFloat();
        else if (a == QLatin1String("--threads")) so.n_threads = value().toInt();
        else if (a == QLatin1String("--ctx")) so.n_ctx = value().toInt();
        else if (a == QLatin1String("--topk")) user_topk = value().toInt();
        else if (a == QLatin1String("--block")) user_block = value().toInt();
        else if (a == QLatin1String("--dense-layers")) user_dense = value().toInt();
        else if (a == QLatin1String("--kv-spill-dir")) so.kv_spill_dir = sl::arg_bytes(value());
        else if (a == QLatin1String("--device")) {
            so.device = value().toStdString();
            if (!sl::cli::valid_device(so.device)) {
                sl::cli::err("sightline-cli generate: bad value '" + so.device + "' for --device (auto, cpu or cuda)\n" + kUsage);
                return 2;
            }
        }
        else if (a == QLatin1String("--remap-window")) user_remap = value().toInt();
        else if (a == QLatin1String("--positions")) {
            const QString v = value();
            if (v == QLatin1String("original")) user_positions = sl::PositionMode::Original;
            else if (v == QLatin1String("remap")) user_positions = sl::PositionMode::Remap;
            else {
                sl::cli::err("sightline-cli generate: bad value '" + v.toStdString() + "' for --positions (original or remap)\n" + kUsage);
                return 2;
            }
        }
        else if (a == QLatin1String("--kv-type")) {
            const QString v = value();
            const auto t = sl::parse_kv_type(v.toStdString());
            if (!t) {
                sl::cli::err("sightline-cli generate: bad value '" + v.toStdString() + "' for --kv-type (f32, f16 or int8)\n" + kUsage);
                return 2;
            }
            so.kv_type = *t;
        } else if (a == QLatin1String("--kv-budget")) {
            const QString v = value();
            try {
                so.kv_budget_bytes = sl::parse_byte_size(v.toStdString());
            } catch (const sl::Error& e) {
                sl::cli::err(std::string("sightline-cli generate: --kv-budget: ") + e.what() + "\n" + kUsage);
                return 2;
            }
        } else if (a == QLatin1String("--device-kv-budget")) {
            const QString v = value();
            try {
                so.device_kv_budget_bytes = sl::parse_byte_size(v.toStdString());
            } catch (const sl::Error& e) {
                sl::cli::err(std::string("sightline-cli generate: --device-kv-budget: ") + e.what() + "\n" + kUsage);
                return 2;
            }
        }
        else if (a == QLatin1String("--attention") || a == QLatin1String("--msa-mode")) {
            const QString v = value();
            if (a == QLatin1String("--attention") && (v == QLatin1String("dense") || v == QLatin1String("msa"))) msa = v == QLatin1String("msa");
            else if (a == QLatin1String("--msa-mode")) {
                try {
                    sl::MsaConfig check;
                    sl::parse_msa_scoring(v.toStdString(), check);  // a bad name is a usage error here
                    msa_mode = v.toStdString();
                } catch (const sl::Error& e) {
                    sl::cli::err(std::string("sightline-cli generate: --msa-mode: ") + e.what() + "\n" + kUsage);
                    return 2;
                }
            } else {
                sl::cli::err("sightline-cli generate: bad value '" + v.toStdString() + "' for " + a.toStdString() + "\n" + kUsage);
                return 2;
            }
        }
        else {
            sl::cli::err("sightline-cli generate: unknown option " + a.toStdString() + "\n" + kUsage);
            return 2;
        }
    }
    if (user_penalty) gen.sampling.repeat_penalty = *user_penalty;
    else if (gen.sampling.greedy) gen.sampling.repeat_penalty = 1.0f;
    if (!have_prompt) {
        sl::cli::err(kUsage);
        return 2;
    }
    auto m = sl::load_model(model_path);
    const sl::LlamaConfig& config = m->model->config();
    bool native_mode = false;
    if (!msa_mode.empty()) {
        sl::MsaConfig check;
        sl::parse_msa_scoring(msa_mode, check);
        native_mode = check.scoring == sl::BlockScoring::Native;
    }
    // The model's own indexer unless a training-free mode was asked for.
    const bool native = msa && config.has_indexer() && (msa_mode.empty() || native_mode);
    if (msa && native_mode && !config.has_indexer()) {
        sl::cli::err("sightline-cli generate: --msa-mode native needs a model with an MSA indexer (attention.indexer.* keys and "
                     "blk.N.indexer.* tensors); " + model_path + " has none: use block-max, mean-key or hybrid\n");
        return 2;
    }
    if (msa && native && user_dense && *user_dense < config.indexer.dense_layers) {
        std::string e = "sightline-cli generate: --dense-layers " + std::to_string(*user_dense);
        e += ": native MSA needs at least the model's " + std::to_string(config.indexer.dense_layers);
        e += " dense layers (they have no indexer)\n";
        sl::cli::err(e);
        return 2;
    }
    std::unique_ptr<sl::LoadedVisionModel> vision;
    if (!mmproj_path.empty()) {
        vision = sl::load_mmproj(mmproj_path);
        sl::check_vision_fits_lm(vision->model.config, m->model->config().d_model, mmproj_path);
    }
    if (!image_path.empty() && !vision) {
        sl::cli::err("sightline-cli generate: --image needs --mmproj VISION.gguf (" + sl::vision_mode(nullptr).description +
                     "; `sightline-cli ingest` reads an image's text)\n");
        return 2;
    }
    std::vector<int32_t> tokens;
    std::vector<float> embeddings;
    std::vector<std::pair<int64_t, int64_t>> bidirectional;  // Gemma 3: image runs attended both ways
    std::string image_stats;
    if (!image_path.empty()) {
        // The image goes where the marker stands: before the prompt, inside the user turn.
        const std::string marker = "<__image__>";
        std::string text = marker + "\n" + prompt;
        if (chat) {
            std::vector<sl::ChatMessage> msgs;
            if (!system.empty()) msgs.push_back({"system", system});
            msgs.push_back({"user", text});
            text = m->chat->render(msgs, true);
            for (auto& s : m->chat->stop_strings()) gen.stop.push_back(s);
        }
        const auto t0 = std::chrono::steady_clock::now();
        const sl::RgbImage img = sl::app::load_rgb_file(image_path);
        sl::ThreadPool pool(so.n_threads);
        sl::VisionEncoder encoder(vision->model, pool);
        const sl::ImageTokenLayout layout = sl::image_token_layout(vision->model.config, img.width, img.height);
        const sl::EncodedImage encoded = sl::encode_image(encoder, img);
        const double encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sl::MultimodalStreamBuilder builder(*m->tokenizer, m->model->config().d_model);
        const size_t at = text.find(marker);
        builder.add_text(text.substr(0, at), chat);
        builder.add_image(layout, encoded, 0);
        builder.add_text(text.substr(at + marker.size()), chat);
        const sl::MultimodalStream stream = builder.take();
        tokens = stream.tokens;
        bidirectional = stream.bidirectional;
        embeddings.resize(tokens.size() * static_cast<size_t>(stream.width));
        stream.fill_embeddings(0, static_cast<int>(tokens.size()), embeddings.data());
        char buf[256];
        std::snprintf(buf, sizeof buf, "[image %d x %d: %d tile(s), %d embedding positions of %d, encoded in %.2f s]\n",
                      img.width, img.height, layout.plan.n_tiles(), layout.n_embeddings, static_cast<int>(tokens.size()),
                      encode_s);
        image_stats = buf;
    } else if (chat) {
        std::vector<sl::ChatMessage> msgs;
        if (!system.empty()) msgs.push_back({"system", system});
        msgs.push_back({"user", prompt});
        tokens = m->tokenizer->encode(m->chat->render(msgs, true), false, true);
        for (auto& s : m->chat->stop_strings()) gen.stop.push_back(s);
    } else {
        tokens = m->tokenizer->encode(prompt, true, false);
    }
    so.n_ctx = std::max<int>(so.n_ctx, static_cast<int>(tokens.size()) + gen.max_tokens + 1);
    sl::MsaConfig msa_cfg;
    if (msa) {
        // As ask chooses for a context of n_ctx tokens at medium effort; a native model keeps its
        // file's top-k and block size; then the flags.
        const int block = user_block ? *user_block : native ? config.indexer.block_size : 128;
        msa_cfg = sl::choose_attention(config, so.n_ctx, sl::Effort::Medium, block, native ? std::string() : msa_mode).config;
        if (native) msa_cfg.top_k = config.indexer.top_k;
        if (user_topk) msa_cfg.top_k = *user_topk;
        if (user_dense) msa_cfg.dense_layers = *user_dense;
        if (user_positions) msa_cfg.positions = *user_positions;
        if (user_remap) msa_cfg.remap_window = *user_remap;
        if (native) {
            std::string note = "[msa: native (the model's own indexer): top-" + std::to_string(msa_cfg.top_k);
            note += " of blocks of " + std::to_string(msa_cfg.block_size);
            note += ", first " + std::to_string(msa_cfg.dense_layers) + " layers dense]\n";
            sl::cli::err(note);
        } else if (config.has_indexer()) {
            sl::cli::err("[msa: training-free scoring asked for; the model's own indexer is not used]\n");
        }
    }
    so.kv_block = msa ? msa_cfg.block_size : so.kv_block;
    sl::Session session(*m, so, msa ? std::make_unique<sl::MsaAttention>(msa_cfg) : nullptr);
    if (stats || so.device != "auto") sl::cli::err("[device: " + session.device_reason() + "]\n");
    session.prefill(tokens, embeddings.empty() ? nullptr : embeddings.data(), bidirectional);
    if (!chat) sl::cli::out(prompt);
    const sl::GenerateStats st = session.generate(gen, [](std::string_view text) {
        sl::cli::out(std::string(text));
        return true;
    });
    sl::cli::out("\n");
    if (stats) {
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "[model load %.2f s | prompt %d tokens in %.2f s (%.1f tok/s) | generated %d tokens in %.2f s "
                      "(%.1f tok/s) | stop: %s | %d threads | KV %s, %.1f MiB in RAM, %lld pages spilled]\n",
                      m->load_seconds, st.prompt_tokens, st.prefill_seconds,
                      st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0, st.generated_tokens,
                      st.decode_seconds, st.decode_seconds > 0 ? st.generated_tokens / st.decode_seconds : 0.0,
                      st.stop_reason.c_str(), session.pool().size(), sl::kv_type_name(session.kv_cache().type()),
                      static_cast<double>(session.kv_cache().ram_bytes()) / (1024.0 * 1024.0),
                      static_cast<long long>(session.kv_cache().pages_spilled()));
        sl::cli::err(image_stats + buf);
    }
    return 0;
}

}  // namespace

SIGHTLINE_CLI_COMMAND(generate, "generate", "stream a continuation or chat answer from a model", kUsage, run);
