// Inline helpers shared by the AVX-512 dot kernels (dot_avx512.cpp, dot_tile_avx512.cpp,
// dot_kquant_avx512.cpp): block loads, nibble unpacking, scale vectors, signed dots and the
// Q8_0-family block types. Include only from files compiled with the AVX-512 flags (*_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/tensor_types.h"

namespace sl::kernels::avx512::helpers {

// Software prefetch for weights that stream from memory once per token (decode: one activation
// row, so the hardware prefetcher alone leaves every block's first load waiting on a miss; measured
// on the 1B Q4_K model, 2 threads: decode 16 -> 21 tok/s). Asks for the cache lines holding
// [p + ahead, p + ahead + Bytes). Past the row or the tensor a prefetch is a hint only: it cannot
// fault. One token (NT == 1, decode) reads the weights at memory speed and looks kPrefetchDecode
// ahead: 1 KB kept ~12 GB/s of this host's ~24 GB/s (2 threads) in flight, 4 KB gave the 1B Q4_K
// decode +20-28 % (bench_engine, alternating binaries); tiles of several tokens (prefill) reuse the
// weights from L1 and keep the shorter distance, so the prefetches do not evict the tile's rows.
constexpr int kPrefetchAhead = 1024;
constexpr int kPrefetchDecode = 4096;

template <size_t Bytes, int NT = 2>
inline void prefetch_ahead(const void* p) {
    constexpr size_t ahead = NT == 1 ? kPrefetchDecode : kPrefetchAhead;
    for (size_t o = 0; o < Bytes; o += 64) _mm_prefetch(static_cast<const char*>(p) + ahead + o, _MM_HINT_T0);
}

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

// Signed w (|w| <= 127) times signed y, summed in groups of 4 into int32 lanes.
inline __m512i dot_ss(__m512i aw, __mmask64 neg, __m512i y) {
    const __m512i sy = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sy);
}
inline __m256i dot_ss(__m256i w, __m256i y) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(y, w));
}

// Weight blocks that pair with Q8_0 activations.
enum class W0 { Q8_0, Q4_0, Q5_0 };

template <W0 K>
using W0Block = std::conditional_t<K == W0::Q8_0, BlockQ8_0, std::conditional_t<K == W0::Q4_0, BlockQ4_0, BlockQ5_0>>;

}  // namespace sl::kernels::avx512::helpers
