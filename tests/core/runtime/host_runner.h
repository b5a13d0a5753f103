// The seam of tst_session_device*.cpp: a Session's device branch (core/runtime/device_runner.h)
// on a machine without a GPU. HostRunner computes with the CPU engine in its own f32 cache, as a
// device holds its own context; DeviceSessionFixture makes sessions on it (or on the CPU) over a
// tiny random model. tests/gpu/tst_cuda_session checks the same with CudaLlamaRunner on a GPU.
#pragma once

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/attention/dense_attention.h"
#include "core/attention/msa_attention.h"
#include "core/kvcache/kv_cache.h"
#include "core/kvcache/kv_file.h"
#include "core/kvcache/kv_transfer.h"
#include "core/model/model_loader.h"
#include "core/runtime/session.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"
#include "kernels/cpu/convert.h"
#include "tests/common/test_support.h"

namespace sl::test::device {


// A runner's f32 cache seen as a device's blocks (kv_transfer.h) of `block_size` positions: read as
// bf16, rounded as a device holds its K/V; failing with sl::DeviceError at read number `fail_at` (0: never).
class HostBlocks final : public sl::KvBlockStore {
public:
    HostBlocks(const sl::KvCache& kv, int block_size, int fail_at) : kv_(kv), B_(block_size), fail_at_(fail_at) {}
    int block_size() const override { return B_; }
    void read_block(int layer, int64_t block, uint16_t* k, uint16_t* v) override {
        if (++reads == fail_at_) throw sl::DeviceError("HostRunner: simulated download failure");
        const int64_t B = B_, hd = kv_.head_dim();
        std::fill(k, k + kv_.n_kv_head() * B * hd, uint16_t{0x7fc0});  // NaN: positions past the context
        std::fill(v, v + kv_.n_kv_head() * B * hd, uint16_t{0x7fc0});
        std::vector<float> scratch(static_cast<size_t>(hd));
        for (int64_t p = block * B; p < std::min(kv_.n_past(), (block + 1) * B); ++p)
            for (int h = 0; h < kv_.n_kv_head(); ++h) {
                const size_t at = static_cast<size_t>((h * B + p - block * B) * hd);
                sl::kernels::f32_to_bf16(k + at, kv_.k_rows(layer, h, p, 1, scratch.data()), static_cast<size_t>(hd));
                sl::kernels::f32_to_bf16(v + at, kv_.v_rows(layer, h, p, 1, scratch.data()), static_cast<size_t>(hd));
            }
    }
    void append_rows(int, int64_t, int64_t, const float*, const float*) override { throw sl::Error("HostBlocks: read only"); }
    int reads = 0;

private:
    const sl::KvCache& kv_;
    int B_, fail_at_;
};

// A "device" made of the CPU engine: its own f32 KV cache and attention (dense, or MSA with the
// session's configuration), failing with sl::DeviceError at forward call number `fail_at` (0: never).
class HostRunner final : public sl::DeviceRunner {
public:
    HostRunner(const sl::LoadedModel& m, int n_ctx, const sl::MsaConfig* msa, int fail_at, int* calls)
        : m_(m),
          pool_(1),
          kv_(m.model->config().n_layer, n_ctx, m.model->config().n_kv_head, m.model->config().head_dim,
              sl::KvCacheOptions{sl::KvType::F32, msa ? msa->block_size : 128, 0, {}}),
          fail_at_(fail_at),
          calls_(calls) {
        if (msa) {
            auto a = std::make_unique<sl::MsaAttention>(*msa);
            msa_ = a.get();
            attention_ = std::move(a);
        } else {
            attention_ = std::make_unique<sl::DenseAttention>();
        }
    }
    void forward(const int32_t* tokens, int n, float* logits, const float* embeddings) override {
        if (++*calls_ == fail_at_) throw sl::DeviceError("HostRunner: simulated device failure");
        fill();
        if (msa_) msa_->set_token_mass(record_ && n == 1);
        m_.model->forward(tokens, n, kv_.n_past(), kv_, *attention_, pool_, scratch_, logits, false, embeddings, true);
        recorded_ = record_ && n == 1;
    }
    int64_t n_past() const override { return lazy_src_ ? lazy_n_ : kv_.n_past(); }
    void reset() override {
        lazy_src_ = nullptr;
        backed = 0;
        kv_.clear();
        attention_->reset_state();
    }
    void truncate(int64_t n) override {
        fill();
        if (n > kv_.n_past()) throw sl::Error("HostRunner: truncate past the context");
        kv_.set_n_past(n);
        backed = std::min(backed, n);
        ++truncations;
    }
    void set_backing(const sl::KvCache* mirror, int64_t n) override {  // clamped as CudaLlamaRunner does
        backing = mirror;
        backed = mirror ? std::clamp<int64_t>(n, 0, n_past()) : 0;
    }
    void download_kv(sl::KvCache& dst, int64_t from) const override {
        if (fail_download) throw sl::DeviceError("HostRunner: simulated download failure");
        fill();
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = from; p < kv_.n_past(); ++p) {
                kv_.read(l, p, k.data(), v.data());
                dst.write(l, p, k.data(), v.data());
            }
        dst.set_n_past(kv_.n_past());
        downloaded += kv_.n_past() - from;
    }
    // With `streams` on, saves come straight from the "device" (KvStorePages over HostBlocks, two
    // blocks a batch so that a save reads several batches); `fail_stream_at`: the read that fails.
    bool save_pages(const sl::KvCache& mirror, int64_t from, const std::function<void(sl::KvPageSource&)>& write) const override {
        if (!streams) return false;
        fill();
        HostBlocks blocks(kv_, mirror.block_size(), fail_stream_at);
        sl::KvStorePages pages(blocks, mirror, from, kv_.n_past(), 2, 2);
        write(pages);
        streamed += kv_.n_past() - from;
        return true;
    }
    void upload_kv(const sl::KvCache& src, int64_t from, int64_t n) override {
        if (fail_upload) throw sl::DeviceError("HostRunner: simulated upload failure");
        fill();
        if (from > kv_.n_past()) throw sl::Error("HostRunner: upload after a gap");
        if (from == 0) reset();
        else truncate(from), attention_->truncate_state(from);
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = from; p < n; ++p) {
                src.read(l, p, k.data(), v.data());
                kv_.write(l, p, k.data(), v.data());
            }
        kv_.set_n_past(n);
        uploaded += n - from;
    }
    // A lazy restore, as CudaLlamaRunner's (MSA, the mirror's pages its blocks): the means kept
    // (regrouped into its blocks) for the tests to check, the K/V read from `src` only when the
    // context is first used (forward, truncate, a save), as a device reads the blocks it picks.
    bool place_kv(const sl::KvCache& src, int64_t n, int means_block,
                  const std::function<std::vector<float>(int)>& means) override {
        if (!places || !msa_ || src.block_size() != kv_.block_size()) return false;
        const size_t dkv = static_cast<size_t>(kv_.row());
        std::vector<std::vector<float>> got;
        for (int l = 0; l < kv_.n_layer(); ++l) {
            const std::vector<float> f = means(l);
            if (f.size() != static_cast<size_t>((n + means_block - 1) / means_block) * dkv) return false;
            got.push_back(sl::kv_regroup_means(f, means_block, n, kv_.block_size(), static_cast<int>(dkv)));
        }
        if (fail_upload) throw sl::DeviceError("HostRunner: simulated upload failure");
        reset();
        placed_means = std::move(got);
        lazy_src_ = &src;
        lazy_n_ = n;
        out_blocks_ = n / kv_.block_size() * kv_.n_layer();
        ++placements;
        return true;
    }
    // Idle fills: the placed context's whole blocks counted back a slice at a time (read from
    // `src` when the last one comes, or by the first step, as fill() does).
    int64_t fill_placed(int64_t max_blocks) override {
        if (fail_fill) throw sl::DeviceError("HostRunner: simulated fill failure");
        if (!lazy_src_) return 0;
        const int64_t n = std::min(max_blocks, out_blocks_);
        out_blocks_ -= n;
        ++fill_calls;
        if (out_blocks_ == 0) fill();
        return n;
    }
    // The mean keys of its own blocks, as a device keeps them (bf16), read back as CudaLlamaRunner
    // reads them: from the first block a save asks for on (counted in means_fetched).
    sl::KvBlockSummaries key_means(int layer) const override {
        fill();
        if (!msa_ || kv_.n_past() == 0) return {};
        return sl::kv_lazy_bf16_summaries(kv_.n_past(), kv_.block_size(), kv_.row(), [this, layer](int64_t b0, int64_t b1, uint16_t* dst) {
            std::vector<float> row(static_cast<size_t>(kv_.head_dim())), mean(static_cast<size_t>(kv_.row()));
            const int64_t B = kv_.block_size();
            for (int64_t b = b0; b < b1; ++b) {
                const int64_t end = std::min(kv_.n_past(), (b + 1) * B);
                std::fill(mean.begin(), mean.end(), 0.0f);
                for (int h = 0; h < kv_.n_kv_head(); ++h) {
                    float* o = mean.data() + static_cast<size_t>(h) * kv_.head_dim();
                    for (int64_t p = b * B; p < end; ++p) {
                        const float* k = kv_.k_rows(layer, h, p, 1, row.data());
                        for (int j = 0; j < kv_.head_dim(); ++j) o[j] += k[j];
                    }
                    for (int j = 0; j < kv_.head_dim(); ++j) o[j] /= static_cast<float>(end - b * B);
                }
                sl::kernels::f32_to_bf16(dst + (b - b0) * kv_.row(), mean.data(), mean.size());
                ++means_fetched;
            }
        });
    }
    void set_record_mass(bool on) override { record_ = on; }
    std::vector<sl::Selection> recorded_selections(int layer) const override {
        return recorded_ && msa_ ? msa_->last_selections(layer) : std::vector<sl::Selection>{};
    }

    bool fail_upload = false, fail_download = false, streams = false;
    bool places = false;  // takes place_kv
    bool fail_fill = false;
    int fill_calls = 0;
    int placements = 0;
    std::vector<std::vector<float>> placed_means;  // per layer, (blocks of its size, n_kv_head, head_dim)
    mutable int64_t filled = 0;                    // positions read from a placed context
    mutable int64_t means_fetched = 0;             // rows of mean keys key_means read back
    int fail_stream_at = 0;
    mutable int64_t downloaded = 0, streamed = 0;
    const sl::KvCache* backing = nullptr;  // set_backing: what the session's mirror holds
    int64_t backed = 0;
    int64_t uploaded = 0;
    int truncations = 0;

