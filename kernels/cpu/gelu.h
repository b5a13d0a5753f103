// GELU in its exact (erf) form, as BERT and sentence-transformers models use it:
//   gelu(x) = 0.5 x (1 + erf(x / sqrt 2))
// The fast version evaluates erf with a rational approximation on [-4, 4] (Eigen's
// generic_fast_erf_float: odd degree-13 numerator / even degree-8 denominator; erf is +-1 in f32
// outside), plain arithmetic the compiler vectorises; its absolute error in erf is below 1e-6
// (tst_embed_kernels checks). The reference calls std::erf. Pure, thread-safe, in place.
#pragma once

#include <cstdint>

namespace sl::kernels {

void gelu_erf(float* x, int64_t n);

namespace ref {
void gelu_erf(float* x, int64_t n);
}  // namespace ref

}  // namespace sl::kernels
