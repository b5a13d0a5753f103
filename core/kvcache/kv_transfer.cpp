#include "core/kvcache/kv_transfer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/kvcache/kv_cache.h"
#include "core/util/error.h"
#include "kernels/cpu/convert.h"

namespace sl {

void kv_download(KvBlockStore& src, KvCache& dst, int64_t from, int64_t to) {
    if (from < 0 || from > to || to > dst.n_ctx())
        throw Error("KV download: positions [" + std::to_string(from) + ", " + std::to_string(to) +
                    ") outside a context of " + std::to_string(dst.n_ctx()));
    if (from == to) {
        dst.set_n_past(to);
        return;
    }
    const int64_t B = src.block_size(), hd = dst.head_dim(), n_kv = dst.n_kv_head(), Bd = dst.block_size();
    const size_t block = static_cast<size_t>(n_kv * B * hd);
    std::vector<uint16_t> kb(block), vb(block);
    std::vector<float> kr(static_cast<size_t>(std::min(B, Bd) * hd)), vr(kr.size());
    for (int l = 0; l < dst.n_layer(); ++l)
        for (int64_t b = from / B; b <= (to - 1) / B; ++b) {
            src.read_block(l, b, kb.data(), vb.data());
            // Per head, the block's positions in runs that stay within one host page: converted
            // and stored a run at a time.
            const int64_t p1 = std::min(to, (b + 1) * B);
            for (int64_t p = std::max(from, b * B); p < p1;) {
                const int64_t n = std::min(p1, (p / Bd + 1) * Bd) - p;
                const int64_t t = p - b * B;
                for (int64_t h = 0; h < n_kv; ++h) {
                    const size_t at = static_cast<size_t>((h * B + t) * hd);
                    kernels::bf16_to_f32(kr.data(), kb.data() + at, static_cast<size_t>(n * hd));
                    kernels::bf16_to_f32(vr.data(), vb.data() + at, static_cast<size_t>(n * hd));
                    dst.write_rows(l, static_cast<int>(h), p, static_cast<int>(n), kr.data(), vr.data());
                }
                p += n;
            }
        }
    dst.set_n_past(to);
}

void kv_upload(const KvCache& src, KvBlockStore& dst, int64_t from, int64_t to, int64_t chunk) {
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
    std::vector<uint16_t> kb(blocks ? elems : 0), vb(kb.size());
    std::vector<float> scratch(blocks ? static_cast<size_t>(B * hd) : 0);
    for (int l = 0; l < src.n_layer(); ++l) {
        for (int64_t p0 = from; p0 < rows_end; p0 += chunk) {
            const int64_t n = std::min(chunk, rows_end - p0);
            for (int64_t i = 0; i < n; ++i) src.read(l, p0 + i, k.data() + i * row, v.data() + i * row);
            dst.append_rows(l, p0, n, k.data(), v.data());
        }
        if (!blocks) continue;
        for (int64_t b = (rows_end + B - 1) / B; b * B < to; ++b) {  // whole pages, the last one partial
            const int n = static_cast<int>(std::min(B, to - b * B));
            if (n < B) {  // the partial last block: its tail zero
                std::fill(kb.begin(), kb.end(), uint16_t{0});
                std::fill(vb.begin(), vb.end(), uint16_t{0});
            }
            for (int64_t h = 0; h < n_kv; ++h) {
                const auto rows = static_cast<size_t>(n * hd);
                kernels::f32_to_bf16(kb.data() + h * B * hd, src.k_rows(l, static_cast<int>(h), b * B, n, scratch.data()), rows);
                kernels::f32_to_bf16(vb.data() + h * B * hd, src.v_rows(l, static_cast<int>(h), b * B, n, scratch.data()), rows);
            }
            dst.write_block(l, b, kb.data(), vb.data(), n);
        }
    }
    dst.flush();
}

}  // namespace sl
