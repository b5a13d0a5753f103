#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/quantize.h"

namespace sl::kernels {

namespace {

// Rows per tile: their weights stay in L1 while every token group passes over them.
constexpr int64_t kRowTile = 8;
// With a tile kernel (dot.h DotTileFn), which prepares a token group's activation scales (Q4_K:
// the activations reordered, the mins' activation side) once per call: more rows share that work.
// The tile's weights then come from L2 for each token group (128 rows of 2048 Q4_K: 144 KB),
// which measured no slower than L1-sized tiles (one core, 8 tokens: 72-73 GMAC/s for 32..256
// rows, 68 at 512), and the per-call preparation is spread over 4x the rows (1B Q4_K prefill
// @512, best of 4 alternating: 121 -> 125 tok/s; the default model not slower).
constexpr int64_t kTileKernelRows = 128;

size_t row_bytes(TensorType type, int64_t n) {
    const TensorTypeInfo info = tensor_type_info(type);
    return static_cast<size_t>(n / info.block_size) * info.type_size;
}

void check_n(TensorType wtype, int64_t n) {
    const TensorTypeInfo info = tensor_type_info(wtype);
    if (!can_vec_dot(wtype)) {
        throw std::invalid_argument(std::string("matmul: no kernel for weight type ") +
                                    (info.name ? info.name : "unknown"));
    }
    if (n < 0 || n % info.block_size != 0) {
        throw std::invalid_argument("matmul: row length " + std::to_string(n) + " is not a whole number of " +
                                    info.name + " blocks of " + std::to_string(info.block_size));
    }
}

void quantize_one(TensorType atype, const float* x, void* dst, int64_t n) {
    switch (atype) {
        case TensorType::Q8_0: return quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), n);
        case TensorType::Q8_1: return quantize_row_q8_1(x, static_cast<BlockQ8_1*>(dst), n);
        case TensorType::Q8_K: return quantize_row_q8_K(x, static_cast<BlockQ8_K*>(dst), n);
        default: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
    }
}

void rows_with(VecDotFn fn, DotTileFn tile, TensorType wtype, const void* W, int64_t n, const void* Xq,
               int64_t n_tokens, float* Y, int64_t ldy, int64_t row_begin, int64_t row_end) {
    const size_t wbytes = row_bytes(wtype, n);
    const size_t abytes = activation_row_bytes(wtype, n);
    const auto* w = static_cast<const char*>(W);
    const auto* xq = static_cast<const char*>(Xq);
    const auto ld = static_cast<size_t>(ldy);
    const int64_t row_tile = tile ? kTileKernelRows : kRowTile;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += row_tile) {
        const int64_t r1 = std::min(row_end, r0 + row_tile);
        const int64_t group = tile ? kMaxTileTokens : kMaxDotTokens;
        for (int64_t t = 0; t < n_tokens; t += group) {
            const int nt = static_cast<int>(std::min<int64_t>(group, n_tokens - t));
            const char* act = xq + static_cast<size_t>(t) * abytes;
            if (tile) {
                tile(n, w + static_cast<size_t>(r0) * wbytes, wbytes, static_cast<int>(r1 - r0), act, abytes, nt,
                     Y + static_cast<size_t>(t) * ld + r0, ld);
                continue;
            }
            for (int64_t r = r0; r < r1; ++r) {
                fn(n, w + static_cast<size_t>(r) * wbytes, act, abytes, nt, Y + static_cast<size_t>(t) * ld + r, ld);
            }
        }
    }
}

}  // namespace

size_t activation_row_bytes(TensorType wtype, int64_t n) {
    check_n(wtype, n);
    const TensorType atype = vec_dot_type(wtype);
    if (atype == TensorType::Q8_K && n % kQK_K != 0) {  // unreachable: K-quant weights have 256-blocks
        throw std::invalid_argument("matmul: row length not a multiple of 256");
    }
    return row_bytes(atype, n);
}

void quantize_activations(TensorType wtype, const float* X, int64_t n_tokens, int64_t n, void* Xq) {
    const size_t abytes = activation_row_bytes(wtype, n);
    const TensorType atype = vec_dot_type(wtype);
    for (int64_t t = 0; t < n_tokens; ++t) {
        quantize_one(atype, X + static_cast<size_t>(t) * static_cast<size_t>(n),
                     static_cast<char*>(Xq) + static_cast<size_t>(t) * abytes, n);
    }
}

void matmul_rows(TensorType wtype, const void* W, int64_t n, const void* Xq, int64_t n_tokens, float* Y, int64_t ldy,
                 int64_t row_begin, int64_t row_end) {
    check_n(wtype, n);
    const Isa isa = active_isa();
    rows_with(vec_dot_fn(wtype, isa), dot_tile_fn(wtype, isa), wtype, W, n, Xq, n_tokens, Y, ldy, row_begin, row_end);
}

void matmul(TensorType wtype, const void* W, int64_t d, int64_t n, const float* X, int64_t n_tokens, float* Y) {
    const size_t abytes = activation_row_bytes(wtype, n);
    // float storage keeps the 4-byte alignment Q8_K and f32 rows need.
    std::unique_ptr<float[]> xq(new float[(abytes * static_cast<size_t>(n_tokens) + 3) / 4]);
    quantize_activations(wtype, X, n_tokens, n, xq.get());
    matmul_rows(wtype, W, n, xq.get(), n_tokens, Y, d, 0, d);
}

namespace ref {

void matmul(TensorType wtype, const void* W, int64_t d, int64_t n, const float* X, int64_t n_tokens, float* Y) {
    const size_t abytes = activation_row_bytes(wtype, n);
    std::unique_ptr<float[]> xq(new float[(abytes * static_cast<size_t>(n_tokens) + 3) / 4]);
    const TensorType atype = vec_dot_type(wtype);
    for (int64_t t = 0; t < n_tokens; ++t) {
        void* dst = reinterpret_cast<char*>(xq.get()) + static_cast<size_t>(t) * abytes;
        const float* x = X + static_cast<size_t>(t) * static_cast<size_t>(n);
        switch (atype) {
            case TensorType::Q8_0: ref::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), n); break;
            case TensorType::Q8_1: ref::quantize_row_q8_1(x, static_cast<BlockQ8_1*>(dst), n); break;
            case TensorType::Q8_K: ref::quantize_row_q8_K(x, static_cast<BlockQ8_K*>(dst), n); break;
            default: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
        }
    }
    VecDotFn fn = ref::vec_dot_fn(wtype);
    // One token at a time: the reference does not group tokens.
    for (int64_t t = 0; t < n_tokens; ++t) {
        const char* act = reinterpret_cast<const char*>(xq.get()) + static_cast<size_t>(t) * abytes;
        const size_t wbytes = row_bytes(wtype, n);
        for (int64_t r = 0; r < d; ++r) {
            fn(n, static_cast<const char*>(W) + static_cast<size_t>(r) * wbytes, act, abytes, 1,
               Y + static_cast<size_t>(t) * static_cast<size_t>(d) + static_cast<size_t>(r), 0);
        }
    }
}

}  // namespace ref

}  // namespace sl::kernels
