#include "kernels/cpu/gelu.h"

#include <algorithm>
#include <cmath>

// Without trapping math GCC if-converts the clamp below and vectorises the loop (SSE2 baseline);
// clang vectorises it as is.
#if defined(__GNUC__) && !defined(__clang__)
#define SL_NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#else
#define SL_NO_TRAPPING_MATH
#endif

namespace sl::kernels {

namespace {

SL_NO_TRAPPING_MATH inline float fast_erf(float v) {
    float x = v > 4.0f ? 4.0f : v;  // clamp written as selects, which GCC if-converts
    x = x < -4.0f ? -4.0f : x;
    const float x2 = x * x;
    float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f;
    p = x2 * p + -5.69250639462346e-05f;
    p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f;
    p = x2 * p + -1.60960333262415e-02f;
    p = x * p;
    float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f;
    q = x2 * q + -7.37332916720468e-03f;
    q = x2 * q + -1.42647390514189e-02f;
    return p / q;
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;

}  // namespace

SL_NO_TRAPPING_MATH void gelu_erf(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + fast_erf(x[i] * kInvSqrt2));
}

namespace ref {
void gelu_erf(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}
}  // namespace ref

}  // namespace sl::kernels
