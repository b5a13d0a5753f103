#include "core/runtime/cuda_backend_model.h"

#include <algorithm>
#include <mutex>
#include <string>

#include <unistd.h>

#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_transfer.h"
#include "core/model/llama_model.h"
#include "core/util/error.h"
#include "kernels/cuda/cuda_device.h"

#if SIGHTLINE_HAVE_CUDA
#include "core/runtime/cuda_runner_impl.h"
#endif

namespace sl {

std::string cuda_unsupported(const LlamaConfig& c) {
    if (c.arch == "gemma3" || c.ffn_gelu || c.swa_window > 0 || c.embed_scale != 1.0f)
        return "the CUDA kernels lack " + c.arch + "'s norms, GELU and sliding window";
    if (c.has_moe() || c.ffn_swiglu_oai || c.arch == "minimax-m3")
        return std::string("the CUDA kernels lack ") + (c.has_moe() ? "mixture-of-experts layers" : "") +
               (c.has_moe() && c.ffn_swiglu_oai ? " and " : "") + (c.ffn_swiglu_oai ? "the swiglu_oai FFN" : "");
    if ((c.head_dim != 64 && c.head_dim != 128) || c.n_kv_head <= 0 || c.n_head % c.n_kv_head)
        return "head_dim " + std::to_string(c.head_dim) + " / " + std::to_string(c.n_head) + " heads over " +
               std::to_string(c.n_kv_head) + " KV heads is not supported by the CUDA kernels (head_dim 64 or 128)";
    return {};
}

namespace {

// The most blocks a device selection's shortlist and its growth may hold (kernels/cuda/ops.cuh,
// kMaxTopK; checked below where the kernels are built).
constexpr int64_t kDeviceSelectMax = 256;

// Pinned host memory for the KV host tiers of runners without a host budget: half the machine's
// RAM between them all (an app holds a question's session and the background prefill's), 0 when
// it cannot be read (a slot for every block, as before). take(want): what a runner may pin of
// `want` bytes (at least one block's worth comes from the caller's clamp); give(n) when it goes.
class PinnedKvShare {
public:
    static PinnedKvShare& instance() {
        static PinnedKvShare s;
        return s;
    }
    int64_t total() const { return total_; }
    int64_t take(int64_t want) {
        const std::lock_guard lock(mu_);
        const int64_t n = std::clamp<int64_t>(total_ - used_, 0, want);
        used_ += n;
        return n;
    }
    void give(int64_t n) {
        const std::lock_guard lock(mu_);
        used_ = std::max<int64_t>(0, used_ - n);
    }

private:
    PinnedKvShare() {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        total_ = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 2 : 0;
    }
    std::mutex mu_;
    int64_t total_ = 0, used_ = 0;
};

// A selection's forced blocks among its top-k (the local block, and the sink).
int forced_blocks(const MsaConfig& c) { return c.sink ? 2 : 1; }

// The hybrid shortlist the device scores exactly: the forced blocks and hybrid_factor x the rest of
// the top-k (the CPU's keep = factor x (top_k - forced)).
int64_t shortlist_blocks(const MsaConfig& c) {
    const int64_t f = std::min<int64_t>(forced_blocks(c), c.top_k);
    return f + static_cast<int64_t>(c.hybrid_factor) * (c.top_k - f);
}

// The most blocks the mass growth adds (top_k x (grow - 1); 0 without growth).
int64_t growth_blocks(const MsaConfig& c) {
    return c.top_p > 0 ? static_cast<int64_t>(c.top_k) * (std::max(1, c.top_p_grow) - 1) : 0;
}

}  // namespace

std::string cuda_msa_lacks(const MsaConfig& c) {
    auto n = [](int64_t v) { return std::to_string(v); };
    if (c.scoring != BlockScoring::Hybrid)
        return std::string(c.scoring == BlockScoring::BlockMax ? "BlockMax" : c.scoring == BlockScoring::MeanKey ? "mean-key"
                                                                                                                  : "native-indexer") +
               " block scoring (the device scores hybrid)";
    if (c.index_query != IndexQuery::GroupMean) return "head-max index queries (the device uses the group mean)";
    if (c.block_size != 128) return "blocks of " + n(c.block_size) + " tokens (the device's are 128)";
    if (c.top_k < 1 || c.top_k > 64) return "top-k " + n(c.top_k) + " (the device takes 1..64)";
    if (c.hybrid_factor < 1 || c.hybrid_factor > 64) return "a shortlist factor of " + n(c.hybrid_factor) + " (1..64)";
    if (c.decode_hybrid_factor != 0 && c.decode_hybrid_factor != c.hybrid_factor)
        return "a decode shortlist factor of " + n(c.decode_hybrid_factor) + " apart from prefill's " + n(c.hybrid_factor);
    if (shortlist_blocks(c) > kDeviceSelectMax)
        return "a shortlist of " + n(shortlist_blocks(c)) + " blocks (the device's hold " + n(kDeviceSelectMax) + ")";
    if (c.window_blocks < 0 || c.window_blocks > kDeviceSelectMax)
        return "a local window of " + n(c.window_blocks) + " blocks (the device takes 0.." + n(kDeviceSelectMax) + ")";
    if (growth_blocks(c) > kDeviceSelectMax)
        return "a growth room of " + n(growth_blocks(c)) + " blocks (the device's hold " + n(kDeviceSelectMax) + ")";
    if (c.dense_layers > 0) return n(c.dense_layers) + " dense leading layers";
    if (c.positions == PositionMode::Remap && c.remap_window <= 0)
        return "a remap window of " + n(c.remap_window) + " tokens";
    return {};
}

#if SIGHTLINE_HAVE_CUDA

static_assert(kDeviceSelectMax == cuda::kMaxTopK, "cuda_msa_lacks checks the kernels' limit");

CudaLlamaRunner::CudaLlamaRunner(const LlamaModel& model, int n_ctx, const MsaConfig* msa, int64_t device_kv_bytes,
                                 int64_t host_kv_bytes)
    : impl_(std::make_unique<Impl>(model)) {
    const cuda::DeviceStatus st = cuda::probe();
    if (!st.usable) throw Error("CUDA model: no usable CUDA device: " + st.message);
    const LlamaConfig& c = model.config();
    if (const std::string why = cuda_unsupported(c); !why.empty()) throw Error("CUDA model: " + why);
    if (n_ctx <= 0) throw Error("CUDA model: n_ctx must be positive");
    Impl& m = *impl_;
    if (msa) {
        if (const std::string why = cuda_msa_lacks(*msa); !why.empty())
            throw Error("CUDA model: the device's MSA lacks " + why);
        m.msa.enabled = true;
        m.msa.top_k = msa->top_k;
        m.msa.n_cand = static_cast<int>(shortlist_blocks(*msa));
        m.msa.force = cuda::MsaForce(msa->sink, msa->window_blocks);
        if (msa->top_p > 0) {
            m.msa.growth.mass = msa->top_p;
            m.msa.growth.room = static_cast<int>(growth_blocks(*msa));
            m.msa.growth.full_blocks = msa->top_p_full_ctx > 0 ? msa->top_p_full_ctx / msa->block_size : 0;
            m.msa.growth.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        }
        if (msa->positions == PositionMode::Remap) {
            if (c.rope_dim <= 0) throw Error("CUDA model: remapped positions need a model with RoPE");
            m.msa.remap_window = msa->remap_window;
        }
    }
    m.n_ctx = n_ctx;
    ck(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const LlamaWeights& w = model.weights();
    for (const LlamaLayer& L : w.layers) {
        Impl::Layer d;
        d.attn_norm = m.upload_f32(L.attn_norm, c.d_model);
        d.ffn_norm = m.upload_f32(L.ffn_norm, c.d_model);
        d.bq = m.upload_f32(L.bq, static_cast<int64_t>(c.n_head) * c.head_dim);
        d.bk = m.upload_f32(L.bk, static_cast<int64_t>(c.n_kv_head) * c.head_dim);
        d.bv = m.upload_f32(L.bv, static_cast<int64_t>(c.n_kv_head) * c.head_dim);
        d.wq = m.upload(L.wq);
        d.wk = m.upload(L.wk);
        d.wv = m.upload(L.wv);
        d.wo = m.upload(L.wo);
        d.gate = m.upload(L.gate);
        d.up = m.upload(L.up);
        d.down = m.upload(L.down);
        m.layers.push_back(d);
    }
    m.output_norm = m.upload_f32(w.output_norm, c.d_model);
    if (!c.rope_freq_factors.empty())
        m.rope_freq_factors = m.upload_f32(c.rope_freq_factors.data(), static_cast<int64_t>(c.rope_freq_factors.size()));
    m.output = m.upload(w.output);
    m.logits = static_cast<float*>(m.alloc(static_cast<size_t>(c.n_vocab) * 4));
    if (m.msa.remap_window > 0) {  // every block's angles, once (blocks past n_ctx are never read)
        const int64_t blocks = (static_cast<int64_t>(n_ctx) + kDeviceBlock - 1) / kDeviceBlock;
        m.msa.rel = static_cast<float*>(m.alloc(static_cast<size_t>(blocks) * c.rope_dim * 4));
        ck(cudaDeviceSynchronize(), "uploads");  // rope_freq_factors came on the legacy stream
        ck(cuda::msa_remap_table(blocks, kDeviceBlock, c.rope_dim, c.rope_base, c.rope_freq_scale, m.rope_freq_factors,
                                 m.msa.rel, m.stream),
           "msa_remap_table");
    }

    DeviceKvCache::Config kc;
    kc.n_layer = c.n_layer;
    kc.n_kv_head = c.n_kv_head;
    kc.head_dim = c.head_dim;
    kc.block_size = kDeviceBlock;
    kc.max_blocks = (n_ctx + kc.block_size - 1) / kc.block_size;
    kc.device_blocks = kc.max_blocks * c.n_layer;
    const int64_t pair_bytes = 2 * static_cast<int64_t>(c.n_kv_head) * kc.block_size * c.head_dim * 2;  // K + V, bf16
    if (device_kv_bytes > 0 && device_kv_bytes < kc.device_blocks * pair_bytes) {
        if (!m.msa.enabled)
            throw Error("CUDA model: a device KV budget needs MSA attention (dense attention reads every block each call)");
        // The fewest blocks: a decode call's shortlists or grown selections (whichever is wider,
        // per KV group) twice over, and a few appended ones. A prefill call needs (query blocks x
        // KV groups x shortlist) at once, which make_room reports when the budget cannot hold it.
        const int64_t per_group = std::max(m.msa.n_cand, m.msa.width());
        const int64_t blocks = device_kv_bytes / pair_bytes, min_blocks = 2 * per_group * c.n_kv_head + 8;
        if (blocks < min_blocks)
            throw Error("CUDA model: a device KV budget of " + std::to_string(device_kv_bytes >> 20) + " MiB holds " +
                        std::to_string(blocks) + " blocks; at least " + std::to_string(min_blocks) + " (" +
                        std::to_string((min_blocks * pair_bytes + (1 << 20) - 1) >> 20) + " MiB) are needed");
        // A slot for every block (offloads never wait for fetches), or what the host budget holds:
        // then the third tier (the saved context, set_backing) takes what the host cannot. Without
        // a host budget, pinned memory (which the host cannot page out) is held to half the RAM:
        // an 8B model's million tokens would pin 128 GiB.
        kc.host_blocks = kc.device_blocks;
        if (host_kv_bytes > 0) {
            kc.host_blocks = std::clamp<int64_t>(host_kv_bytes / pair_bytes, 1, kc.device_blocks);
        } else if (PinnedKvShare& share = PinnedKvShare::instance(); share.total() > 0) {
            const int64_t got = share.take(kc.host_blocks * pair_bytes);
            m.pinned_share = got;
            m.release_pinned = [](int64_t n) { PinnedKvShare::instance().give(n); };
            kc.host_blocks = std::max<int64_t>(1, got / pair_bytes);
        }
        kc.device_blocks = blocks;
        m.tiered = true;
        m.stamp.assign(static_cast<size_t>(c.n_layer * kc.max_blocks), 0);
    }
    std::string error;
    m.cache = DeviceKvCache::create(kc, &error);
    if (!m.cache) throw Error("CUDA model: " + error);
    m.bytes += kc.device_blocks * 2 * static_cast<int64_t>(c.n_kv_head) * kc.block_size * c.head_dim * 2;
    m.bytes += static_cast<int64_t>(c.n_layer) * kc.max_blocks * c.n_kv_head * c.head_dim * 2;  // mean keys
    // The weights' copies and the cache's initial fills ran on the legacy stream (pageable
    // copies may return before their last bytes land), which m.stream, non-blocking, does not
    // wait for: done before anything runs on m.stream (that stream only: another runner's work
    // on the device goes on).
    ck(cudaStreamSynchronize(cudaStreamLegacy), "uploads");
}

CudaLlamaRunner::~CudaLlamaRunner() = default;

int64_t CudaLlamaRunner::n_past() const { return impl_->n_past; }
void CudaLlamaRunner::reset() {  // positions are rewritten before they are read
    impl_->n_past = 0;
    impl_->backed = 0;
    impl_->written = 0;
    impl_->forget_from(0);
    impl_->lazy = false;
    impl_->last_top_k = 0;
    impl_->rec_top_k = 0;
}

void CudaLlamaRunner::truncate(int64_t n) {
    Impl& m = *impl_;
    if (n < 0 || n > m.n_past)
        throw Error("CUDA model: truncate to " + std::to_string(n) + " positions of " + std::to_string(m.n_past));
    // The kept blocks' K/V stay; the partial last block's mean key is made again over the kept
    // positions (a save before the next append writes it; one on the host tier or in the file
    // keeps its old mean until the append that continues it brings it back and recomputes it).
    m.n_past = n;
    m.backed = std::min(m.backed, n);
    m.written = n;
    m.forget_from(n);
    const int64_t B = m.cache->config().block_size;
    if (m.msa.enabled && n % B != 0 && m.failed.empty()) {
        std::string error;
        for (int l = 0; l < m.model.config().n_layer; ++l)
            if (!m.cache->refresh_mean(l, n / B, n, m.stream, &error)) {
                m.failed = "CUDA model: " + error;  // the next forward call reports it
                break;
            }
    }
    m.last_top_k = 0;
    m.rec_top_k = 0;
}

void CudaLlamaRunner::set_backing(const KvCache* mirror, int64_t n) {
    Impl& m = *impl_;
    m.backing = mirror;
    m.backed = mirror ? std::clamp<int64_t>(n, 0, m.n_past) : 0;
}

int64_t CudaLlamaRunner::device_bytes() const { return impl_->bytes; }
int CudaLlamaRunner::last_top_k() const { return impl_->last_top_k; }

void CudaLlamaRunner::set_record_mass(bool on) { impl_->record = on; }

CudaKvTiers CudaLlamaRunner::kv_tiers() const {
    const Impl& m = *impl_;
    return {m.cache->config().device_blocks, m.cache->config().host_blocks, m.fetched, m.evicted, m.dropped, m.refilled,
            m.placed};
}

std::vector<Selection> CudaLlamaRunner::recorded_selections(int layer) const {
    const Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    if (m.rec_top_k == 0 || layer < 0 || layer >= c.n_layer) return {};
    const int k = m.rec_top_k, B = m.cache->config().block_size;
    const int32_t* sel = m.rec_sel.data() + (m.rec_shared_sel ? 0 : static_cast<size_t>(layer) * c.n_kv_head * k);
    const float* mass = m.rec_mass.data() + static_cast<size_t>(layer) * c.n_kv_head * k * B;
    std::vector<Selection> out(static_cast<size_t>(c.n_kv_head));
    for (int g = 0; g < c.n_kv_head; ++g) {
        Selection& x = out[static_cast<size_t>(g)];
        x.kv_head = g;
        x.q_pos0 = m.rec_pos0;
        x.n_queries = 1;
        for (int i = 0; i < k; ++i) {
            const int32_t b = sel[g * k + i];
            if (b < 0) continue;
            const float* t = mass + (static_cast<size_t>(g) * k + i) * B;
            x.blocks.push_back(b);
            x.token_mass.insert(x.token_mass.end(), t, t + B);
            float sum = 0.0f;
            for (int j = 0; j < B; ++j) sum += t[j];
            x.mass.push_back(sum);
        }
    }
    return out;
}

std::vector<int32_t> CudaLlamaRunner::last_selection(int layer) const {
    const Impl& m = *impl_;
    if (m.last_top_k == 0 || layer < 0 || layer >= m.model.config().n_layer) return {};
    const int64_t n = m.last_tasks * m.last_top_k;
    std::vector<int32_t> out(static_cast<size_t>(n));
    ck(cudaMemcpy(out.data(), m.sel + layer * n, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost),
       "cudaMemcpy (selection)");
    return out;
}

void CudaLlamaRunner::forward(const int32_t* tokens, int n, float* logits, const float* embeddings) {
    Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    m.check_failed();
    if (n <= 0) return;
    if (m.n_past + n > m.n_ctx)
        throw Error("CUDA model: context full (" + std::to_string(m.n_past + n) + " > " + std::to_string(m.n_ctx) + ")");
    for (int i = 0; i < n; ++i)
        if (!(embeddings && tokens[i] == LlamaModel::kEmbeddingToken) && (tokens[i] < 0 || tokens[i] >= c.n_vocab))
            throw Error("CUDA model: token id " + std::to_string(tokens[i]) + " outside the vocabulary");
    // As the CPU's MSA (core/attention/msa_attention.cpp, split_last): the call's last query, whose
    // logits it returns, selects on its own when its query block holds other queries of the call
    // (the prompt's last token: the first answer token's selection). Here: the others as one call,
    // then the last as a call of one, which sees their K/V as the CPU's does.
    if (m.msa.enabled && n > 1 && !m.in_split) {
        const int64_t B = kDeviceBlock, end = m.n_past + n;
        const bool sparse_now = (end + B - 1) / B > m.msa.top_k + m.msa.force.window;
        if (sparse_now && end - std::max(m.n_past, (end - 1) / B * B) > 1) {
            m.in_split = true;
            try {
                forward(tokens, n - 1, logits, embeddings);
            } catch (...) {
                m.in_split = false;
                throw;
            }
            m.in_split = false;
            forward(tokens + n - 1, 1, logits, embeddings ? embeddings + static_cast<int64_t>(n - 1) * c.d_model : nullptr);
            return;
        }
    }
    // Memory tiers: a layer's step keeps every block its tasks shortlist or select (up to
    // max(shortlist, selection) per query block and group) and the blocks it appends on the device
    // at once. A call of more query blocks than the device budget holds that way goes in parts at
    // query-block boundaries — the same selections and attention as one call (a query block's rows
    // and its causal keys do not depend on the split), the parts' last queries not split off.
    if (m.tiered && m.msa.enabled) {
        const int64_t B = kDeviceBlock;
        const int64_t qblocks = (m.n_past + n - 1) / B - m.n_past / B + 1;
        const int64_t per_group = std::max(m.msa.n_cand, m.msa.width());
        const int64_t fit = std::max<int64_t>(1, (m.cache->config().device_blocks - 8) / (c.n_kv_head * per_group + 1));
        if (qblocks > fit) {
            const bool was = m.in_split;
            m.in_split = true;
            try {
                for (int done = 0; done < n;) {
                    const int part = static_cast<int>(std::min<int64_t>(n - done, (m.n_past / B + fit) * B - m.n_past));
                    forward(tokens + done, part, logits,
                            embeddings ? embeddings + static_cast<int64_t>(done) * c.d_model : nullptr);
                    done += part;
                }
            } catch (...) {
                m.in_split = was;
                throw;
            }
            m.in_split = was;
            return;
        }
    }
    m.grow(n);
    const int64_t d = c.d_model, dq = static_cast<int64_t>(c.n_head) * c.head_dim,
                  dkv = static_cast<int64_t>(c.n_kv_head) * c.head_dim;
    m.host_x.resize(static_cast<size_t>(n * d));
    for (int i = 0; i < n; ++i) {  // as LlamaModel::forward (no embed_scale: cuda_unsupported refuses it)
        if (embeddings && tokens[i] == LlamaModel::kEmbeddingToken)
            std::copy(embeddings + i * d, embeddings + (i + 1) * d, m.host_x.data() + i * d);
        else
            embed_row(m.model.weights().tok_embd, tokens[i], m.host_x.data() + i * d);
    }
    ck(cudaMemcpyAsync(m.x, m.host_x.data(), m.host_x.size() * 4, cudaMemcpyHostToDevice, m.stream), "cudaMemcpyAsync (embeddings)");

    cuda::MsaShape s;
    s.pos0 = m.n_past;
    s.n_q = n;
    s.n_head = c.n_head;
    s.n_kv_head = c.n_kv_head;
    s.head_dim = c.head_dim;
    s.block_size = m.cache->config().block_size;
    // Sparse once the context has more blocks than the top-k and the window hold (else every
    // block is read, as on the CPU). A selection row holds the top-k, the window and the growth.
    const bool sparse = m.msa.enabled && s.n_kv_blocks() > m.msa.top_k + m.msa.force.window;
    const int top_k = sparse ? m.msa.width() : static_cast<int>(s.n_kv_blocks());
    const int splits = n == 1 ? std::clamp(top_k / 4, 1, 16) : 1;
    m.last_top_k = 0;  // until this call's selections are complete (sel may be reallocated below)
    const int64_t sel_need = s.n_tasks() * top_k * (sparse ? c.n_layer : 1);
    m.reserve(m.sel, m.sel_ints, sel_need, 4);
    // Token masses for citations: MSA calls of one query, when asked for.
    const bool rec = m.record && m.msa.enabled && n == 1;
    const int64_t mass_per_layer = static_cast<int64_t>(c.n_kv_head) * top_k * s.block_size;
    m.rec_top_k = 0;
    if (rec) m.reserve(m.tmass, m.tmass_floats, mass_per_layer * c.n_layer, 4);
    const int n_cand = sparse ? std::max(m.msa.top_k, m.msa.n_cand) : 0;
    if (sparse) m.reserve(m.hws, m.hws_bytes, cuda::msa_hybrid_workspace_bytes(s, n_cand, m.msa.top_k), 1);
    if (sparse && m.msa.extends()) {
        m.reserve(m.top_sel, m.top_sel_ints, s.n_tasks() * m.msa.top_k, 4);
        m.reserve(m.xws, m.xws_bytes, cuda::msa_extend_workspace_bytes(s, m.msa.growth.room), 1);
    }
    m.reserve(m.ws, m.ws_floats, cuda::msa_workspace_floats(s, splits), 4);
    if (!sparse) ck(cuda::msa_select_all(s, top_k, m.sel, m.stream), "msa_select_all");
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const int style = c.rope_style == kernels::RopeStyle::Neox ? 1 : 0;
    const int64_t nd = static_cast<int64_t>(n) * d;
    // Position remapping (MsaConfig::positions = Remap): on for calls whose last query lies far
    // from block 0 (before that no block is far from any query). Each layer's far rows are
    // q^ = R(W - p) q (its q rotated by W - p, per query), their group means the index's rows.
    cuda::MsaRemap remap;
    const int64_t W = m.msa.enabled ? m.msa.remap_window : 0;
    if (W > 0 && s.n_kv() - 1 >= s.block_size - 1 + W) {
        remap.window = W;
        remap.q_far = m.q_far;
        remap.iq_far = m.iq_far;
        remap.rel = m.msa.rel;
        remap.rot_dim = c.rope_dim;
        remap.style = style;
        m.host_far_pos.resize(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) m.host_far_pos[static_cast<size_t>(i)] = W - (m.n_past + i);
        ck(cudaMemcpyAsync(m.far_pos, m.host_far_pos.data(), static_cast<size_t>(n) * 8, cudaMemcpyHostToDevice,
                           m.stream),
           "cudaMemcpyAsync (remap positions)");
    }
    std::string error;
    for (int l = 0; l < c.n_layer; ++l) {
        const Impl::Layer& L = m.layers[static_cast<size_t>(l)];
        ck(cuda::rms_norm(m.xn, m.x, L.attn_norm, n, d, c.rms_eps, m.stream), "rms_norm");
        m.linear(L.wq, m.xn, n, m.q);
        m.linear(L.wk, m.xn, n, m.k);
        m.linear(L.wv, m.xn, n, m.v);
        for (int i = 0; i < n; ++i) {  // biases (qwen2): one add per row
            if (L.bq) ck(cuda::add(m.q + i * dq, L.bq, dq, m.stream), "add (bq)");
            if (L.bk) ck(cuda::add(m.k + i * dkv, L.bk, dkv, m.stream), "add (bk)");
            if (L.bv) ck(cuda::add(m.v + i * dkv, L.bv, dkv, m.stream), "add (bv)");
        }
        ck(cuda::rope(m.q, n, c.n_head, c.head_dim, c.rope_dim, m.n_past, nullptr, c.rope_base, c.rope_freq_scale, style,
                      m.stream, m.rope_freq_factors), "rope (q)");
        ck(cuda::rope(m.k, n, c.n_kv_head, c.head_dim, c.rope_dim, m.n_past, nullptr, c.rope_base, c.rope_freq_scale,
                      style, m.stream, m.rope_freq_factors), "rope (k)");
        m.append(l, m.n_past, n, m.k, m.v);
        if (remap.on()) {
            ck(cudaMemcpyAsync(m.q_far, m.q, static_cast<size_t>(n) * dq * 4, cudaMemcpyDeviceToDevice, m.stream),
               "cudaMemcpyAsync (far rows)");
            ck(cuda::rope(m.q_far, n, c.n_head, c.head_dim, c.rope_dim, 0, m.far_pos, c.rope_base, c.rope_freq_scale,
                          style, m.stream, m.rope_freq_factors),
               "rope (far rows)");
            if (sparse) ck(cuda::msa_group_mean(m.q_far, s, m.iq_far, m.stream), "msa_group_mean (far rows)");
        }
        int32_t* sel = m.sel;
        const int64_t ab0 = m.n_past / s.block_size, ab1 = (m.n_past + n - 1) / s.block_size;
        if (sparse) {
            sel = m.sel + static_cast<int64_t>(l) * s.n_tasks() * top_k;
            ck(cuda::msa_group_mean(m.q, s, m.iq, m.stream), "msa_group_mean");
            m.select_tiered(s, l, n_cand, sel, ab0, ab1, remap);
        } else if (m.tiers()) {  // a short context: every block of the layer attended
            std::vector<int64_t> all, keep;
            for (int64_t b = 0; b < s.n_kv_blocks(); ++b) {
                all.push_back(b);
                keep.push_back(m.key(l, b));
            }
            m.ensure_resident(l, all, keep);
        }
        ck(cuda::msa_sparse_attention(s, m.q, m.att, scale, sel, top_k, m.cache->k_view(l), m.cache->v_view(l), splits,
                                      m.ws, m.ws_floats, m.stream, remap), "attention");
        if (rec)
            ck(cuda::msa_token_mass(s, m.q, scale, sel, top_k, m.cache->k_view(l), m.tmass + l * mass_per_layer, m.stream,
                                    remap),
               "msa_token_mass");
        m.linear(L.wo, m.att, n, m.o);
        ck(cuda::add(m.x, m.o, nd, m.stream), "add (residual)");
        ck(cuda::rms_norm(m.xn, m.x, L.ffn_norm, n, d, c.rms_eps, m.stream), "rms_norm");
        m.linear(L.gate, m.xn, n, m.g);
        m.linear(L.up, m.xn, n, m.u);
        ck(cuda::silu_mul(m.g, m.g, m.u, static_cast<int64_t>(n) * c.n_ff, m.stream), "silu_mul");
        m.linear(L.down, m.g, n, m.o);
        ck(cuda::add(m.x, m.o, nd, m.stream), "add (residual)");
    }
    const float* last = m.x + (n - 1) * d;
    ck(cuda::rms_norm(m.xn, last, m.output_norm, 1, d, c.rms_eps, m.stream), "rms_norm (output)");
    m.linear(m.output, m.xn, 1, m.logits);
    ck(cudaMemcpyAsync(logits, m.logits, static_cast<size_t>(c.n_vocab) * 4, cudaMemcpyDeviceToHost, m.stream),
       "cudaMemcpyAsync (logits)");
    if (rec) {
        m.rec_sel.resize(static_cast<size_t>(sel_need));
        m.rec_mass.resize(static_cast<size_t>(mass_per_layer * c.n_layer));
        ck(cudaMemcpyAsync(m.rec_sel.data(), m.sel, m.rec_sel.size() * 4, cudaMemcpyDeviceToHost, m.stream),
           "cudaMemcpyAsync (selections)");
        ck(cudaMemcpyAsync(m.rec_mass.data(), m.tmass, m.rec_mass.size() * 4, cudaMemcpyDeviceToHost, m.stream),
           "cudaMemcpyAsync (token mass)");
    }
    ck(cudaStreamSynchronize(m.stream), "forward");
    if (rec) {
        m.rec_top_k = top_k;
        m.rec_pos0 = m.n_past;
        m.rec_shared_sel = !sparse;
    }
    m.n_past += n;
    m.last_tasks = s.n_tasks();
    m.last_top_k = sparse ? top_k : 0;
}

#else  // built without CUDA

struct CudaLlamaRunner::Impl {};
CudaLlamaRunner::CudaLlamaRunner(const LlamaModel&, int, const MsaConfig*, int64_t, int64_t) {
    throw Error("CUDA model: built without CUDA");
}
CudaLlamaRunner::~CudaLlamaRunner() = default;
void CudaLlamaRunner::forward(const int32_t*, int, float*, const float*) { throw Error("CUDA model: built without CUDA"); }
int64_t CudaLlamaRunner::n_past() const { return 0; }
void CudaLlamaRunner::reset() {}
void CudaLlamaRunner::truncate(int64_t) {}
void CudaLlamaRunner::set_backing(const KvCache*, int64_t) {}
void CudaLlamaRunner::download_kv(KvCache&, int64_t) const { throw Error("CUDA model: built without CUDA"); }
bool CudaLlamaRunner::save_pages(const KvCache&, int64_t, const std::function<void(KvPageSource&)>&) const {
    throw Error("CUDA model: built without CUDA");
}
void CudaLlamaRunner::upload_kv(const KvCache&, int64_t, int64_t) { throw Error("CUDA model: built without CUDA"); }
bool CudaLlamaRunner::place_kv(const KvCache&, int64_t, int, const std::function<std::vector<float>(int)>&) { return false; }
KvBlockSummaries CudaLlamaRunner::key_means(int) const { return {}; }
int64_t CudaLlamaRunner::device_bytes() const { return 0; }
std::vector<int32_t> CudaLlamaRunner::last_selection(int) const { return {}; }
void CudaLlamaRunner::set_record_mass(bool) {}
CudaKvTiers CudaLlamaRunner::kv_tiers() const { return {}; }
std::vector<Selection> CudaLlamaRunner::recorded_selections(int) const { return {}; }
int CudaLlamaRunner::last_top_k() const { return 0; }

#endif

}  // namespace sl
