// Small helpers shared by the quantization kernels (scalar reference and ISA variants).
// Everything here is `static inline`: the *_avx2.cpp / *_avx512.cpp translation units include this
// header, and internal linkage keeps their ISA-compiled copies out of the scalar code (ODR).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/tensor_types.h"

namespace sl::kernels {

// Reads an f16 field of a (2-byte aligned) block.
static inline float fp16(uint16_t h) { return f16_to_f32(h); }
// Writes an f16 field (round to nearest even). Named apart from the bulk f32_to_f16 overloads,
// which hide the one-value helper inside the ref/avx2/avx512 namespaces.
static inline uint16_t to_fp16(float f) { return f32_to_f16(f); }

// The 5-bit q (0..31) of element j (0..31) of a Q5_0 / Q5_1 block (qs, qh as in the structs).
static inline int q5_value(const uint8_t* qs, const uint8_t* qh, int j) {
    uint32_t h;
    std::memcpy(&h, qh, sizeof h);
    const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
    return lo | static_cast<int>(((h >> j) & 1u) << 4);
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
static inline void q4k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// All 8 scales and 8 mins of a Q4_K block as two little-endian words of 8 bytes (byte j: sub-block
// j), computed four sub-blocks at a time on 32-bit words (q4k_scale_min's bit layout: the low six
// bits of bytes 0..7 for j < 4, the nibbles of bytes 8..11 with bytes 0..7's top two bits for j >= 4).
static inline void q4k_scale_min_words(const uint8_t* packed, uint64_t* scales8, uint64_t* mins8) {
    uint32_t w0, w1, w2;
    std::memcpy(&w0, packed, 4);
    std::memcpy(&w1, packed + 4, 4);
    std::memcpy(&w2, packed + 8, 4);
    constexpr uint32_t k6 = 0x3f3f3f3fu, k4 = 0x0f0f0f0fu, k2 = 0x03030303u;
    const uint32_t sc_lo = w0 & k6, mn_lo = w1 & k6;
    const uint32_t sc_hi = (w2 & k4) | (((w0 >> 6) & k2) << 4);
    const uint32_t mn_hi = ((w2 >> 4) & k4) | (((w1 >> 6) & k2) << 4);
    *scales8 = static_cast<uint64_t>(sc_lo) | (static_cast<uint64_t>(sc_hi) << 32);
    *mins8 = static_cast<uint64_t>(mn_lo) | (static_cast<uint64_t>(mn_hi) << 32);
}

// All 8 scales and 8 mins of a Q4_K block, unpacked to bytes.
static inline void q4k_unpack_scales(const uint8_t* packed, uint8_t* scales8, uint8_t* mins8) {
    uint64_t sc, mn;
    q4k_scale_min_words(packed, &sc, &mn);
    std::memcpy(scales8, &sc, 8);  // little-endian: byte j is sub-block j
    std::memcpy(mins8, &mn, 8);
}

// The 16 signed scales (sc - 32, in -32..31) of a Q3_K block: low 4 bits from the nibbles of
// packed[0..7] (sub-blocks 0..7 low nibbles, 8..15 high nibbles), high 2 bits from packed[8 + j % 4]
// at bit 2 * (j / 4) -- ggml's kmask1/kmask2 shuffle, byte by byte.
static inline void q3k_unpack_scales(const uint8_t* packed, int8_t* scales16) {
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales16[j] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
}

// The 256 q values of a Q2_K block (0..3) or a Q3_K block (-4..3), in element order.
static inline void q2k_values(const uint8_t* qs, int8_t* q) {
    for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s)
            for (int l = 0; l < 32; ++l) q[128 * h + 32 * s + l] = static_cast<int8_t>((qs[32 * h + l] >> (2 * s)) & 3);
}
static inline void q3k_values(const uint8_t* qs, const uint8_t* hmask, int8_t* q) {
    q2k_values(qs, q);
    for (int e = 0; e < 256; ++e)
        if (!((hmask[e % 32] >> (e / 32)) & 1)) q[e] = static_cast<int8_t>(q[e] - 4);
}

// The 256 q values (0..31) of a Q5_K block, in element order.
static inline void q5k_values(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
    for (int J = 0; J < 4; ++J)
        for (int l = 0; l < 32; ++l) {
            q[64 * J + l] = static_cast<uint8_t>((qs[32 * J + l] & 0xF) | (((qh[l] >> (2 * J)) & 1) << 4));
            q[64 * J + 32 + l] = static_cast<uint8_t>((qs[32 * J + l] >> 4) | (((qh[l] >> (2 * J + 1)) & 1) << 4));
        }
}

// The 6-bit scale of sub-block ib (0..7) of an IQ4_XS block, minus 32.
static inline int iq4xs_scale(const uint8_t* scales_l, uint16_t scales_h, int ib) {
    const int low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    const int high = (scales_h >> (2 * ib)) & 3;
    return (low | (high << 4)) - 32;
}

// ggml's nearest_int: round half to even via the 1.5 * 2^23 trick (valid for |x| < 2^22).
static inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int32_t i;
    std::memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

}  // namespace sl::kernels
