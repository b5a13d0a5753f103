// Inline helpers shared by the AVX-512 dot kernels (dot_avx512.cpp, dot_tile_avx512.cpp): block
// loads, nibble unpacking and scale vectors. Include only from files compiled with the AVX-512
// flags (*_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sl::kernels::avx512::helpers {

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

template <typename A>
inline const A* row(const void* act, size_t stride, int t) {
    return reinterpret_cast<const A*>(static_cast<const char*>(act) + static_cast<size_t>(t) * stride);
}

inline __m512i load2x32(const void* a, const void* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(a))),
                              _mm256_loadu_si256(static_cast<const __m256i*>(b)), 1);
}

// s0 in lanes 0..7, s1 in lanes 8..15.
inline __m512 scale2(float s0, float s1) {
    return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

// Two Q4 blocks' 16 nibble bytes each -> 64 bytes 0..15: [b0 lo, b0 hi, b1 lo, b1 hi].
inline __m512i nibbles2(const uint8_t* q0, const uint8_t* q1) {
    const __m512i v = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q1))), 1);
    return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), _mm512_set1_epi8(0x0F));
}

// One Q4 block's 16 nibble bytes -> 32 bytes 0..15: [lo, hi].
inline __m256i nibbles1(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// The 32 high bits of a Q5 block as a mask (bit j: element j).
inline uint32_t q5_bits(const uint8_t* qh) {
    uint32_t h;
    std::memcpy(&h, qh, sizeof h);
    return h;
}
inline __mmask64 q5_bits2(const uint8_t* qh0, const uint8_t* qh1) {
    return static_cast<__mmask64>(q5_bits(qh0)) | (static_cast<__mmask64>(q5_bits(qh1)) << 32);
}

}  // namespace sl::kernels::avx512::helpers
