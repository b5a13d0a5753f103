// Built in every configuration; empty without CUDA (the header needs the CUDA runtime's).
#if SIGHTLINE_HAVE_CUDA

#include "core/kvcache/device_kv_cache.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.cuh"

namespace sl {

using cuda::cuda_error_text;
using cuda::PagedView;

namespace {

bool ok(cudaError_t e, const char* what, std::string* error) {
    if (e == cudaSuccess) return true;
    cudaGetLastError();  // not left for the next launch to report as its own (sticky ones stay)
    if (error) *error = cuda_error_text(what, e);
    return false;
}

}  // namespace

std::unique_ptr<DeviceKvCache> DeviceKvCache::create(const Config& c, std::string* error) {
    if (c.n_layer <= 0 || c.n_kv_head <= 0 || (c.head_dim != 64 && c.head_dim != 128) ||
        (c.block_size != 64 && c.block_size != 128) || c.max_blocks <= 0 || c.max_blocks > INT32_MAX ||
        c.device_blocks <= 0 || c.device_blocks > INT32_MAX || c.host_blocks < 0) {
        if (error) *error = "DeviceKvCache: bad configuration";
        return nullptr;
    }
    std::unique_ptr<DeviceKvCache> p(new DeviceKvCache(c));
    const size_t bytes = static_cast<size_t>(c.device_blocks) * static_cast<size_t>(p->block_elems()) * 2;
    if (!ok(cudaMalloc(&p->k_pool_, bytes), "cudaMalloc (K pool)", error) ||
        !ok(cudaMalloc(&p->v_pool_, bytes), "cudaMalloc (V pool)", error) ||
        !ok(cudaMalloc(&p->tables_, static_cast<size_t>(c.n_layer) * c.max_blocks * sizeof(int32_t)),
            "cudaMalloc (block tables)", error) ||
        !ok(cudaMemset(p->tables_, 0xff, static_cast<size_t>(c.n_layer) * c.max_blocks * sizeof(int32_t)),
            "cudaMemset (block tables)", error) ||
        !ok(cudaMalloc(&p->kmean_, static_cast<size_t>(c.n_layer) * p->kmean_elems() * 2), "cudaMalloc (mean keys)",
            error) ||
        !ok(cudaMemset(p->kmean_, 0, static_cast<size_t>(c.n_layer) * p->kmean_elems() * 2), "cudaMemset (mean keys)",
            error))
        return nullptr;
    if (c.host_blocks > 0 &&
        !ok(cudaHostAlloc(&p->host_pool_, static_cast<size_t>(c.host_blocks) * p->block_elems() * 2 * 2,
                          cudaHostAllocDefault),
            "cudaHostAlloc (host tier)", error))
        return nullptr;
    p->dev_of_.assign(static_cast<size_t>(c.n_layer * c.max_blocks), -1);
    p->host_of_.assign(static_cast<size_t>(c.n_layer * c.max_blocks), -1);
    p->dropped_.assign(static_cast<size_t>(c.n_layer * c.max_blocks), 0);
    for (int64_t i = c.device_blocks - 1; i >= 0; --i) p->free_dev_.push_back(i);
    for (int64_t i = c.host_blocks - 1; i >= 0; --i) p->free_host_.push_back(i);
    return p;
}

DeviceKvCache::~DeviceKvCache() {
    for (auto* list : {&pending_dev_, &pending_host_})
        for (Pending& e : *list) {
            cudaEventSynchronize(e.done);
            cudaEventDestroy(e.done);
        }
    cudaFree(k_pool_);
    cudaFree(v_pool_);
    cudaFree(tables_);
    cudaFree(kmean_);
    if (host_pool_) cudaFreeHost(host_pool_);
}

int64_t DeviceKvCache::block_elems() const {
    return static_cast<int64_t>(cfg_.n_kv_head) * cfg_.block_size * cfg_.head_dim;
}

bool DeviceKvCache::check(int layer, int64_t block, std::string* error) const {
    if (layer >= 0 && layer < cfg_.n_layer && block >= 0 && block < cfg_.max_blocks) return true;
    if (error) *error = "DeviceKvCache: layer " + std::to_string(layer) + " block " + std::to_string(block) +
                        " out of range";
    return false;
}

// A slot freed once the stream's copies so far are done. Without an event (creating or recording
// one failed) the stream is waited for and the slot is free at once, so it never leaks; the
// error is still reported.
bool DeviceKvCache::push_pending(std::deque<Pending>& list, int64_t slot, cudaStream_t stream, std::string* error) {
    Pending p{nullptr, slot};
    if (ok(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), "cudaEventCreate", error)) {
        if (ok(cudaEventRecord(p.done, stream), "cudaEventRecord", error)) {
            list.push_back(p);
            return true;
        }
        cudaEventDestroy(p.done);
    }
    cudaStreamSynchronize(stream);
    (&list == &pending_dev_ ? free_dev_ : free_host_).push_back(slot);
    return false;
}

