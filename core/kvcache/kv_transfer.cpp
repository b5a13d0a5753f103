#include "core/kvcache/kv_transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/runtime/thread_pool.h"
#include "core/kvcache/kv_file.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"

namespace sl {

KvBlockStore::HostBuffer KvBlockStore::host_buffer(size_t elems) {
    return HostBuffer(new uint16_t[std::max<size_t>(elems, 1)], [](uint16_t* p) { delete[] p; });
}

void KvBlockStore::read_blocks(int n, const int* layer, const int64_t* block, uint16_t* k, uint16_t* v, size_t stride) {
    for (int i = 0; i < n; ++i)
        read_block(layer[i], block[i], k + static_cast<size_t>(i) * stride, v + static_cast<size_t>(i) * stride);
}

void kv_download(KvBlockStore& src, KvCache& dst, int64_t from, int64_t to, int threads) {
    if (from < 0 || from > to || to > dst.n_ctx())
        throw Error("KV download: positions [" + std::to_string(from) + ", " + std::to_string(to) +
                    ") outside a context of " + std::to_string(dst.n_ctx()));
    if (from == to) {
        dst.set_n_past(to);
        return;
    }
    const int64_t B = src.block_size(), hd = dst.head_dim(), n_kv = dst.n_kv_head(), Bd = dst.block_size();
    const size_t block = static_cast<size_t>(n_kv * B * hd);
    // Blocks [b0, b1) of each layer, read kBatch at a time on this thread (read_blocks) (the store's calls stay
    // here), then converted and stored on the pool's threads when there are many (a save at a
    // million tokens: 23 GB, most of it first touches of new host pages) into pages reserved first.
    const int64_t b0 = from / B, b1 = (to - 1) / B + 1;
    constexpr int64_t kBatch = 32;
    const int64_t batch = std::min(kBatch, b1 - b0);
    const int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::unique_ptr<ThreadPool> pool;
    // Under a RAM budget pages are stored one at a time (KvCache::reserve refuses): no pool then.
    if (n_threads > 1 && batch > 1 && dst.options().budget_bytes <= 0 && (threads > 0 || (b1 - b0) * dst.n_layer() >= 2 * kBatch)) {
        try {
            pool = std::make_unique<ThreadPool>(n_threads);
        } catch (const std::system_error&) {
            // No threads to be had: stored on this one.
        }
    }
    const KvBlockStore::HostBuffer kbuf = src.host_buffer(static_cast<size_t>(batch) * block);
    const KvBlockStore::HostBuffer vbuf = src.host_buffer(static_cast<size_t>(batch) * block);
    uint16_t* const kb = kbuf.get();
    uint16_t* const vb = vbuf.get();
    std::vector<int> layers(static_cast<size_t>(batch));
    std::vector<int64_t> blocks(static_cast<size_t>(batch));
    const size_t n_scratch = static_cast<size_t>(pool ? pool->size() : 1);
    std::vector<std::vector<float>> kr(n_scratch, std::vector<float>(static_cast<size_t>(std::min(B, Bd) * hd))), vr(kr);
    for (int l = 0; l < dst.n_layer(); ++l)
        for (int64_t first = b0; first < b1; first += batch) {
            const int64_t count = std::min(batch, b1 - first);
            for (int64_t i = 0; i < count; ++i) {
                layers[static_cast<size_t>(i)] = l;
                blocks[static_cast<size_t>(i)] = first + i;
            }
            src.read_blocks(static_cast<int>(count), layers.data(), blocks.data(), kb, vb, block);
            // Block i's positions, per head, in runs that stay within one host page: converted and
            // stored a run at a time.
            auto store = [&](int64_t i0, int64_t i1, int t) {
                float* kt = kr[static_cast<size_t>(t)].data();
                float* vt = vr[static_cast<size_t>(t)].data();
                for (int64_t i = i0; i < i1; ++i) {
                    const int64_t b = first + i;
                    const uint16_t* kbi = kb + static_cast<size_t>(i) * block;
                    const uint16_t* vbi = vb + static_cast<size_t>(i) * block;
                    const int64_t p1 = std::min(to, (b + 1) * B);
                    for (int64_t p = std::max(from, b * B); p < p1;) {
                        const int64_t n = std::min(p1, (p / Bd + 1) * Bd) - p;
                        const int64_t off = p - b * B;
                        for (int64_t h = 0; h < n_kv; ++h) {
                            const size_t at = static_cast<size_t>((h * B + off) * hd);
                            kernels::bf16_to_f32(kt, kbi + at, static_cast<size_t>(n * hd));
                            kernels::bf16_to_f32(vt, vbi + at, static_cast<size_t>(n * hd));
                            dst.write_rows(l, static_cast<int>(h), p, static_cast<int>(n), kt, vt);
                        }
                        p += n;
                    }
                }
            };
            // Host pages of the batch's positions made RAM first (their first touch on the pool): the
            // stores then allocate nothing and may run at once (each block writes its own rows).
            const int64_t q0 = std::max(from, first * B), q1 = std::min(to, (first + count) * B);
            if (pool && count > 1 && dst.reserve(l, q0 / Bd, (q1 - 1) / Bd + 1, pool.get()))
                pool->parallel_for(count, store);
            else
                store(0, count, 0);
        }
    dst.set_n_past(to);
}

void kv_block_bf16(const KvCache& src, int layer, int64_t block, int n, uint16_t* k, uint16_t* v, float* scratch) {
    const int64_t B = src.block_size(), hd = src.head_dim(), n_kv = src.n_kv_head();
    const auto elems = static_cast<size_t>(n_kv * B * hd);
    if (n < B) {
        std::fill(k, k + elems, uint16_t{0});
        std::fill(v, v + elems, uint16_t{0});
    }
    const auto rows = static_cast<size_t>(n * hd);
    for (int64_t h = 0; h < n_kv; ++h) {
        kernels::f32_to_bf16(k + h * B * hd, src.k_rows(layer, static_cast<int>(h), block * B, n, scratch), rows);
        kernels::f32_to_bf16(v + h * B * hd, src.v_rows(layer, static_cast<int>(h), block * B, n, scratch), rows);
    }
}

void kv_upload(const KvCache& src, KvBlockStore& dst, int64_t from, int64_t to, int64_t chunk, int threads) {
    if (from < 0 || from > to || to > src.n_past())
        throw Error("KV upload: positions [" + std::to_string(from) + ", " + std::to_string(to) +
                    ") outside the " + std::to_string(src.n_past()) + " the cache holds");
    chunk = std::max<int64_t>(chunk, 1);
    const int64_t B = dst.block_size();
    const bool blocks = dst.takes_blocks() && src.block_size() == B;
    // Rows for [from, rows_end): all of it, or up to the first block boundary.
    const int64_t rows_end = blocks ? std::min(to, (from + B - 1) / B * B) : to;
    const size_t row = static_cast<size_t>(src.row());
    std::vector<float> k(static_cast<size_t>(std::min(chunk, std::max<int64_t>(rows_end - from, 1))) * row), v(k.size());
    const int64_t hd = src.head_dim(), n_kv = src.n_kv_head();
    const size_t elems = static_cast<size_t>(n_kv * B * hd);
    // Whole blocks [b0, b1) of each layer, converted kBatch at a time (on the pool's threads when
    // there are many: at a million tokens 23 GB), then handed to the store in order.
    const int64_t b0 = (rows_end + B - 1) / B, b1 = blocks ? (to + B - 1) / B : b0;
    constexpr int64_t kBatch = 32;
    const int64_t per_layer = std::max<int64_t>(b1 - b0, 0);
    const int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::unique_ptr<ThreadPool> pool;
    if (n_threads > 1 && per_layer > 1 && (threads > 0 || per_layer * src.n_layer() >= 2 * kBatch)) {
        try {
            pool = std::make_unique<ThreadPool>(n_threads);
        } catch (const std::system_error&) {
            // No threads to be had: converted on this one.
        }
    }
    const int64_t batch = std::min(kBatch, per_layer);
    // Into the store's staging when it takes a batch: no copy on this thread after the conversion.
    const bool staged = batch > 0 && dst.stage_capacity() >= batch;
    std::vector<uint16_t> kb(staged ? 0 : static_cast<size_t>(batch) * elems), vb(kb.size());
    std::vector<std::vector<float>> scratch(static_cast<size_t>(pool ? pool->size() : 1),
                                            std::vector<float>(blocks ? static_cast<size_t>(B * hd) : 0));
    for (int l = 0; l < src.n_layer(); ++l) {
        for (int64_t p0 = from; p0 < rows_end; p0 += chunk) {
            const int64_t n = std::min(chunk, rows_end - p0);
            for (int64_t i = 0; i < n; ++i) src.read(l, p0 + i, k.data() + i * row, v.data() + i * row);
            dst.append_rows(l, p0, n, k.data(), v.data());
        }
        for (int64_t first = b0; first < b1; first += batch) {  // whole pages, the last one partial
            const int64_t count = std::min(batch, b1 - first);
            uint16_t* const room = staged ? dst.stage(static_cast<int>(count)) : nullptr;
            if (staged && !room) throw Error("KV upload: the store gave no staging for " + std::to_string(count) + " blocks");
            // Block i's K and V: in the staging (K then V per block) or in kb / vb.
            auto k_of = [&](int64_t i) { return room ? room + static_cast<size_t>(i) * 2 * elems : kb.data() + static_cast<size_t>(i) * elems; };
            auto v_of = [&](int64_t i) { return room ? room + static_cast<size_t>(i) * 2 * elems + elems : vb.data() + static_cast<size_t>(i) * elems; };
            // Block i of the batch into slot i: its rows of every head, bf16; a partial block's tail zero.
            auto convert = [&](int64_t i0, int64_t i1, int t) {
                float* sc = scratch[static_cast<size_t>(t)].data();
                for (int64_t i = i0; i < i1; ++i) {
                    const int64_t b = first + i;
                    kv_block_bf16(src, l, b, static_cast<int>(std::min(B, to - b * B)), k_of(i), v_of(i), sc);
                }
            };
            if (pool && count > 1) {
                // Workers must not throw (ThreadPool): a page never written is refused here.
                for (int64_t b = first; b < first + count; ++b)
                    if (!src.written(l, b))  // not page(): the workers check a restored page, in parallel
                        throw Error("KV upload: layer " + std::to_string(l) + " block " + std::to_string(b) + " was never written");
                pool->parallel_for(count, convert);
            } else {
                convert(0, count, 0);
            }
            for (int64_t i = 0; i < count; ++i) {
                const int n = static_cast<int>(std::min(B, to - (first + i) * B));
                if (room) dst.write_staged(static_cast<int>(i), l, first + i, n);
                else dst.write_block(l, first + i, k_of(i), v_of(i), n);
            }
        }
    }
    dst.flush();
}

KvStorePages::KvStorePages(KvBlockStore& src, const KvCache& layout, int64_t from, int64_t to, int threads, int64_t max_batch)
    : src_(src), kv_(layout), from_(from), to_(to), k_(nullptr, nullptr), v_(nullptr, nullptr) {
    if (from < 0 || from > to || to > layout.n_ctx())
        throw Error("KV save: positions [" + std::to_string(from) + ", " + std::to_string(to) + ") outside a context of " +
                    std::to_string(layout.n_ctx()));
    const int64_t B = layout.block_size();
    if (src.block_size() != B)
        throw Error("KV save: device blocks of " + std::to_string(src.block_size()) + " positions, host pages of " +
                    std::to_string(B));
    nb_ = (to + B - 1) / B;
    elems_ = static_cast<size_t>(layout.n_kv_head()) * static_cast<size_t>(B) * static_cast<size_t>(layout.head_dim());
    const size_t per_block = static_cast<size_t>(layout.n_layer()) * (4 * elems_ + layout.page_bytes());
    constexpr size_t kBytes = size_t{64} << 20;
    batch_ = std::clamp<int64_t>(static_cast<int64_t>(kBytes / std::max<size_t>(per_block, 1)), 1, std::max<int64_t>(max_batch, 1));
    batch_ = std::max<int64_t>(1, std::min(batch_, nb_ - from / B));
    const auto units = static_cast<size_t>(batch_) * static_cast<size_t>(layout.n_layer());
    k_ = src.host_buffer(units * elems_);
    v_ = src.host_buffer(units * elems_);
    layer_.resize(units);
    block_.resize(units);
    hash_.resize(units);
    pages_.resize(units * layout.page_bytes());
    const int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // A small save (a question's few blocks) converts on this thread unless told otherwise.
    const int64_t total = (nb_ - from / B) * layout.n_layer();
    if (n_threads > 1 && units > 1 && (threads > 0 || total >= 64)) {
        try {
            pool_ = std::make_unique<ThreadPool>(n_threads);
        } catch (const std::system_error&) {
            // No threads to be had: converted on this one.
        }
    }
    scratch_.assign(static_cast<size_t>(pool_ ? pool_->size() : 1),
                    std::vector<float>(2 * static_cast<size_t>(B) * static_cast<size_t>(layout.head_dim())));
}

KvStorePages::~KvStorePages() = default;

KvPage KvStorePages::page(int layer, int64_t block) {
    if (layer < 0 || layer >= kv_.n_layer() || block < 0 || block >= nb_)
        throw Error("KV save: page of layer " + std::to_string(layer) + " block " + std::to_string(block) +
                    " outside the context's " + std::to_string(nb_) + " blocks");
    if (block < from_ / kv_.block_size()) {  // wholly the mirror's
        const uint8_t* p = kv_.page(layer, block);
        if (!p)
            throw Error("KV save: the host copy lacks layer " + std::to_string(layer) + " block " + std::to_string(block) +
                        " (positions before " + std::to_string(from_) + ")");
        const KvPage out{p, kv_hash(p, kv_.page_bytes())};
        if (kv_.options().budget_bytes > 0 && ++mirror_pages_ % 256 == 0) kv_.release_maps();  // keep RSS bounded
        return out;
    }
    if (block < first_ || block >= first_ + count_) load(block);
    const auto u = static_cast<size_t>((block - first_) * kv_.n_layer() + layer);
    return {pages_.data() + u * kv_.page_bytes(), hash_[u]};
}

void KvStorePages::load(int64_t first) {
    first_ = -1;  // nothing valid while loading (a throw leaves no stale batch)
    count_ = 0;
    const int64_t count = std::min(batch_, nb_ - first);
    const int n_layer = kv_.n_layer();
    const int64_t B = kv_.block_size(), hd = kv_.head_dim(), n_kv = kv_.n_kv_head();
    const size_t pb = kv_.page_bytes();
    for (int64_t i = 0; i < count; ++i)
        for (int l = 0; l < n_layer; ++l) {
            const auto u = static_cast<size_t>(i * n_layer + l);
            layer_[u] = l;
            block_[u] = first + i;
            // Workers must not throw (ThreadPool): a mirror page the save needs is checked here.
            if ((first + i) * B < from_ && !kv_.written(l, first + i))
                throw Error("KV save: the host copy lacks layer " + std::to_string(l) + " block " + std::to_string(first + i) +
                            " (positions before " + std::to_string(from_) + ")");
        }
    src_.read_blocks(static_cast<int>(count * n_layer), layer_.data(), block_.data(), k_.get(), v_.get(), elems_);
    auto convert = [&](int64_t u0, int64_t u1, int t) {
        float* kt = scratch_[static_cast<size_t>(t)].data();
        float* vt = kt + B * hd;
        for (int64_t u = u0; u < u1; ++u) {
            const int64_t b = first + u / n_layer;
            const int l = static_cast<int>(u % n_layer);
            uint8_t* page = pages_.data() + static_cast<size_t>(u) * pb;
            if (b * B < from_) std::memcpy(page, kv_.page(l, b), pb);
            else std::memset(page, 0, pb);
            const int64_t p0 = std::max(from_, b * B), p1 = std::min(to_, (b + 1) * B);
            if (p1 > p0) {
                const auto off = p0 - b * B;
                const auto n = static_cast<size_t>(p1 - p0);
                const uint16_t* kb = k_.get() + static_cast<size_t>(u) * elems_;
                const uint16_t* vb = v_.get() + static_cast<size_t>(u) * elems_;
                for (int64_t h = 0; h < n_kv; ++h) {
                    const auto at = static_cast<size_t>((h * B + off) * hd);
                    kernels::bf16_to_f32(kt, kb + at, n * static_cast<size_t>(hd));
                    kernels::bf16_to_f32(vt, vb + at, n * static_cast<size_t>(hd));
                    kv_.encode_rows(page, static_cast<int>(h), static_cast<int>(off), static_cast<int>(n), kt, vt);
                }
            }
            hash_[static_cast<size_t>(u)] = kv_hash(page, pb);
        }
    };
    const int64_t units = count * n_layer;
    if (pool_ && units > 1) pool_->parallel_for(units, convert);
    else convert(0, units, 0);
    first_ = first;
    count_ = count;
    ++batches_;
}

std::vector<float> kv_regroup_means(std::span<const float> means, int S, int64_t n, int B, int dim) {
    if (S < 1 || B < S || B % S != 0 || n < 0 || dim < 1 ||
        means.size() != static_cast<size_t>((n + S - 1) / S) * static_cast<size_t>(dim))
        throw Error("mean keys of " + std::to_string(means.size()) + " values for " + std::to_string(n) +
                    " positions in blocks of " + std::to_string(S) + " do not regroup into blocks of " + std::to_string(B));
    const auto d = static_cast<size_t>(dim);
    if (S == B) return {means.begin(), means.end()};
    const int64_t nb = (n + B - 1) / B, ns = (n + S - 1) / S;
    std::vector<float> out(static_cast<size_t>(nb) * d, 0.0f);
    for (int64_t b = 0; b < nb; ++b) {
        float* o = out.data() + static_cast<size_t>(b) * d;
        const int64_t end = std::min(n, (b + 1) * B);
        for (int64_t s = b * B / S; s < ns && s * S < end; ++s) {
            const float w = static_cast<float>(std::min<int64_t>(S, end - s * S));
            const float* m = means.data() + static_cast<size_t>(s) * d;
            for (size_t j = 0; j < d; ++j) o[j] += w * m[j];
        }
        const float inv = 1.0f / static_cast<float>(end - b * B);
        for (size_t j = 0; j < d; ++j) o[j] *= inv;
    }
    return out;
}

KvBlockSummaries kv_lazy_bf16_summaries(int64_t n, int block_size, int dim,
                                        std::function<void(int64_t b0, int64_t b1, uint16_t* dst)> fetch) {
    KvBlockSummaries s;
    if (n <= 0 || block_size < 1 || dim < 1 || !fetch) return s;
    const int64_t nb = (n + block_size - 1) / block_size;
    const auto d = static_cast<size_t>(dim);
    struct Rows {
        int64_t first = -1;  // rows [first, nb) are in `host`
        std::vector<uint16_t> host;
    };
    auto rows = std::make_shared<Rows>();
    s.n = n;
    s.block_size = block_size;
    s.floats = dim;
    s.get = [rows, nb, d, fetch = std::move(fetch)](int64_t b, float* out) {
        if (b < 0 || b >= nb) throw Error("mean keys of block " + std::to_string(b) + " of " + std::to_string(nb) + " asked");
        if (rows->first < 0 || b < rows->first) {
            std::vector<uint16_t> host(static_cast<size_t>(nb - b) * d);
            fetch(b, nb, host.data());
            rows->host = std::move(host);
            rows->first = b;
        }
        kernels::bf16_to_f32(out, rows->host.data() + static_cast<size_t>(b - rows->first) * d, d);
    };
    return s;
}

}  // namespace sl
