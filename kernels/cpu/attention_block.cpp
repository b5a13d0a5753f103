#include "kernels/cpu/attention_block.h"

#include <algorithm>

#include "kernels/cpu/cpu_features.h"

namespace sl::kernels {

namespace ref {

void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d) {
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* qr = q + r * q_stride;
        float s = 0.0f;
        for (int i = 0; i < d; ++i) s += std::max(qr[i] * kmin[i], qr[i] * kmax[i]);
        out[r] = s;
    }
}

float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d) {
    float best = 0.0f;
    for (int64_t j = 0; j < n_keys; ++j) {
        const float* kj = k + j * k_stride;
        float s = 0.0f;
        for (int i = 0; i < d; ++i) s += q[i] * kj[i];
        best = j == 0 ? s : std::max(best, s);
    }
    return best;
}

}  // namespace ref

void quest_bounds(float* out, const float* q, int64_t n_rows, int64_t q_stride, const float* kmin,
                  const float* kmax, int d) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::quest_bounds(out, q, n_rows, q_stride, kmin, kmax, d);
        case Isa::Avx2: return avx2::quest_bounds(out, q, n_rows, q_stride, kmin, kmax, d);
        case Isa::Scalar: break;
    }
    ref::quest_bounds(out, q, n_rows, q_stride, kmin, kmax, d);
}

float max_dot(const float* q, const float* k, int64_t k_stride, int64_t n_keys, int d) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::max_dot(q, k, k_stride, n_keys, d);
        case Isa::Avx2: return avx2::max_dot(q, k, k_stride, n_keys, d);
        case Isa::Scalar: break;
    }
    return ref::max_dot(q, k, k_stride, n_keys, d);
}

}  // namespace sl::kernels
