// Element type conversions: IEEE half (f16) and bfloat16 (bf16) <-> f32.
// Scalar references live in sl::kernels::ref; the un-namespaced entry points dispatch on
// active_isa(). All functions are pure, thread-safe, and accept any alignment.
// The one-value helpers are `static inline` on purpose: ISA translation units (*_avx2.cpp) include
// this header, and internal linkage keeps their AVX-compiled copies from replacing the scalar ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sl::kernels {

// One value, exact IEEE 754 binary16 semantics (round to nearest even, subnormals, inf, NaN).
static inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or NaN
        return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (absx < 0x38800000u) {  // result is subnormal or zero
        if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the min subnormal
        const uint32_t e = absx >> 23;
        const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;  // 14..24
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = ((absx >> 13) - ((127u - 15u) << 10));
    const uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

static inline float bf16_to_f32(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(x >> 16);
}

namespace ref {
void f16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_f16(uint16_t* out, const float* in, size_t n);
void bf16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_bf16(uint16_t* out, const float* in, size_t n);
}  // namespace ref

// Dispatched bulk conversions: out (n) <- in (n). f32_to_bf16 rounds to nearest even and keeps
// NaNs quiet, as the scalar f32_to_bf16 (the AVX-512 tier runs the AVX2 code).
void f16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_f16(uint16_t* out, const float* in, size_t n);
void bf16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_bf16(uint16_t* out, const float* in, size_t n);

namespace avx2 {
void f16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_f16(uint16_t* out, const float* in, size_t n);
void bf16_to_f32(float* out, const uint16_t* in, size_t n);
void f32_to_bf16(uint16_t* out, const float* in, size_t n);
}  // namespace avx2

namespace avx512 {
void f16_to_f32(float* out, const uint16_t* in, size_t n);
void bf16_to_f32(float* out, const uint16_t* in, size_t n);
}  // namespace avx512

}  // namespace sl::kernels