// Free list first; else the oldest block whose copy-out is pending, once that copy has finished.
bool DeviceKvCache::take_device_block(int64_t* phys, std::string* error) {
    if (free_dev_.empty() && !pending_dev_.empty()) {
        Pending p = pending_dev_.front();
        pending_dev_.pop_front();
        const cudaError_t e = cudaEventSynchronize(p.done);
        cudaEventDestroy(p.done);
        if (!ok(e, "cudaEventSynchronize", error)) return false;
        free_dev_.push_back(p.slot);
    }
    if (free_dev_.empty()) {
        if (error) *error = "DeviceKvCache: no free device block (offload some first)";
        return false;
    }
    *phys = free_dev_.back();
    free_dev_.pop_back();
    return true;
}

bool DeviceKvCache::take_host_slot(int64_t* slot, std::string* error) {
    if (free_host_.empty() && !pending_host_.empty()) {
        Pending p = pending_host_.front();
        pending_host_.pop_front();
        const cudaError_t e = cudaEventSynchronize(p.done);
        cudaEventDestroy(p.done);
        if (!ok(e, "cudaEventSynchronize", error)) return false;
        free_host_.push_back(p.slot);
    }
    if (free_host_.empty()) {
        if (error) *error = "DeviceKvCache: host tier full";
        return false;
    }
    *slot = free_host_.back();
    free_host_.pop_back();
    return true;
}

bool DeviceKvCache::set_table(int layer, int64_t block, int32_t phys, cudaStream_t stream, std::string* error) {
    int32_t& d = dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + block)];
    const int32_t was = d;
    d = phys;
    if (upload_table(layer, block, block + 1, stream, error)) return true;
    d = was;  // the mirror keeps saying what the device's table says
    return false;
}

bool DeviceKvCache::upload_table(int layer, int64_t b0, int64_t b1, cudaStream_t stream, std::string* error) {
    const size_t i = static_cast<size_t>(layer * cfg_.max_blocks + b0);
    // From pageable memory: the call returns once the values are staged, so dev_of_ may change after.
    return ok(cudaMemcpyAsync(tables_ + i, &dev_of_[i], static_cast<size_t>(b1 - b0) * sizeof(int32_t),
                              cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync (block table)", error);
}

bool DeviceKvCache::append(int layer, int64_t pos0, int64_t n, const float* k, const float* v, cudaStream_t stream,
                          std::string* error) {
    if (n <= 0) return true;
    const int64_t b0 = pos0 / cfg_.block_size, b1 = (pos0 + n - 1) / cfg_.block_size;
    if (!check(layer, b0, error) || !check(layer, b1, error)) return false;
    std::vector<int64_t> fresh;  // blocks given device blocks here: their table entries go up in one copy
    auto undo = [&] {            // a failure leaves them as they were (never written)
        for (int64_t b : fresh) {
            int32_t& d = dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + b)];
            free_dev_.push_back(d);
            d = -1;
        }
    };
    if (dropped_[static_cast<size_t>(layer * cfg_.max_blocks + b0)] && pos0 > b0 * cfg_.block_size) {
        if (error) *error = "DeviceKvCache: block " + std::to_string(b0) + " of layer " + std::to_string(layer) +
                            " was dropped: write it back before appending to it";
        return false;
    }
    for (int64_t b = b0; b <= b1; ++b) {
        if (resident(layer, b)) continue;
        if (on_host(layer, b)) {
            if (!fetch(layer, b, stream, error)) {
                undo();
                return false;
            }
            continue;
        }
        int64_t phys;
        if (!take_device_block(&phys, error)) {
            undo();
            return false;
        }
        dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + b)] = static_cast<int32_t>(phys);
        fresh.push_back(b);
    }
    if (!fresh.empty() && !upload_table(layer, b0, b1 + 1, stream, error)) {
        undo();
        return false;
    }
    for (int64_t b : fresh) mark_dropped(static_cast<size_t>(layer * cfg_.max_blocks + b), false);
    if (!ok(cuda::write_paged(k_view(layer), cfg_.n_kv_head, k, pos0, n, stream), "write_paged (K)", error)) return false;
    if (!ok(cuda::msa_key_means(k_view(layer), cfg_.n_kv_head, b0, b1 + 1, pos0 + n, kmean_ + layer * kmean_elems(), stream),
            "msa_key_means", error))
        return false;
    return ok(cuda::write_paged(v_view(layer), cfg_.n_kv_head, v, pos0, n, stream), "write_paged (V)", error);
}