private:
    // The placed context's K/V from the mirror, once (its pages checked as they are read).
    void fill() const {
        if (!lazy_src_) return;
        const sl::KvCache& src = *lazy_src_;
        lazy_src_ = nullptr;
        std::vector<float> k(static_cast<size_t>(kv_.row())), v(k.size());
        for (int l = 0; l < kv_.n_layer(); ++l)
            for (int64_t p = 0; p < lazy_n_; ++p) {
                src.read(l, p, k.data(), v.data());
                kv_.write(l, p, k.data(), v.data());
            }
        kv_.set_n_past(lazy_n_);
        filled += lazy_n_;
    }
    int64_t out_blocks_ = 0;  // whole blocks of a placed context not counted back yet
    mutable const sl::KvCache* lazy_src_ = nullptr;
    int64_t lazy_n_ = 0;
    const sl::LoadedModel& m_;
    sl::ThreadPool pool_;
    mutable sl::KvCache kv_;
    std::unique_ptr<sl::Attention> attention_;
    sl::MsaAttention* msa_ = nullptr;
    sl::ForwardScratch scratch_;
    int fail_at_;
    int* calls_;
    bool record_ = false, recorded_ = false;
};

inline std::vector<int32_t> ids(int n, int n_vocab, int salt = 0) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11 + salt * 101 + (i * i) % 13) % n_vocab);
    return t;
}

