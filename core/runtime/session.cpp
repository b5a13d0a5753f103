#include "core/runtime/session.h"

#include <algorithm>
#include <chrono>

#include <filesystem>
#include <optional>
#include <utility>

#include "core/attention/block_index.h"
#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_file.h"
#include "core/runtime/cuda_backend_model.h"
#include "core/util/mapped_file.h"
#include "core/util/sha256.h"
#include "core/model/model_loader.h"
#include "core/tokenizer/unicode.h"
#include "core/util/error.h"
#include "core/util/file_identity.h"

namespace sl {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`: text that
// must be held back because the next token may complete a stop string.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
    size_t keep = 0;
    for (const auto& s : stops) {
        for (size_t len = std::min(s.size() - 1, text.size()); len > keep; --len) {
            if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
                keep = len;
                break;
            }
        }
    }
    return keep;
}

// Layer l's saved block summaries of every block of a file's context (kv_file.h kind 4): a delta
// file's from its first block on, its base's before that (when the base has them in the same
// layout); empty when the layer has none usable. `page_size`: the session's KV page size.
struct LayerSummaries {
    std::vector<float> data;
    uint32_t S = 0, F = 0;
};
LayerSummaries layer_summaries(std::span<const uint8_t> file, const KvFileContents& saved, std::span<const uint8_t> base_file,
                               const KvFileContents* base, int l, int page_size) {
    LayerSummaries out;
    if (!saved.has_summaries(l)) return out;
    const auto li = static_cast<size_t>(l);
    const uint32_t S = saved.summary_block[li], F = saved.summary_floats[li];
    const uint64_t p0 = saved.base.tokens;
    // A delta's first summary block must start within its own pages (the page holding its base
    // tokens): its summary was taken over the saver's keys of that whole block.
    if (p0 > 0 && page_size % static_cast<int>(S) != 0) return out;
    const auto b0 = static_cast<int64_t>(p0 / S);
    std::vector<float> data = read_block_summaries(file, saved, l, b0);
    if (b0 > 0) {
        if (!base || !base->has_summaries(l) || base->summary_block[li] != S || base->summary_floats[li] != F) return out;
        std::vector<float> head = read_block_summaries(base_file, *base, l, 0, b0);
        if (head.size() != static_cast<size_t>(b0) * F) return out;
        data.insert(data.begin(), head.begin(), head.end());
    }
    out.data = std::move(data);
    out.S = S;
    out.F = F;
    return out;
}

// Session::device_reason() after the device failed.
std::string device_failed(const std::string& what) {
    return "CPU: the CUDA device failed (" + what + "); the context went on on the CPU";
}

}  // namespace

std::string device_lacks(const SessionNeeds& n) {
    std::string why;
    auto add = [&](const char* what) { why += (why.empty() ? "" : ", ") + std::string(what); };
    // Saved contexts and truncation run on the device (the context mirrored through the host
    // cache: Session::save / restore), and image embeddings in causal calls; bidirectional runs do
    // not (nor Gemma 3, which has them: cuda_unsupported).
    if (n.bidirectional) add("bidirectional image runs");
    return why;
}

Session::Session(const LoadedModel& model, SessionOptions options, std::unique_ptr<Attention> attention)
    : model_(model),
      options_(options),
      pool_(options.n_threads),
      kv_(model.model->config().n_layer, options.n_ctx, model.model->config().n_kv_head, model.model->config().head_dim,
          KvCacheOptions{options.kv_type, options.kv_block, options.kv_budget_bytes, options.kv_spill_dir}),
      attention_(attention ? std::move(attention) : std::make_unique<DenseAttention>()),
      backend_(options.runner_factory ? BackendChoice{cpu_backend(), ""} : backend_for_model(options.device)) {
    if (options.runner_factory) {  // an injected device (tests, other devices): it runs everything
        msa_ = dynamic_cast<MsaAttention*>(attention_.get());
        gpu_ = options.runner_factory(model, msa_ ? &msa_->config() : nullptr);
        if (!gpu_) throw Error("the session's runner factory made no runner");
        backend_.reason = "device runner (injected)";
        return;
    }
    if (backend_.backend->kind() != DeviceKind::Cuda) return;
    if (std::string(attention_->name()) != "dense") {
        // MSA runs on the device when the device has every piece of its configuration
        // (cuda_msa_lacks); its selections, with their mass while citations are recorded, come
        // back to the caller's MsaAttention (step). Anything else stays on the CPU, saying why.
        auto* msa = dynamic_cast<MsaAttention*>(attention_.get());
        const std::string why = msa ? cuda_msa_lacks(msa->config()) : std::string("the ") + attention_->name() + " attention";
        if (!why.empty()) {
            backend_ = {cpu_backend(), "CPU: " + std::string(attention_->name()) + " attention runs on the CPU for now: the device lacks " +
                                           why + " (" + backend_.reason + ")"};
            return;
        }
        msa_ = msa;
    }
    if (const std::string why = device_lacks(options.needs); !why.empty()) {
        backend_ = {cpu_backend(), "CPU: needs what does not run on CUDA yet: " + why + " (" + backend_.reason + ")"};
        return;
    }
    if (const std::string why = cuda_unsupported(model.model->config()); !why.empty()) {
        backend_ = {cpu_backend(), "CPU: " + why};
        return;
    }
    gpu_ = std::make_unique<CudaLlamaRunner>(*model.model, options.n_ctx, msa_ ? &msa_->config() : nullptr,
                                             options.device_kv_budget_bytes, options.kv_budget_bytes);
}

Session::~Session() = default;

void Session::step(std::span<const int32_t> tokens, const float* embeddings, bool causal) {
    logits_.resize(static_cast<size_t>(model_.model->config().n_vocab));
    if (gpu_ && !device_failure_.empty()) fall_back_to_cpu(std::exchange(device_failure_, {}));  // an idle fill's
    if (gpu_) try {
        if (!causal) throw Error("bidirectional runs (Gemma 3's images) do not run on the CUDA backend yet (use --device cpu)");
        // Citations: a decode step's selections and their mass go to the MsaAttention's observer,
        // as the CPU's forward hands them over (SelectionCollector turns token_mass on).
        const bool record = msa_ && msa_->config().token_mass && tokens.size() == 1;
        gpu_->set_record_mass(record);
        gpu_->forward(tokens.data(), static_cast<int>(tokens.size()), logits_.data(), embeddings);
        const auto pos0 = static_cast<int64_t>(tokens_.size());
        tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());  // before the observer, which may throw
        check_pages();  // blocks read back from the mirror (the third tier) are checked as they are
        if (record) {
            const LlamaConfig& c = model_.model->config();
            AttentionCall call;
            call.pos0 = pos0;
            call.n_tokens = 1;
            call.n_head = c.n_head;
            call.n_kv_head = c.n_kv_head;
            call.head_dim = c.head_dim;
            for (int l = 0; l < c.n_layer; ++l) {
                call.layer = l;
                msa_->deliver(call, gpu_->recorded_selections(l));
            }
        }
        return;
    } catch (const DeviceError& e) {
        fall_back_to_cpu(e.what());  // then this call runs on the CPU, below
    }
    model_.model->forward(tokens.data(), static_cast<int>(tokens.size()), static_cast<int64_t>(tokens_.size()), kv_,
                          *attention_, pool_, scratch_, logits_.data(), false, embeddings, causal);
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    check_pages();
}

int64_t Session::fill_device(int64_t max_blocks) {
    if (!gpu_ || max_blocks <= 0) return 0;
    int64_t brought = 0;
    try {
        brought = gpu_->fill_placed(max_blocks);
    } catch (const DeviceError& e) {
        // Not handed to the CPU here (idle time would recompute the positions past the mirror, and
        // the owner drops the session): the next step does that first.
        device_failure_ = e.what();
        throw;
    }
    check_pages();  // the pages read back are checked as they are converted
    return brought;
}

std::string Session::damaged_message(std::string& file) const {
    const auto d = kv_.damaged();
    file = "the restored context";
    for (const auto& [b, p] : page_files_)
        if (b <= d->second) file = p;
    return file + ": not a usable saved context: page checksum mismatch (layer " + std::to_string(d->first) + ", block " +
           std::to_string(d->second) + "), found when it was first read";
}

void Session::check_pages() {
    const auto d = kv_.damaged();
    if (!d) return;
    std::string file;
    const std::string what = damaged_message(file);
    reset();  // what was computed from the damaged page is not this context's
    file_memo_.clear();  // a save to that file verifies it whole (if it is still there)
    throw DamagedContextError(file, d->first, d->second, what);
}

void Session::check_pages_saving() const {
    const auto d = kv_.damaged();
    if (!d) return;
    std::string file;
    const std::string what = damaged_message(file);
    file_memo_.clear();
    throw DamagedContextError(file, d->first, d->second, what);
}

void Session::fall_back_to_cpu(const std::string& what) {
    // The device's context is lost; the host mirror holds its first mirrored_ positions (saved or
    // restored), and the tokens say what the rest was.
    const auto have = std::min<int64_t>(mirrored_, static_cast<int64_t>(tokens_.size()));
    std::vector<int32_t> rest(tokens_.begin() + have, tokens_.end());
    if (std::find(rest.begin(), rest.end(), LlamaModel::kEmbeddingToken) != rest.end())
        throw Error("the CUDA device failed (" + what +
                    ") and the context's image positions past its last save cannot be recomputed on the CPU");
    gpu_.reset();
    msa_ = nullptr;
    mirrored_ = 0;
    backend_ = {cpu_backend(), device_failed(what)};
    attention_->reset_state();
    kv_.set_n_past(have);
    tokens_.resize(static_cast<size_t>(have));
    const size_t batch = static_cast<size_t>(std::max(1, options_.n_batch));
    for (size_t i = 0; i < rest.size(); i += batch) {
        const int n = static_cast<int>(std::min(batch, rest.size() - i));
        model_.model->forward(rest.data() + i, n, static_cast<int64_t>(tokens_.size()), kv_, *attention_, pool_, scratch_,
                              logits_.data(), false, nullptr, true);
        tokens_.insert(tokens_.end(), rest.begin() + static_cast<std::ptrdiff_t>(i),
                       rest.begin() + static_cast<std::ptrdiff_t>(i + static_cast<size_t>(n)));
    }
}

void Session::prefill(std::span<const int32_t> tokens) { prefill(tokens, nullptr); }

void Session::prefill(std::span<const int32_t> tokens, const float* embeddings) { prefill(tokens, embeddings, {}); }

void Session::prefill(std::span<const int32_t> tokens, const float* embeddings,
                      std::span<const std::pair<int64_t, int64_t>> bidirectional) {
    const auto start = std::chrono::steady_clock::now();
    if (tokens_.size() + tokens.size() > static_cast<size_t>(kv_.n_ctx()))
        throw Error("prompt of " + std::to_string(tokens.size()) + " tokens does not fit the context (" +
                    std::to_string(kv_.n_ctx() - static_cast<int>(tokens_.size())) + " positions left)");
    const size_t batch = static_cast<size_t>(std::max(1, options_.n_batch));
    const size_t d = static_cast<size_t>(model_.model->config().d_model);
    const auto n = static_cast<int64_t>(tokens.size());
    int64_t prev = 0;
    for (const auto& [b, e] : bidirectional)
        if (b < prev || e <= b || e > n) throw Error("prefill: bidirectional run [" + std::to_string(b) + ", " + std::to_string(e) + ") out of order or outside the prompt");
        else prev = e;
    size_t next = 0;  // the next bidirectional run
    for (int64_t i = 0; i < n;) {
        const bool in_run = next < bidirectional.size() && bidirectional[next].first == i;
        const int64_t end = in_run ? bidirectional[next].second
                                   : std::min<int64_t>(i + static_cast<int64_t>(batch),
                                                       next < bidirectional.size() ? bidirectional[next].first : n);
        step(tokens.subspan(static_cast<size_t>(i), static_cast<size_t>(end - i)),
             embeddings ? embeddings + static_cast<size_t>(i) * d : nullptr, !in_run);
        if (in_run) ++next;
        i = end;
    }
    stats_.prompt_tokens = static_cast<int>(tokens.size());
    stats_.prefill_seconds = seconds_since(start);
}

GenerateStats Session::generate(const GenerateOptions& o, const std::function<bool(std::string_view)>& on_text,
                                const std::atomic<bool>* cancel) {
    if (logits_.empty()) throw Error("generate: nothing prefilled");
    const Tokenizer& tok = *model_.tokenizer;
    Sampler sampler(o.sampling);
    const auto start = std::chrono::steady_clock::now();
    stats_.generated_tokens = 0;
    stats_.stop_reason = "max tokens";
    std::string pending;  // decoded bytes not yet passed to on_text
    bool stopped = false;
    std::vector<float> scratch;
    while (stats_.generated_tokens < o.max_tokens) {
        if (cancel && cancel->load()) {
            stats_.stop_reason = "cancelled";
            break;
        }
        scratch = logits_;
        const int32_t next = sampler.sample(scratch.data(), static_cast<int>(scratch.size()), tokens_);
        if (tok.is_end_of_generation(next)) {
            stats_.stop_reason = "eos";
            break;
        }
        if (tokens_.size() >= static_cast<size_t>(kv_.n_ctx())) {
            stats_.stop_reason = "context full";
            break;
        }
        const int32_t one[1] = {next};
        step(one);
        ++stats_.generated_tokens;
        if (!tok.is_control(next)) pending += tok.piece(next);
        // A stop string ends the answer before it.
        for (const auto& s : o.stop) {
            if (const size_t at = pending.find(s); !s.empty() && at != std::string::npos) {
                pending.resize(at);
                stopped = true;
            }
        }
        size_t ready = stopped ? pending.size() : pending.size() - held_back(pending, o.stop);
        ready = unicode::utf8_complete_prefix(std::string_view(pending).substr(0, ready));
        if (ready > 0) {
            if (!on_text(std::string_view(pending).substr(0, ready))) {
                stats_.stop_reason = "cancelled";
                pending.erase(0, ready);
                break;
            }
            pending.erase(0, ready);
        }
        if (stopped) {
            stats_.stop_reason = "stop string";
            break;
        }
    }
    if (!pending.empty() && !stopped && stats_.stop_reason != "cancelled") on_text(pending);
    stats_.decode_seconds = seconds_since(start);
    return stats_;
}

void Session::reset() {
    tokens_.clear();
    page_files_.clear();
    if (gpu_) gpu_->reset();
    mirrored_ = 0;
    logits_.clear();
    kv_.clear();
    attention_->reset_state();
}

void Session::truncate(int64_t n) {
    if (n < 0 || n > static_cast<int64_t>(tokens_.size()))
        throw Error("truncate to " + std::to_string(n) + " tokens: the context holds " + std::to_string(tokens_.size()));
    if (n == static_cast<int64_t>(tokens_.size())) return;
    if (n == 0) {
        reset();
        return;
    }
    tokens_.resize(static_cast<size_t>(n));
    if (gpu_) {
        gpu_->truncate(n);
        set_mirrored(std::min(mirrored_, n));
        kv_.set_n_past(mirrored_);
    } else {
        kv_.set_n_past(n);
    }
    logits_.clear();
    attention_->truncate_state(n);  // MSA's block index and index keys of positions [n, ...)
}

std::string model_fingerprint(const LoadedModel& model) {
    const GgufFile& f = model.file;
    Sha256 h;
    const uint64_t size = f.file_size();
    h.update(&size, sizeof size);
    const uint64_t head = std::min<uint64_t>(f.data_offset(), f.bytes().size());
    h.update(f.bytes().data(), static_cast<size_t>(head));
    // Models that differ only in their weights (fine-tunes, other seeds) share the header: add 33
    // evenly spaced 4 KiB samples of the tensor data (cheap: ~132 KiB read).
    const uint64_t data = f.bytes().size() - head;
    constexpr uint64_t kSample = 4096, kSamples = 32;
    for (uint64_t i = 0; i <= kSamples && data > 0; ++i) {
        const uint64_t at = head + (data > kSample ? (data - kSample) / kSamples * i : 0);
        h.update(f.bytes().data() + at, static_cast<size_t>(std::min(kSample, data)));
    }
    return to_hex(h.digest());
}

const std::string& Session::fingerprint() const {
    if (fingerprint_.empty()) fingerprint_ = model_fingerprint(model_);
    return fingerprint_;
}

KvFileInfo Session::file_info() const {
    const LlamaConfig& c = model_.model->config();
    KvFileInfo info;
    info.fingerprint = fingerprint();
    info.n_layer = static_cast<uint32_t>(c.n_layer);
    info.n_kv_head = static_cast<uint32_t>(c.n_kv_head);
    info.head_dim = static_cast<uint32_t>(c.head_dim);
    info.block_size = static_cast<uint32_t>(kv_.block_size());
    info.n_vocab = static_cast<uint32_t>(c.n_vocab);
    info.type = kv_.type();
    info.page_bytes = kv_.page_bytes();
    info.attention = attention_->signature();
    return info;
}

std::vector<KvIndexKeys> Session::index_keys_of() const {
    const int n_layer = model_.model->config().n_layer;
    std::vector<KvIndexKeys> keys(static_cast<size_t>(n_layer));
    for (int l = 0; l < n_layer; ++l) {
        const Attention::IndexKeys k = attention_->index_keys(l);
        keys[static_cast<size_t>(l)] = {k.data, k.n, k.dim};
    }
    return keys;
}

std::vector<KvBlockSummaries> Session::summaries_of() const {
    const int n_layer = model_.model->config().n_layer;
    std::vector<KvBlockSummaries> out(static_cast<size_t>(n_layer));
    for (int l = 0; l < n_layer; ++l) {
        KvBlockSummaries s = gpu_ ? gpu_->key_means(l) : attention_->block_summaries(l);
        // Only summaries of exactly this context (on a device, its mean keys: its session's
        // attention summarizes nothing the device appended).
        if (s.get && s.n == static_cast<int64_t>(tokens_.size())) out[static_cast<size_t>(l)] = std::move(s);
    }
    return out;
}

void Session::hand_back_summaries(std::span<const uint8_t> file, const KvFileContents& saved,
                                  std::span<const uint8_t> base_file, const KvFileContents* base, int64_t n, bool onto) {
    if (gpu_) return;  // the device keeps its own (a CPU fallback summarizes the keys)
    const uint64_t p0 = saved.base.tokens;
    for (int l = 0; l < model_.model->config().n_layer; ++l) {
        if (!saved.has_summaries(l)) continue;
        const auto li = static_cast<size_t>(l);
        const uint32_t S = saved.summary_block[li], F = saved.summary_floats[li];
        if (!attention_->takes_block_summaries(l, static_cast<int>(S))) continue;
        if (onto) {  // blocks before the delta's first are the ones the attention holds
            if (p0 > 0 && kv_.block_size() % static_cast<int>(S) != 0) continue;
            const auto b0 = static_cast<int64_t>(p0 / S);
            std::vector<float> data = read_block_summaries(file, saved, l, b0);
            attention_->set_block_summaries(l, kv_, data.data(), b0, n, static_cast<int>(S), static_cast<int>(F));
            continue;
        }
        const LayerSummaries sum = layer_summaries(file, saved, base_file, base, l, kv_.block_size());
        if (sum.data.empty()) continue;
        attention_->set_block_summaries(l, kv_, sum.data.data(), 0, n, static_cast<int>(S), static_cast<int>(F));
    }
}

bool Session::place_on_device(std::span<const uint8_t> file, const KvFileContents& saved, std::span<const uint8_t> base_file,
                              const KvFileContents* base, int64_t n) {
    const LlamaConfig& c = model_.model->config();
    if (!gpu_ || c.n_layer < 1 || !saved.has_summaries(0)) return false;
    const uint32_t S = saved.summary_block[0];
    for (int l = 1; l < c.n_layer; ++l)
        if (!saved.has_summaries(l) || saved.summary_block[static_cast<size_t>(l)] != S) return false;
    const int64_t blocks = (n + S - 1) / S;
    const size_t dkv = static_cast<size_t>(c.n_kv_head) * static_cast<size_t>(c.head_dim);
    auto means = [&](int l) -> std::vector<float> {
        const LayerSummaries sum = layer_summaries(file, saved, base_file, base, l, kv_.block_size());
        if (sum.data.size() < static_cast<size_t>(blocks) * sum.F) return {};
        std::vector<float> out(static_cast<size_t>(blocks) * dkv);
        if (!BlockIndex::summary_means(sum.data.data(), blocks, sum.F, c.n_kv_head, c.head_dim, out.data())) return {};
        return out;
    };
    return gpu_->place_kv(kv_, n, static_cast<int>(S), means);
}

void Session::set_mirrored(int64_t n) const {
    mirrored_ = n;
    if (gpu_) gpu_->set_backing(&kv_, n);
}

void Session::mirror_device(const std::string& path) const {
    if (!gpu_) return;
    const auto n = static_cast<int64_t>(tokens_.size());
    try {
        if (mirrored_ < n) gpu_->download_kv(kv_, mirrored_);
    } catch (const DeviceError& e) {  // nothing written; the next forward call falls back to the CPU
        throw DeviceError(path + ": cannot save: " + e.what());
    }
    set_mirrored(n);
}

void Session::write_pages(const std::string& path, const std::function<void(KvPageSource&)>& write) const {
    const auto n = static_cast<int64_t>(tokens_.size());
    // On a device, straight from its blocks (the mirror's pages for blocks wholly before mirrored_):
    // no host copy of the context (23 GB at a million tokens); the mirror then reads the new
    // positions from the file.
    if (gpu_ && mirrored_ < n) {
        bool streamed = false;
        try {
            streamed = gpu_->save_pages(kv_, mirrored_, write);
        } catch (const DeviceError& e) {  // nothing committed; the next forward call falls back to the CPU
            throw DeviceError(path + ": cannot save: " + e.what());
        }
        if (streamed) {
            // The file is saved; a mirror that cannot map it stays as it was (the next save reads
            // the device again).
            mirror_from_file(path);
            return;
        }
    }
    mirror_device(path);
    KvCachePages pages(file_info(), kv_, tokens_, path);
    write(pages);
    if (gpu_) mirror_from_file(path);  // the mirror reads the file just saved (earlier files let go)
}

void Session::write_checked(const std::string& path, const std::function<void(KvPageSource&)>& write) const {
    // A restored page read here for the first time may fail its check: the save must not commit
    // it under a fresh checksum (KvCachePages / KvStorePages hand pages out before the commit).
    check_pages_saving();
    write_pages(path, [&](KvPageSource& pages) {
        struct Checked final : KvPageSource {
            KvPageSource& in;
            const Session& s;
            Checked(KvPageSource& i, const Session& se) : in(i), s(se) {}
            KvPage page(int layer, int64_t block) override {
                const KvPage p = in.page(layer, block);
                s.check_pages_saving();
                return p;
            }
        } checked(pages, *this);
        write(checked);
    });
}

bool Session::mirror_from_file(const std::string& path) const {
    const auto n = static_cast<int64_t>(tokens_.size());
    if (!gpu_) return true;
    try {
        auto map = std::make_shared<const MappedFile>(path);
        const KvFileContents saved = parse_kv_file(map->bytes(), path, KvVerify::Headers);
        check_file(saved.info, path);  // FormatError: not this session's model or cache settings
        const int64_t B = kv_.block_size();
        const uint64_t p0 = saved.base.tokens;
        if (saved.n_tokens() != static_cast<uint64_t>(n) ||
            !std::equal(saved.tokens.begin(), saved.tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(p0)) ||
            (p0 > 0 && kv_tokens_hash(tokens_, p0) != saved.base.hash))
            return false;
        const int64_t fb = static_cast<int64_t>(p0) / B;  // the file's first block
        // A delta's blocks before fb are its base's: mapped from the base where the mirror lacks
        // them, each page checked against its record (the base was not verified whole here).
        std::shared_ptr<const MappedFile> base_map;
        KvFileContents base;
        if (mirrored_ / B < fb) {
            const std::string base_path = (std::filesystem::path(path).parent_path() / saved.base.name).string();
            base_map = std::make_shared<const MappedFile>(base_path);
            base = parse_kv_file(base_map->bytes(), base_path, KvVerify::Headers);
            check_file(base.info, base_path);
            if (!base.base.empty() || base.tokens.size() < p0 || kv_tokens_hash(base.tokens, p0) != saved.base.hash) return false;
            for (int l = 0; l < kv_.n_layer(); ++l)
                for (int64_t b = mirrored_ / B; b < fb; ++b)
                    if (!kv_page_intact(base_map->bytes(), base, l, b)) return false;
        }
        // The base's blocks the mirror lacks, then every block the file holds (earlier saves'
        // maps are then let go).
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t b = mirrored_ / B; b < fb; ++b)
                kv_.attach(l, b, base_map->data() + base.page_offset[static_cast<size_t>(l * base.n_blocks + b)], base_map);
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t b = fb; b < saved.n_blocks; ++b)
                kv_.attach(l, b, map->data() + saved.page_offset[static_cast<size_t>(l * saved.n_blocks + b)], map);
        kv_.set_n_past(n);     // under a budget it may spill (IoError): the pages above are the context's either way
        kv_.release_unused();  // maps of earlier saves no page reads any more
    } catch (const std::exception&) {
        return false;  // the checks come before any attach; past them the mirror holds this context's pages
    }
    set_mirrored(n);
    return true;
}

void Session::save(const std::string& path) const {
    if (tokens_.empty()) throw Error(path + ": cannot save an empty context");
    const KvFileInfo info = file_info();
    const std::vector<KvIndexKeys> keys = index_keys_of();
    const std::vector<KvBlockSummaries> sums = summaries_of();
    std::optional<KvFileContents> prefix;  // `path` holds a saved prefix of this context
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
        try {
            const MappedFile map(path);
            const bool ours = !file_memo_.empty() && file_memo_ == file_identity(path);
            KvFileContents saved = parse_kv_file(map.bytes(), path, ours ? KvVerify::Headers : KvVerify::Full);
            const KvFileInfo& s = saved.info;
            const uint64_t p0 = saved.base.tokens;
            const bool same = s.fingerprint == info.fingerprint && s.n_layer == info.n_layer && s.n_kv_head == info.n_kv_head &&
                              s.head_dim == info.head_dim && s.block_size == info.block_size && s.n_vocab == info.n_vocab &&
                              s.type == info.type && s.attention == info.attention && saved.n_tokens() <= tokens_.size() &&
                              std::equal(saved.tokens.begin(), saved.tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(p0)) &&
                              (p0 == 0 || kv_tokens_hash(tokens_, p0) == saved.base.hash);
            if (same) prefix = std::move(saved);
        } catch (const FormatError&) {
            // Not a usable save of a prefix: written anew below.
        }
    }
    if (prefix) {
        const KvFileContents& saved = *prefix;
        if (saved.n_tokens() < tokens_.size())
            write_checked(path, [&](KvPageSource& pages) {
                append_kv_file(path, saved, pages, tokens_, logits_, keys, sums);
            });
        else if (!mirror_from_file(path))  // the file holds the whole context already
            mirror_device(path);
    } else {
        write_checked(path, [&](KvPageSource& pages) { write_kv_file(path, info, pages, tokens_, logits_, keys, {}, sums); });
    }
    file_memo_ = file_identity(path);
}

void Session::save_delta(const std::string& path, const std::string& base_path, int64_t shared) const {
    const std::filesystem::path bp(base_path), pp(path);
    if (bp.parent_path() != pp.parent_path())
        throw Error(path + ": cannot save over " + base_path + ": a base must be in the same folder");
    if (shared <= 0 || shared >= static_cast<int64_t>(tokens_.size()))
        throw Error(path + ": cannot save over " + std::to_string(shared) + " base tokens of a context of " +
                    std::to_string(tokens_.size()));
    const KvFileInfo info = file_info();
    {
        const MappedFile map(base_path);
        const KvFileContents base = parse_kv_file(map.bytes(), base_path, KvVerify::Headers);
        if (!base.base.empty()) throw Error(path + ": cannot save over " + base_path + ": it is itself a delta file");
        const KvFileInfo& s = base.info;
        if (s.fingerprint != info.fingerprint || s.n_layer != info.n_layer || s.n_kv_head != info.n_kv_head ||
            s.head_dim != info.head_dim || s.block_size != info.block_size || s.n_vocab != info.n_vocab || s.type != info.type)
            throw Error(path + ": cannot save over " + base_path + ": saved with another model or cache settings");
        if (base.tokens.size() < static_cast<size_t>(shared) ||
            !std::equal(base.tokens.begin(), base.tokens.begin() + shared, tokens_.begin()))
            throw Error(path + ": cannot save over " + base_path + ": it does not hold this context's first " +
                        std::to_string(shared) + " tokens");
    }
    KvFileBase b;
    b.name = bp.filename().string();
    b.tokens = static_cast<uint64_t>(shared);
    b.hash = kv_tokens_hash(tokens_, static_cast<size_t>(shared));
    const std::vector<KvIndexKeys> keys = index_keys_of();
    const std::vector<KvBlockSummaries> sums = summaries_of();
    write_checked(path, [&](KvPageSource& pages) { write_kv_file(path, info, pages, tokens_, logits_, keys, b, sums); });
    file_memo_ = file_identity(path);
}

void Session::check_file(const KvFileInfo& s, const std::string& name) const {
    const LlamaConfig& c = model_.model->config();
    if (s.fingerprint != fingerprint())
        throw FormatError(name + ": saved with another model (fingerprint " + s.fingerprint.substr(0, 12) + "..., this model " +
                          fingerprint().substr(0, 12) + "...)");
    if (s.n_layer != static_cast<uint32_t>(c.n_layer) || s.n_kv_head != static_cast<uint32_t>(c.n_kv_head) ||
        s.head_dim != static_cast<uint32_t>(c.head_dim) || s.n_vocab != static_cast<uint32_t>(c.n_vocab))
        throw FormatError(name + ": saved with another model shape");
    if (s.type != kv_.type() || s.block_size != static_cast<uint32_t>(kv_.block_size()))
        throw FormatError(name + ": saved with KV storage " + kv_type_name(s.type) + " in blocks of " +
                          std::to_string(s.block_size) + "; this session uses " + kv_type_name(kv_.type()) + " in blocks of " +
                          std::to_string(kv_.block_size()));
}

void Session::restore(const std::string& path, int64_t keep) {
    reset();
    auto map = std::make_shared<const MappedFile>(path);
    const KvFileContents saved = parse_kv_file(map->bytes(), path, KvVerify::Deferred);  // pages: checked when first read
    const LlamaConfig& c = model_.model->config();
    auto check = [&](const KvFileInfo& s, const std::string& name) { check_file(s, name); };
    check(saved.info, path);
    const bool part = keep >= 0 && static_cast<uint64_t>(keep) < saved.n_tokens();
    const uint64_t n = part ? static_cast<uint64_t>(keep) : saved.n_tokens();
    if (n == 0) return;
    if (n > static_cast<uint64_t>(kv_.n_ctx()))
        throw Error(path + ": holds " + std::to_string(n) + " tokens, more than this session's context of " +
                    std::to_string(kv_.n_ctx()));
    // A delta file: positions [0, p) from its base (a whole file in the same folder).
    std::shared_ptr<const MappedFile> base_map;
    KvFileContents base;
    std::vector<int32_t> tokens;
    const uint64_t p0 = saved.base.tokens;
    const int64_t b0 = static_cast<int64_t>(p0 / saved.info.block_size);
    if (p0 > 0) {
        const std::string base_path = (std::filesystem::path(path).parent_path() / saved.base.name).string();
        std::error_code ec;
        if (!std::filesystem::is_regular_file(base_path, ec))
            throw FormatError(path + ": its base " + base_path + " is missing");
        base_map = std::make_shared<const MappedFile>(base_path);
        base = parse_kv_file(base_map->bytes(), base_path, KvVerify::Deferred);
        check(base.info, base_path);
        if (!base.base.empty()) throw FormatError(path + ": its base " + base_path + " is itself a delta file");
        if (base.tokens.size() < p0 || kv_tokens_hash(base.tokens, p0) != saved.base.hash)
            throw FormatError(path + ": its base " + base_path + " no longer holds the context's first " + std::to_string(p0) + " tokens");
        tokens.assign(base.tokens.begin(), base.tokens.begin() + static_cast<std::ptrdiff_t>(p0));
    }
    const int64_t n_blocks = static_cast<int64_t>((n + saved.info.block_size - 1) / saved.info.block_size);
    for (int l = 0; l < c.n_layer; ++l)
        for (int64_t b = 0; b < n_blocks; ++b) {
            if (b < b0)
                kv_.attach(l, b, base_map->data() + base.page_offset[static_cast<size_t>(l * base.n_blocks + b)], base_map,
                           kv_page_checksum(base_map->bytes(), base, l, b));
            else
                kv_.attach(l, b, map->data() + saved.page_offset[static_cast<size_t>(l * saved.n_blocks + b)], map,
                           kv_page_checksum(map->bytes(), saved, l, b));
        }
    if (b0 > 0) page_files_.emplace_back(0, (std::filesystem::path(path).parent_path() / saved.base.name).string());
    page_files_.emplace_back(b0, path);
    kv_.set_n_past(static_cast<int64_t>(n));
    for (int l = 0; l < c.n_layer; ++l)
        if (saved.has_index_keys(l)) {
            const std::vector<float> keys = read_index_keys(map->bytes(), saved, l);
            attention_->set_index_keys(l, kv_, keys.data(), static_cast<int64_t>(n),
                                       static_cast<int>(saved.index_dim[static_cast<size_t>(l)]));
        }
    hand_back_summaries(map->bytes(), saved, base_map ? base_map->bytes() : std::span<const uint8_t>{}, base_map ? &base : nullptr,
                        static_cast<int64_t>(n), false);
    tokens.insert(tokens.end(), saved.tokens.begin(), saved.tokens.end());
    tokens.resize(static_cast<size_t>(n));
    if (gpu_) {  // the device continues from the restored context; the host cache mirrors it
        try {
            // MSA on the device: the pages stay in the file until the attention picks them (the
            // saved summaries' mean keys go up instead); else every page, each checked as it is converted.
            if (!place_on_device(map->bytes(), saved, base_map ? base_map->bytes() : std::span<const uint8_t>{},
                                 base_map ? &base : nullptr, static_cast<int64_t>(n)))
                gpu_->upload_kv(kv_, 0, static_cast<int64_t>(n));
            check_pages();
            set_mirrored(static_cast<int64_t>(n));
        } catch (const DeviceError& e) {  // the device failed: the restored context goes on on the CPU
            gpu_.reset();
            msa_ = nullptr;
            mirrored_ = 0;
            backend_ = {cpu_backend(), device_failed(e.what())};
        } catch (...) {
            reset();  // left empty, as for a bad file
            throw;
        }
    }
    tokens_ = std::move(tokens);
    if (!part) logits_ = saved.logits;
    file_memo_ = file_identity(path);
}

bool Session::restore_delta(const std::string& path) {
    check_pages();  // a held context with a damaged page (found by a save) is not continued
    auto map = std::make_shared<const MappedFile>(path);
    {
        // Not a delta over what this session holds (its first p0 tokens hash as the base's), or a
        // device session whose host mirror lacks some of them: the caller restores in full (and
        // verifies the file then; headers only here).
        const KvFileContents head = parse_kv_file(map->bytes(), path, KvVerify::Headers);
        const uint64_t p = head.base.tokens;
        if (p == 0 || tokens_.size() < p || kv_tokens_hash(tokens_, p) != head.base.hash) return false;
        if (gpu_ && mirrored_ < static_cast<int64_t>(p)) return false;
    }
    const KvFileContents saved = parse_kv_file(map->bytes(), path, KvVerify::Deferred);  // pages: checked when first read
    const uint64_t p0 = saved.base.tokens;
    check_file(saved.info, path);
    const uint64_t n = saved.n_tokens();
    if (n > static_cast<uint64_t>(kv_.n_ctx()))
        throw Error(path + ": holds " + std::to_string(n) + " tokens, more than this session's context of " +
                    std::to_string(kv_.n_ctx()));
    // Nothing changed so far; from here a failure other than the device's leaves the session empty.
    try {
        truncate(static_cast<int64_t>(p0));  // the attention forgets what it derived from later positions
        const int n_layer = model_.model->config().n_layer;
        const int64_t b0 = static_cast<int64_t>(p0 / saved.info.block_size);
        // Page b0 is replaced whole by the delta's copy: what the attention derived from it goes too.
        const int64_t cut = b0 * kv_.block_size();
        attention_->truncate_state(cut);
        const int64_t n_blocks = static_cast<int64_t>((n + saved.info.block_size - 1) / saved.info.block_size);
        for (int l = 0; l < n_layer; ++l)
            for (int64_t b = b0; b < n_blocks; ++b)  // block b0 is the delta's own copy (its first positions the base's)
                kv_.attach(l, b, map->data() + saved.page_offset[static_cast<size_t>(l * saved.n_blocks + b)], map,
                           kv_page_checksum(map->bytes(), saved, l, b));
        std::erase_if(page_files_, [&](const auto& f) { return f.first >= b0; });
        page_files_.emplace_back(b0, path);
        kv_.set_n_past(static_cast<int64_t>(n));
        kv_.release_unused();
        for (int l = 0; l < n_layer; ++l)
            if (saved.has_index_keys(l)) {
                const std::vector<float> keys = read_index_keys(map->bytes(), saved, l);
                attention_->set_index_keys(l, kv_, keys.data(), static_cast<int64_t>(n),
                                           static_cast<int>(saved.index_dim[static_cast<size_t>(l)]), cut);
            }
        hand_back_summaries(map->bytes(), saved, {}, nullptr, static_cast<int64_t>(n), true);
        tokens_.insert(tokens_.end(), saved.tokens.begin(), saved.tokens.end());
        if (gpu_) {  // only the delta's positions go up; the device keeps the base's
            try {
                gpu_->upload_kv(kv_, static_cast<int64_t>(p0), static_cast<int64_t>(n));
                check_pages();
                set_mirrored(static_cast<int64_t>(n));
            } catch (const DeviceError& e) {  // the device failed: the context goes on on the CPU from the host cache
                gpu_.reset();
                msa_ = nullptr;
                mirrored_ = 0;
                backend_ = {cpu_backend(), device_failed(e.what())};
            }
        }
    } catch (...) {
        reset();
        throw;
    }
    logits_ = saved.logits;
    file_memo_ = file_identity(path);
    return true;
}

}  // namespace sl