bool DeviceKvCache::refresh_mean(int layer, int64_t block, int64_t n_kv, cudaStream_t stream, std::string* error) {
    if (!check(layer, block, error)) return false;
    if (!resident(layer, block) || n_kv <= block * cfg_.block_size) return true;
    return ok(cuda::msa_key_means(k_view(layer), cfg_.n_kv_head, block, block + 1, n_kv, kmean_ + layer * kmean_elems(),
                                  stream),
              "msa_key_means", error);
}

bool DeviceKvCache::write_block(int layer, int64_t block, const uint16_t* k, const uint16_t* v, int n_tokens,
                                cudaStream_t stream, std::string* error, bool keep_mean) {
    if (!check(layer, block, error)) return false;
    if (n_tokens < 1 || n_tokens > cfg_.block_size) {
        if (error) *error = "DeviceKvCache: a block of " + std::to_string(n_tokens) + " tokens";
        return false;
    }
    if (!resident(layer, block)) {
        if (on_host(layer, block)) {
            if (!fetch(layer, block, stream, error)) return false;
        } else {
            int64_t phys;
            if (!take_device_block(&phys, error)) return false;
            if (!set_table(layer, block, static_cast<int32_t>(phys), stream, error)) {
                dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + block)] = -1;
                free_dev_.push_back(phys);
                return false;
            }
        }
    }
    const int64_t phys = dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + block)];
    mark_dropped(static_cast<size_t>(layer * cfg_.max_blocks + block), false);
    const size_t bytes = static_cast<size_t>(block_elems()) * 2;
    if (!ok(cudaMemcpyAsync(k_pool_ + phys * block_elems(), k, bytes, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (write K block)", error) ||
        !ok(cudaMemcpyAsync(v_pool_ + phys * block_elems(), v, bytes, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (write V block)", error))
        return false;
    if (keep_mean) return true;
    return ok(cuda::msa_key_means(k_view(layer), cfg_.n_kv_head, block, block + 1, block * cfg_.block_size + n_tokens,
                                  kmean_ + layer * kmean_elems(), stream),
              "msa_key_means", error);
}

bool DeviceKvCache::offload(int layer, int64_t block, cudaStream_t stream, std::string* error) {
    if (!check(layer, block, error)) return false;
    if (!resident(layer, block)) return true;
    if (!host_pool_) {
        if (error) *error = "DeviceKvCache: no host tier configured";
        return false;
    }
    int64_t slot;
    if (!take_host_slot(&slot, error)) return false;
    const size_t i = static_cast<size_t>(layer * cfg_.max_blocks + block);
    const int64_t phys = dev_of_[i];
    const size_t bytes = static_cast<size_t>(block_elems()) * 2;
    uint16_t* host = host_pool_ + slot * block_elems() * 2;
    if (!ok(cudaMemcpyAsync(host, k_pool_ + phys * block_elems(), bytes, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync (offload K)", error) ||
        !ok(cudaMemcpyAsync(host + block_elems(), v_pool_ + phys * block_elems(), bytes, cudaMemcpyDeviceToHost,
                            stream),
            "cudaMemcpyAsync (offload V)", error)) {
        free_host_.push_back(slot);  // the block stays resident
        return false;
    }
    if (!set_table(layer, block, -1, stream, error)) {  // still resident; the slot goes back
        free_host_.push_back(slot);
        return false;
    }
    host_of_[i] = slot;
    return push_pending(pending_dev_, phys, stream, error);
}

bool DeviceKvCache::fetch(int layer, int64_t block, cudaStream_t stream, std::string* error) {
    if (!check(layer, block, error)) return false;
    if (resident(layer, block)) return true;
    const size_t i = static_cast<size_t>(layer * cfg_.max_blocks + block);
    const int64_t slot = host_of_[i];
    if (slot < 0) {
        if (error) *error = "DeviceKvCache: block " + std::to_string(block) + " of layer " + std::to_string(layer) +
                            " was never written";
        return false;
    }
    int64_t phys;
    if (!take_device_block(&phys, error)) return false;
    const size_t bytes = static_cast<size_t>(block_elems()) * 2;
    const uint16_t* host = host_pool_ + slot * block_elems() * 2;
    if (!ok(cudaMemcpyAsync(k_pool_ + phys * block_elems(), host, bytes, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (fetch K)", error) ||
        !ok(cudaMemcpyAsync(v_pool_ + phys * block_elems(), host + block_elems(), bytes, cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync (fetch V)", error)) {
        free_dev_.push_back(phys);  // the block stays on the host
        return false;
    }
    if (!set_table(layer, block, static_cast<int32_t>(phys), stream, error)) {  // still on the host
        free_dev_.push_back(phys);
        return false;
    }
    host_of_[i] = -1;
    return push_pending(pending_host_, slot, stream, error);
}

bool DeviceKvCache::read_block(int layer, int64_t block, uint16_t* k, uint16_t* v, cudaStream_t stream,
                               std::string* error) const {
    if (!check(layer, block, error)) return false;
    const size_t i = static_cast<size_t>(layer * cfg_.max_blocks + block);
    const size_t bytes = static_cast<size_t>(block_elems()) * 2;
    if (dev_of_[i] < 0 && host_of_[i] < 0) {
        if (error) *error = "DeviceKvCache: block " + std::to_string(block) + " of layer " + std::to_string(layer) +
                            (dropped_[i] ? " was dropped" : " was never written");
        return false;
    }
    // The host tier's copy may still be in flight (offload is asynchronous): wait for the stream
    // before reading it, and after the device copies.
    if (dev_of_[i] >= 0) {
        const int64_t phys = dev_of_[i];
        if (!ok(cudaMemcpyAsync(k, k_pool_ + phys * block_elems(), bytes, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync (read K block)", error) ||
            !ok(cudaMemcpyAsync(v, v_pool_ + phys * block_elems(), bytes, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync (read V block)", error))
            return false;
        return ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (read block)", error);
    }
    if (!ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (read block)", error)) return false;
    const uint16_t* host = host_pool_ + host_of_[i] * block_elems() * 2;
    std::memcpy(k, host, bytes);
    std::memcpy(v, host + block_elems(), bytes);
    return true;
}

bool DeviceKvCache::read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride,
                                cudaStream_t stream, std::string* error) const {
    for (int j = 0; j < n; ++j) {
        if (!check(layer[j], block[j], error)) return false;
        const size_t i = static_cast<size_t>(layer[j] * cfg_.max_blocks + block[j]);
        if (dev_of_[i] < 0 && host_of_[i] < 0) {
            if (error) *error = "DeviceKvCache: block " + std::to_string(block[j]) + " of layer " + std::to_string(layer[j]) +
                                (dropped_[i] ? " was dropped" : " was never written");
            return false;
        }
    }
    const size_t bytes = static_cast<size_t>(block_elems()) * 2;
    for (int j = 0; j < n; ++j) {
        const int64_t phys = dev_of_[static_cast<size_t>(layer[j] * cfg_.max_blocks + block[j])];
        if (phys < 0) continue;
        if (!ok(cudaMemcpyAsync(k + static_cast<size_t>(j) * stride, k_pool_ + phys * block_elems(), bytes,
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync (read K blocks)", error) ||
            !ok(cudaMemcpyAsync(v + static_cast<size_t>(j) * stride, v_pool_ + phys * block_elems(), bytes,
                                cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync (read V blocks)", error)) {
            cudaStreamSynchronize(stream);  // copies already enqueued write into k / v: let them finish
            return false;
        }
    }
    // The host tier's copies may still be in flight (offload is asynchronous): read after the wait.
    if (!ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (read blocks)", error)) return false;
    for (int j = 0; j < n; ++j) {
        const size_t i = static_cast<size_t>(layer[j] * cfg_.max_blocks + block[j]);
        if (dev_of_[i] >= 0) continue;
        const uint16_t* host = host_pool_ + host_of_[i] * block_elems() * 2;
        std::memcpy(k + static_cast<size_t>(j) * stride, host, bytes);
        std::memcpy(v + static_cast<size_t>(j) * stride, host + block_elems(), bytes);
    }
    return true;
}

bool DeviceKvCache::drop(int layer, int64_t block, cudaStream_t stream, std::string* error) {
    if (!check(layer, block, error)) return false;
    const size_t i = static_cast<size_t>(layer * cfg_.max_blocks + block);
    if (dev_of_[i] >= 0) {
        const int64_t phys = dev_of_[i];
        if (!set_table(layer, block, -1, stream, error)) return false;  // still resident
        mark_dropped(i, true);
        // Kernels enqueued before may still read it: free once the stream gets here.
        return push_pending(pending_dev_, phys, stream, error);
    }
    if (host_of_[i] >= 0) {
        const int64_t slot = host_of_[i];
        host_of_[i] = -1;
        mark_dropped(i, true);
        return push_pending(pending_host_, slot, stream, error);  // its offload copy may be in flight
    }
    return true;  // never written, or dropped already
}

bool DeviceKvCache::forget(int layer, int64_t block, cudaStream_t stream, std::string* error) {
    const bool ok = drop(layer, block, stream, error);
    if (check(layer, block, nullptr)) mark_dropped(static_cast<size_t>(layer * cfg_.max_blocks + block), false);
    return ok;
}

bool DeviceKvCache::place_dropped(int layer, int64_t b0, int64_t b1, const uint16_t* means, cudaStream_t stream,
                                  std::string* error) {
    if (b0 >= b1) return true;
    if (!check(layer, b0, error) || !check(layer, b1 - 1, error)) return false;
    if (!means) {
        if (error) *error = "DeviceKvCache: no mean keys to place";
        return false;
    }
    const size_t i0 = static_cast<size_t>(layer * cfg_.max_blocks + b0), count = static_cast<size_t>(b1 - b0);
    // The device's table says -1 for every block first (a failure leaves everything as it was).
    const std::vector<int32_t> was(dev_of_.begin() + static_cast<std::ptrdiff_t>(i0),
                                   dev_of_.begin() + static_cast<std::ptrdiff_t>(i0 + count));
    const bool any = std::any_of(was.begin(), was.end(), [](int32_t d) { return d >= 0; });
    std::fill(dev_of_.begin() + static_cast<std::ptrdiff_t>(i0), dev_of_.begin() + static_cast<std::ptrdiff_t>(i0 + count), -1);
    if (any && !upload_table(layer, b0, b1, stream, error)) {
        std::copy(was.begin(), was.end(), dev_of_.begin() + static_cast<std::ptrdiff_t>(i0));
        return false;
    }
    std::vector<int64_t> host;
    for (size_t i = i0; i < i0 + count; ++i) {
        if (host_of_[i] >= 0) host.push_back(host_of_[i]);
        host_of_[i] = -1;
        mark_dropped(i, true);
    }
    const size_t row = static_cast<size_t>(cfg_.n_kv_head) * cfg_.head_dim;
    const bool copied = ok(cudaMemcpyAsync(kmean_ + layer * kmean_elems() + b0 * static_cast<int64_t>(row), means,
                                           count * row * 2, cudaMemcpyHostToDevice, stream),
                           "cudaMemcpyAsync (mean keys)", error);
    // Kernels enqueued before may still read the freed blocks, and `means` is the caller's.
    const bool synced = ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (placed blocks)", copied ? error : nullptr);
    for (int32_t d : was)
        if (d >= 0) free_dev_.push_back(d);
    free_host_.insert(free_host_.end(), host.begin(), host.end());
    return copied && synced;
}

void DeviceKvCache::mark_dropped(size_t i, bool on) {
    if (static_cast<bool>(dropped_[i]) == on) return;
    dropped_[i] = on ? 1 : 0;
    n_dropped_ += on ? 1 : -1;
}

bool DeviceKvCache::dropped(int layer, int64_t block) const {
    return layer >= 0 && layer < cfg_.n_layer && block >= 0 && block < cfg_.max_blocks &&
           dropped_[static_cast<size_t>(layer * cfg_.max_blocks + block)] != 0;
}

bool DeviceKvCache::resident(int layer, int64_t block) const {
    return layer >= 0 && layer < cfg_.n_layer && block >= 0 && block < cfg_.max_blocks &&
           dev_of_[static_cast<size_t>(layer * cfg_.max_blocks + block)] >= 0;
}

bool DeviceKvCache::on_host(int layer, int64_t block) const {
    return layer >= 0 && layer < cfg_.n_layer && block >= 0 && block < cfg_.max_blocks &&
           host_of_[static_cast<size_t>(layer * cfg_.max_blocks + block)] >= 0;
}

PagedView DeviceKvCache::k_view(int layer) const {
    PagedView v;
    v.base = k_pool_;
    v.table = tables_ + static_cast<int64_t>(layer) * cfg_.max_blocks;
    v.block_stride = block_elems();
    v.head_stride = static_cast<int64_t>(cfg_.block_size) * cfg_.head_dim;
    v.block_size = cfg_.block_size;
    v.head_dim = cfg_.head_dim;
    return v;
}

PagedView DeviceKvCache::v_view(int layer) const {
    PagedView v = k_view(layer);
    v.base = v_pool_;
    return v;
}

}  // namespace sl

#endif  // SIGHTLINE_HAVE_CUDA