inline std::vector<float> copy(std::span<const float> v) { return {v.begin(), v.end()}; }

// The MSA both engines run in these tests: blocks of 32 (the session's pages), top 4.
inline sl::MsaConfig small_msa() {
    sl::MsaConfig mc;
    mc.block_size = 32;
    mc.top_k = 4;
    sl::parse_msa_scoring("hybrid4/group-mean/sink", mc);
    return mc;
}

// Mean keys of every block of B positions of `layer` of `kv`, (blocks, n_kv_head, head_dim).
inline std::vector<float> block_means(const sl::KvCache& kv, int layer, int B) {
    const int64_t n = kv.n_past(), nb = (n + B - 1) / B;
    const int hd = kv.head_dim();
    std::vector<float> out(static_cast<size_t>(nb * kv.row())), row(static_cast<size_t>(hd));
    for (int64_t b = 0; b < nb; ++b)
        for (int h = 0; h < kv.n_kv_head(); ++h) {
            std::vector<double> sum(static_cast<size_t>(hd), 0.0);
            const int64_t end = std::min(n, (b + 1) * B);
            for (int64_t p = b * B; p < end; ++p) {
                const float* k = kv.k_rows(layer, h, p, 1, row.data());
                for (int j = 0; j < hd; ++j) sum[static_cast<size_t>(j)] += k[j];
            }
            for (int j = 0; j < hd; ++j)
                out[static_cast<size_t>(b * kv.row() + h * hd + j)] = static_cast<float>(sum[static_cast<size_t>(j)] / static_cast<double>(end - b * B));
        }
    return out;
}

