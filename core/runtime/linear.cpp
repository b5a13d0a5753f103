#include "core/runtime/linear.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/runtime/thread_pool.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace sl {

namespace {

std::atomic<bool>& exact_flag() {
    static std::atomic<bool> flag{[] {
        const char* v = std::getenv("SIGHTLINE_EXACT_ACTIVATIONS");
        return v && *v && *v != '0';
    }()};
    return flag;
}

void linear_exact(const TensorView& W, const float* X, int n_tokens, float* Y, ThreadPool& pool) {
    const int64_t n = W.ne0, d = W.ne1;
    pool.parallel_for(d, [&](int64_t r0, int64_t r1, int) {
        std::vector<float> row(static_cast<size_t>(n));
        for (int64_t r = r0; r < r1; ++r) {
            kernels::dequantize_row(W.type, W.row(r), row.data(), n);
            for (int t = 0; t < n_tokens; ++t) Y[t * d + r] = kernels::dot_f32(row.data(), X + t * n, n);
        }
    }, 16);
}

}  // namespace

void set_exact_activations(bool on) { exact_flag().store(on); }
bool exact_activations() { return exact_flag().load(); }

void linear(const TensorView& W, const float* X, int n_tokens, float* Y, ThreadPool& pool,
            std::vector<uint8_t>& quant_scratch) {
    if (exact_activations()) return linear_exact(W, X, n_tokens, Y, pool);
    const int64_t n = W.ne0, d = W.ne1;
    const size_t row_bytes = kernels::activation_row_bytes(W.type, n);
    const void* Xq = X;
    const bool plain = W.type == kernels::TensorType::F32 || W.type == kernels::TensorType::F16 ||
                       W.type == kernels::TensorType::BF16;
    if (!plain) {
        quant_scratch.resize(row_bytes * static_cast<size_t>(n_tokens));
        uint8_t* q = quant_scratch.data();
        // Token rows are independent: quantize them in parallel when there are several.
        pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
            kernels::quantize_activations(W.type, X + t0 * n, t1 - t0, n, q + static_cast<size_t>(t0) * row_bytes);
        });
        Xq = q;
    }
    // Rows in multiples of 16 keep workers off each other's cache lines of Y.
    pool.parallel_for(d, [&](int64_t r0, int64_t r1, int) {
        kernels::matmul_rows(W.type, W.data, n, Xq, n_tokens, Y, d, r0, r1);
    }, 16);
}

void linear_shared(std::span<const LinearOut> outs, const float* X, int n_tokens, ThreadPool& pool,
                   std::vector<uint8_t>& quant_scratch, const std::function<void(int64_t, int64_t)>& epilogue) {
    if (outs.empty()) return;
    const int64_t n = outs[0].W->ne0;
    const kernels::TensorType atype = kernels::vec_dot_type(outs[0].W->type);
    bool same = !exact_activations() && atype != kernels::TensorType::F32;
    for (const LinearOut& o : outs) same = same && o.W->ne0 == n && kernels::vec_dot_type(o.W->type) == atype;
    if (epilogue)
        for (const LinearOut& o : outs) same = same && o.W->ne1 == outs[0].W->ne1;
    if (!same) {  // one at a time (mixed activation formats, float weights, exact mode)
        for (const LinearOut& o : outs) linear(*o.W, X, n_tokens, o.Y, pool, quant_scratch);
        if (epilogue) epilogue(0, outs[0].W->ne1);
        return;
    }
    const size_t row_bytes = kernels::activation_row_bytes(outs[0].W->type, n);
    quant_scratch.resize(row_bytes * static_cast<size_t>(n_tokens));
    uint8_t* q = quant_scratch.data();
    pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) {
        kernels::quantize_activations(outs[0].W->type, X + t0 * n, t1 - t0, n, q + static_cast<size_t>(t0) * row_bytes);
    });
    if (epilogue) {
        // In step: rows [r0, r1) of every weight on one worker, then the epilogue on them.
        const int64_t d = outs[0].W->ne1;
        pool.parallel_for(d, [&](int64_t r0, int64_t r1, int) {
            for (const LinearOut& o : outs) kernels::matmul_rows(o.W->type, o.W->data, n, q, n_tokens, o.Y, d, r0, r1);
            epilogue(r0, r1);
        }, 16);
        return;
    }
    // The weights' rows end to end, each weight's starting at a multiple of 16 (so workers keep
    // off each other's cache lines of Y, as in linear()).
    std::vector<int64_t> start(outs.size() + 1, 0);
    for (size_t i = 0; i < outs.size(); ++i) start[i + 1] = start[i] + (outs[i].W->ne1 + 15) / 16 * 16;
    pool.parallel_for(start.back(), [&](int64_t r0, int64_t r1, int) {
        for (size_t i = 0; i < outs.size(); ++i) {
            const int64_t d = outs[i].W->ne1;
            const int64_t b = std::max(r0, start[i]) - start[i], e = std::min({r1 - start[i], d});
            if (b < e) kernels::matmul_rows(outs[i].W->type, outs[i].W->data, n, q, n_tokens, outs[i].Y, d, b, e);
        }
    }, 16);
}

void embed_row(const TensorView& W, int64_t row, float* out) {
    kernels::dequantize_row(W.type, W.row(row), out, W.ne0);
}

}  // namespace sl
