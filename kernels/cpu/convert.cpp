#include "kernels/cpu/convert.h"

#include "kernels/cpu/cpu_features.h"

namespace sl::kernels {

namespace ref {

void f16_to_f32(float* out, const uint16_t* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = kernels::f16_to_f32(in[i]);
}

void f32_to_f16(uint16_t* out, const float* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = kernels::f32_to_f16(in[i]);
}

void bf16_to_f32(float* out, const uint16_t* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = kernels::bf16_to_f32(in[i]);
}

void f32_to_bf16(uint16_t* out, const float* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = kernels::f32_to_bf16(in[i]);
}

}  // namespace ref

void f16_to_f32(float* out, const uint16_t* in, size_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::f16_to_f32(out, in, n);
        case Isa::Avx2: return avx2::f16_to_f32(out, in, n);
        case Isa::Scalar: break;
    }
    ref::f16_to_f32(out, in, n);
}

void f32_to_f16(uint16_t* out, const float* in, size_t n) {
    if (active_isa() != Isa::Scalar) return avx2::f32_to_f16(out, in, n);
    ref::f32_to_f16(out, in, n);
}

void bf16_to_f32(float* out, const uint16_t* in, size_t n) {
    switch (active_isa()) {
        case Isa::Avx512: return avx512::bf16_to_f32(out, in, n);
        case Isa::Avx2: return avx2::bf16_to_f32(out, in, n);
        case Isa::Scalar: break;
    }
    ref::bf16_to_f32(out, in, n);
}

void f32_to_bf16(uint16_t* out, const float* in, size_t n) {
    if (active_isa() != Isa::Scalar) return avx2::f32_to_bf16(out, in, n);
    ref::f32_to_bf16(out, in, n);
}

}  // namespace sl::kernels