// Flips bits `mask` of byte `at` of the file's page record number `page` (layer * blocks + block).
inline void flip_page_byte(const std::string& path, size_t page, uint64_t at, int mask) {
    uint64_t off = 0;
    {
        const sl::MappedFile map(path);
        off = sl::parse_kv_file(map.bytes(), path, sl::KvVerify::Headers).page_offset[page] + at;
    }
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(off));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ mask);
    f.seekp(static_cast<std::streamoff>(off));
    f.write(&byte, 1);
}

inline int64_t imported(sl::Session& s) { return dynamic_cast<sl::MsaAttention&>(s.attention()).stats().imported_indexes; }

// Positions of [from, to), over every layer, where the K or V rows of `a` and `b` differ.
inline int differing_rows(const sl::KvCache& a, const sl::KvCache& b, int64_t from, int64_t to) {
    std::vector<float> k1(static_cast<size_t>(a.row())), v1(k1.size()), k2(k1.size()), v2(k1.size());
    int differ = 0;
    for (int l = 0; l < a.n_layer(); ++l)
        for (int64_t p = from; p < to; ++p) {
            a.read(l, p, k1.data(), v1.data());
            b.read(l, p, k2.data(), v2.data());
            differ += k1 != k2 || v1 != v2;
        }
    return differ;
}


// The tests' sessions: on the CPU, or on a HostRunner (runner_ the last one made) that fails its
// forward call number fail_at (0: never); contexts of 640 positions in pages of 32.
struct DeviceSessionFixture {
    sl::SessionOptions options(bool device, int fail_at = 0, const sl::MsaConfig* = nullptr) {
        sl::SessionOptions so;
        so.n_ctx = 640;
        so.n_threads = 1;
        so.n_batch = 48;
        so.kv_block = 32;
        so.device = "cpu";
        if (device)
            so.runner_factory = [this, fail_at](const sl::LoadedModel& m, const sl::MsaConfig* msa) {
                auto r = std::make_unique<HostRunner>(m, 640, msa, fail_at, &calls_);
                runner_ = r.get();
                return r;
            };
        return so;
    }
    // The tiny random model (make_tiny_model.py, seed 7); false without the project's venv.
    bool load_tiny_model() {
        const QString py = sl::test::require_venv_python();
        if (py.isEmpty()) return false;
        const QString path = dir_.filePath("tiny.gguf");
        if (!sl::test::run_process(py, {sl::test::reference_script(QStringLiteral("model/make_tiny_model.py")), path,
                                        QStringLiteral("--wtype"), QStringLiteral("f32"), QStringLiteral("--seed"),
                                        QStringLiteral("7")},
                                   nullptr))
            return false;
        model_ = sl::load_model(path.toStdString());
        n_vocab_ = model_->model->config().n_vocab;
        return true;
    }
    QTemporaryDir dir_;
    std::unique_ptr<sl::LoadedModel> model_;
    int n_vocab_ = 0;
    int calls_ = 0;
    HostRunner* runner_ = nullptr;
};

}  // namespace sl::test::device
