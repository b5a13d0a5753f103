#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"

namespace sl::kernels {

void rms_norm(float* out, const float* x, const float* w, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    if (w) {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
    }
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, float base, float freq_scale,
          RopeStyle style, const float* freq_factors) {
    const int half = rot_dim / 2;
    for (int i = 0; i < half; ++i) {
        double inv_freq = std::pow(static_cast<double>(base), -2.0 * i / rot_dim);
        if (freq_factors) inv_freq /= static_cast<double>(freq_factors[i]);
        const double theta = static_cast<double>(pos) * freq_scale * inv_freq;
        const float c = static_cast<float>(std::cos(theta));
        const float s = static_cast<float>(std::sin(theta));
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + static_cast<int64_t>(h) * head_dim;
            const int a = style == RopeStyle::Norm ? 2 * i : i;
            const int b = style == RopeStyle::Norm ? 2 * i + 1 : i + half;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

float softmax(float* x, int64_t n) {
    const float mx = n > 0 ? max_f32(x, n) : -INFINITY;
    const double sum = exp_shifted_sum(x, n, mx);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
    return mx;
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g))) * up[i];
    }
}

void swiglu_oai_mul(float* out, const float* gate, const float* up, int64_t n, float alpha, float limit) {
    for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit);
        const float u = std::clamp(up[i], -limit, limit);
        out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
    }
}

void add(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

namespace ref {

void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d, float scale) {
    for (int64_t j = 0; j < n; ++j) out[j] = ref::dot_f32(q, k + j * k_stride, d) * scale;
}

void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d) {
    for (int64_t j = 0; j < n; ++j) ref::axpy_f32(out, p[j], v + j * v_stride, d);
}

float exp_shifted_sum(float* x, int64_t n, float shift) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i] = std::exp(x[i] - shift);
    return static_cast<float>(sum);
}

float max_f32(const float* x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

float dot_f32(const float* a, const float* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(s);
}

void axpy_f32(float* y, float a, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace ref

void dot_rows_f32(float* out, const float* q, const float* k, int64_t k_stride, int64_t n, int64_t d, float scale) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::dot_rows_f32(out, q, k, k_stride, n, d, scale);
        case Isa::Avx2: return avx2::dot_rows_f32(out, q, k, k_stride, n, d, scale);
        case Isa::Scalar: break;
    }
    ref::dot_rows_f32(out, q, k, k_stride, n, d, scale);
}

void accumulate_rows_f32(float* out, const float* p, const float* v, int64_t v_stride, int64_t n, int64_t d) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::accumulate_rows_f32(out, p, v, v_stride, n, d);
        case Isa::Avx2: return avx2::accumulate_rows_f32(out, p, v, v_stride, n, d);
        case Isa::Scalar: break;
    }
    ref::accumulate_rows_f32(out, p, v, v_stride, n, d);
}

float exp_shifted_sum(float* x, int64_t n, float shift) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::exp_shifted_sum(x, n, shift);
        case Isa::Avx2: return avx2::exp_shifted_sum(x, n, shift);
        case Isa::Scalar: break;
    }
    return ref::exp_shifted_sum(x, n, shift);
}

float max_f32(const float* x, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::max_f32(x, n);
        case Isa::Avx2: return avx2::max_f32(x, n);
        case Isa::Scalar: break;
    }
    return ref::max_f32(x, n);
}

float dot_f32(const float* a, const float* b, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::dot_f32(a, b, n);
        case Isa::Avx2: return avx2::dot_f32(a, b, n);
        case Isa::Scalar: break;
    }
    return ref::dot_f32(a, b, n);
}

void axpy_f32(float* y, float a, const float* x, int64_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::axpy_f32(y, a, x, n);
        case Isa::Avx2: return avx2::axpy_f32(y, a, x, n);
        case Isa::Scalar: break;
    }
    ref::axpy_f32(y, a, x, n);
}

DotF32Fn dot_f32_fn() {
    switch (active_isa()) {
        case Isa::Avx512: return &avx512::dot_f32;
        case Isa::Avx2: return &avx2::dot_f32;
        case Isa::Scalar: break;
    }
    return &ref::dot_f32;
}

AxpyF32Fn axpy_f32_fn() {
    switch (active_isa()) {
        case Isa::Avx512: return &avx512::axpy_f32;
        case Isa::Avx2: return &avx2::axpy_f32;
        case Isa::Scalar: break;
    }
    return &ref::axpy_f32;
}

}  // namespace sl::kernels
