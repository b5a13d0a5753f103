// CudaLlamaRunner (cuda_backend_model.h): moving a context between the device's KV cache and the
// host's (kv_transfer.h) — a save's download or pages straight to the file, a restore's upload
// through the pinned staging.
#include "core/runtime/cuda_backend_model.h"

#if SIGHTLINE_HAVE_CUDA
#include <algorithm>
#include <functional>
#include <memory>

#include "core/runtime/cuda_runner_impl.h"

namespace sl {

namespace {

// The runner's device cache as kv_transfer sees it: blocks read back through the stream, host rows
// staged through the forward pass's K/V scratch (cap rows at a time) and appended.
class DeviceStore final : public KvBlockStore {
public:
    DeviceStore(CudaLlamaRunner::Impl& m, DeviceKvCache& cache, cudaStream_t stream, float* k_scratch, float* v_scratch,
                int64_t cap)
        : m_(m), cache_(cache), stream_(stream), k_(k_scratch), v_(v_scratch), cap_(cap) {}
    int block_size() const override { return cache_.config().block_size; }
    void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) override {
        std::string error;
        if (!cache_.read_block(layer, block, k, v, stream_, &error)) throw DeviceError("CUDA model: " + error);
    }
    // A save's batches: pinned, so that the device-to-host copies of a batch run asynchronously at
    // the bus's rate and are waited for once (pageable memory: plain, when pinning fails).
    HostBuffer host_buffer(size_t elems) override {
        void* p = nullptr;
        if (cudaHostAlloc(&p, std::max<size_t>(elems, 1) * 2, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();  // not sticky: clear it
            return KvBlockStore::host_buffer(elems);
        }
        return HostBuffer(static_cast<uint16_t*>(p), [](uint16_t* q) { cudaFreeHost(q); });
    }
    void read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride) override {
        std::string error;
        if (!cache_.read_blocks(n, layer, block, k, v, stride, stream_, &error)) throw DeviceError("CUDA model: " + error);
    }
    void append_rows(int layer, int64_t pos0, int64_t n, const float* k, const float* v) override {
        const int64_t row = static_cast<int64_t>(cache_.config().n_kv_head) * cache_.config().head_dim;
        for (int64_t i = 0; i < n; i += cap_) {
            const int64_t m = std::min(cap_, n - i);
            const size_t bytes = static_cast<size_t>(m * row) * 4;
            ck(cudaMemcpyAsync(k_, k + i * row, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload K)");
            ck(cudaMemcpyAsync(v_, v + i * row, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (upload V)");
            m_.append(layer, pos0 + i, m, k_, v_);
            // The next copy reuses the scratch and `k` / `v` may be freed by the caller: wait.
            ck(cudaStreamSynchronize(stream_), "upload");
        }
    }

    // Whole blocks (a restore): copied into the runner's pinned staging, sent asynchronously, the
    // stream waited for when the staging is full and at flush().
    ~DeviceStore() override {  // an upload cut short by an exception: its staged copies finish first
        if (staged_ > 0 || room_ >= 0) cudaStreamSynchronize(stream_);
        for (cudaEvent_t e : done_)
            if (e) cudaEventDestroy(e);
    }
    DeviceStore(const DeviceStore&) = delete;
    DeviceStore& operator=(const DeviceStore&) = delete;
    bool takes_blocks() const override { return true; }
    void write_block(int layer, int64_t block, const uint16_t* k, const uint16_t* v, int n_tokens) override {
        if (staged_ == CudaLlamaRunner::Impl::kStageBlocks || room_ >= 0) flush();  // room 0 may be in flight
        const auto elems = static_cast<size_t>(cache_.block_elems());
        uint16_t* dst = m_.staging() + static_cast<size_t>(staged_) * 2 * elems;
        std::memcpy(dst, k, elems * 2);
        std::memcpy(dst + elems, v, elems * 2);
        ++staged_;
        m_.write_block(layer, block, dst, dst + elems, n_tokens);
    }
    void flush() override {
        ck(cudaStreamSynchronize(stream_), "upload");
        staged_ = 0;
        room_ = -1;
        recorded_[0] = recorded_[1] = false;
    }

    // Converted straight into the pinned staging (kv_upload): two rooms alternate; before a room is
    // handed out again, the copies issued from it (an event recorded when the other was taken) are
    // waited for, so one batch converts on the host while the last one's copies run.
    int stage_capacity() const override { return CudaLlamaRunner::Impl::kStageBlocks; }
    uint16_t* stage(int n) override {
        if (n > CudaLlamaRunner::Impl::kStageBlocks) return nullptr;
        if (staged_ > 0) flush();  // write_block's copies use room 0
        for (cudaEvent_t& e : done_)
            if (!e) ck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (restore staging)");
        if (room_ >= 0) {
            ck(cudaEventRecord(done_[room_], stream_), "cudaEventRecord (restore staging)");
            recorded_[room_] = true;
        }
        room_ = room_ == 0 ? 1 : 0;
        if (recorded_[room_]) ck(cudaEventSynchronize(done_[room_]), "cudaEventSynchronize (restore staging)");
        recorded_[room_] = false;
        return room(room_);
    }
    void write_staged(int i, int layer, int64_t block, int n_tokens) override {
        if (room_ < 0 || i < 0 || i >= CudaLlamaRunner::Impl::kStageBlocks)
            throw Error("CUDA model: write_staged of slot " + std::to_string(i) + " without a room staged");
        const auto elems = static_cast<size_t>(cache_.block_elems());
        uint16_t* src = room(room_) + static_cast<size_t>(i) * 2 * elems;
        m_.write_block(layer, block, src, src + elems, n_tokens);
    }

private:
    uint16_t* room(int r) {
        return m_.staging() + static_cast<size_t>(r) * CudaLlamaRunner::Impl::kStageBlocks * 2 * static_cast<size_t>(cache_.block_elems());
    }
    CudaLlamaRunner::Impl& m_;
    int staged_ = 0;
    int room_ = -1;  // the room stage() last gave
    cudaEvent_t done_[2] = {nullptr, nullptr};
    bool recorded_[2] = {false, false};
    DeviceKvCache& cache_;
    cudaStream_t stream_;
    float *k_, *v_;
    int64_t cap_;
};

}  // namespace

void CudaLlamaRunner::download_kv(KvCache& dst, int64_t from) const {
    Impl& m = *impl_;
    m.check_failed();
    ck(cudaStreamSynchronize(m.stream), "download");
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    kv_download(store, dst, from, m.n_past);
}

bool CudaLlamaRunner::save_pages(const KvCache& mirror, int64_t from, const std::function<void(KvPageSource&)>& write) const {
    Impl& m = *impl_;
    if (mirror.block_size() != m.cache->config().block_size) return false;
    m.check_failed();
    ck(cudaStreamSynchronize(m.stream), "download");
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    KvStorePages pages(store, mirror, from, m.n_past);
    write(pages);
    return true;
}

void CudaLlamaRunner::upload_kv(const KvCache& src, int64_t from, int64_t n) {
    Impl& m = *impl_;
    if (from < 0 || from > m.n_past || from > n)
        throw Error("CUDA model: upload of positions [" + std::to_string(from) + ", " + std::to_string(n) + ") after " +
                    std::to_string(m.n_past));
    if (n > m.n_ctx)
        throw Error("CUDA model: a context of " + std::to_string(n) + " positions does not fit " + std::to_string(m.n_ctx));
    if (from == 0) reset();
    else truncate(from);  // the partial block at `from` is appended to (its mean key recomputed)
    m.check_failed();  // the cut's cleanup
    m.grow(256);
    // `src` holds the whole context: blocks written here may leave the device without a copy
    // (the third tier) when the host tier is full.
    m.backing = &src;
    m.backed = n;
    DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
    try {
        kv_upload(src, store, from, n, m.cap);
    } catch (...) {
        m.backed = std::min(m.backed, m.n_past);  // cut back to `from`
        m.written = m.n_past;
        m.forget_from(m.n_past);
        throw;
    }
    m.n_past = n;
}

bool CudaLlamaRunner::place_kv(const KvCache& src, int64_t n, int means_block,
                               const std::function<std::vector<float>(int layer)>& means) {
    Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    const int64_t B = m.cache->config().block_size;
    if (!m.msa.enabled || src.block_size() != B || src.n_kv_head() != c.n_kv_head || src.head_dim() != c.head_dim ||
        src.n_layer() != c.n_layer || means_block < 1 || B % means_block != 0 || n <= 0 || n > src.n_past())
        return false;
    if (n > m.n_ctx)
        throw Error("CUDA model: a context of " + std::to_string(n) + " positions does not fit " + std::to_string(m.n_ctx));
    const int64_t full = n / B;  // whole blocks: left in `src`; the partial last one goes up
    if (full == 0) return false;
    // Every layer's means first (bf16, the device's blocks): nothing changes when one is missing.
    const auto dkv = static_cast<size_t>(c.n_kv_head) * static_cast<size_t>(c.head_dim);
    const auto per_layer = static_cast<size_t>(full) * dkv;
    std::vector<uint16_t> placed(static_cast<size_t>(c.n_layer) * per_layer);
    for (int l = 0; l < c.n_layer; ++l) {
        const std::vector<float> f = means(l);
        if (f.size() != static_cast<size_t>((n + means_block - 1) / means_block) * dkv) return false;
        const std::vector<float> g = kv_regroup_means(f, means_block, n, static_cast<int>(B), static_cast<int>(dkv));
        kernels::f32_to_bf16(placed.data() + static_cast<size_t>(l) * per_layer, g.data(), per_layer);
    }
    reset();
    m.check_failed();  // the cut's cleanup
    m.grow(256);
    if (m.stamp.empty()) m.stamp.assign(static_cast<size_t>(c.n_layer) * static_cast<size_t>(m.cache->config().max_blocks), 0);
    m.lazy = true;
    m.backing = &src;
    m.backed = n;
    try {
        std::string error;
        for (int l = 0; l < c.n_layer; ++l)
            if (!m.cache->place_dropped(l, 0, full, placed.data() + static_cast<size_t>(l) * per_layer, m.stream, &error))
                throw DeviceError("CUDA model: " + error);
        m.placed += full * c.n_layer;
        m.n_past = m.written = full * B;
        if (n > full * B) {
            DeviceStore store(m, *m.cache, m.stream, m.k, m.v, m.cap);
            kv_upload(src, store, full * B, n, m.cap);
        }
    } catch (...) {
        reset();  // nothing half placed stays
        throw;
    }
    m.n_past = n;
    return true;
}

int64_t CudaLlamaRunner::fill_placed(int64_t max_blocks) {
    Impl& m = *impl_;
    m.check_failed();
    // Under a device budget the room is the questions' working sets' (a fill would take it, and the
    // next question's appends would evict to the host): the blocks stay in the file until picked.
    if (!m.lazy || m.tiered || max_blocks <= 0 || m.cache->n_dropped() == 0) return 0;
    const LlamaConfig& c = m.model.config();
    const int64_t mb = m.cache->config().max_blocks, before = m.cache->n_dropped();
    int64_t room = std::min(max_blocks, m.cache->free_device_blocks());  // (refill's make_room moves nothing out)
    for (int l = 0; l < c.n_layer && room > 0 && m.cache->n_dropped() > 0; ++l) {
        std::vector<int64_t> out;
        for (int64_t b = 0; b < mb && static_cast<int64_t>(out.size()) < room; ++b)
            if (m.cache->dropped(l, b)) out.push_back(b);
        if (out.empty()) continue;
        m.refill(l, out, {});
        for (int64_t b : out)
            if (m.cache->resident(l, b)) m.touch(l, b);
        room -= static_cast<int64_t>(out.size());
    }
    return before - m.cache->n_dropped();  // (a block refill skips stays out: no progress is 0)
}

KvBlockSummaries CudaLlamaRunner::key_means(int layer) const {
    const Impl& m = *impl_;
    const LlamaConfig& c = m.model.config();
    if (!m.msa.enabled || layer < 0 || layer >= c.n_layer || m.n_past <= 0 || m.broken || !m.failed.empty()) return {};
    const auto dkv = static_cast<size_t>(c.n_kv_head) * static_cast<size_t>(c.head_dim);
    // Read back on the save's thread from the first block it writes (kv_lazy_bf16_summaries): an
    // append saves its new blocks' means only. The runner does not change while a save runs.
    const Impl* mp = impl_.get();
    return kv_lazy_bf16_summaries(m.n_past, m.cache->config().block_size, static_cast<int>(dkv),
                                  [mp, layer, dkv](int64_t b0, int64_t b1, uint16_t* dst) {
                                      const size_t rows = static_cast<size_t>(b1 - b0) * dkv;
                                      const uint16_t* src = mp->cache->key_means(layer) + static_cast<size_t>(b0) * dkv;
                                      if (cudaMemcpyAsync(dst, src, rows * 2, cudaMemcpyDeviceToHost, mp->stream) != cudaSuccess ||
                                          cudaStreamSynchronize(mp->stream) != cudaSuccess) {
                                          const cudaError_t e = cudaGetLastError();
                                          throw DeviceError("CUDA model: reading back the mean keys of layer " + std::to_string(layer) +
                                                            ": " + cudaGetErrorString(e));
                                      }
                                  });
}

}  // namespace sl

#endif  // SIGHTLINE_HAVE_CUDA
