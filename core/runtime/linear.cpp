#include "core/runtime/linear.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/runtime/thread_pool.h"
#include "kernels/cpu/dequantize.h"
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

void embed_row(const TensorView& W, int64_t row, float* out) {
    kernels::dequantize_row(W.type, W.row(row), out, W.ne0);
}

}  // namespace sl
