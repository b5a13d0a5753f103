// AVX2 dot kernels (dot.h). Compiled with AVX2/FMA/F16C; called only when active_isa() >= Avx2.
// Same shape as dot_avx512.cpp with 256-bit registers and no VNNI: u8 x s8 products go through
// vpmaddubsw (pairs to int16; no saturation for these value ranges) then vpmaddwd with the
// per-sub-block scales (or ones) to int32.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx2 {

namespace {

// Software prefetch of weights streamed once per token (as dot_avx512_helpers.h's prefetch_ahead:
// the cache lines of [p + ahead, p + ahead + Bytes), 4 KiB ahead for one token (decode), 1 KiB
// for tiles of several; a hint, it cannot fault past the tensor).
template <size_t Bytes, int NT = 2>
inline void prefetch_ahead(const void* p) {
    constexpr size_t ahead = NT == 1 ? 4096 : 1024;
    for (size_t o = 0; o < Bytes; o += 64) _mm_prefetch(static_cast<const char*>(p) + ahead + o, _MM_HINT_T0);
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

template <typename A>
inline const A* row(const void* act, size_t stride, int t) {
    return reinterpret_cast<const A*>(static_cast<const char*>(act) + static_cast<size_t>(t) * stride);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// One Q4 block's 16 nibble bytes -> 32 bytes 0..15: [lo, hi].
inline __m256i nibbles(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
}

// u8 (<= 127 with s8 partner) x s8, summed in groups of 4 into int32 lanes.
inline __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

template <int NT>
inline void finish(const __m256 (&acc)[NT], float* out, size_t os) {
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os] = hsum(acc[t]);
}

// Bits 0..31 of the little-endian uint32 at qh -> 32 bytes, 0xFF where the bit is set
// (ggml's bytes_from_bits_32).
inline __m256i bits_to_bytes(const uint8_t* qh) {
    uint32_t x32;
    std::memcpy(&x32, qh, sizeof x32);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf);
    return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
}

// Weight blocks that pair with Q8_0 activations.
enum class W0 { Q8_0, Q4_0, Q5_0, IQ4_NL };

template <W0 K>
using W0Block = std::conditional_t<
    K == W0::Q8_0, BlockQ8_0,
    std::conditional_t<K == W0::Q4_0, BlockQ4_0, std::conditional_t<K == W0::Q5_0, BlockQ5_0, BlockIQ4_NL>>>;

// The IQ4_NL levels in both 128-bit lanes, for vpshufb lookups of nibbles.
inline __m256i iq4nl_table() {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

template <int NT, W0 K>
void dot_x_q8_0(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = W0Block<K>;
    const WB* x = static_cast<const WB*>(wv);
    const BlockQ8_0* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_0>(act, stride, t);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        prefetch_ahead<sizeof(WB), NT>(x + ib);
        __m256i w;
        if constexpr (K == W0::Q4_0) {
            w = _mm256_sub_epi8(nibbles(x[ib].qs), _mm256_set1_epi8(8));
        } else if constexpr (K == W0::IQ4_NL) {
            w = _mm256_shuffle_epi8(iq4nl_table(), nibbles(x[ib].qs));
        } else if constexpr (K == W0::Q5_0) {
            // q - 16 in one step: nibble | 0xF0 where the high bit is clear (as ggml does).
            const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xF0));
            w = _mm256_or_si256(nibbles(x[ib].qs), _mm256_andnot_si256(bits_to_bytes(x[ib].qh), f0));
        } else {
            w = load32(x[ib].qs);
        }
        const __m256i aw = _mm256_abs_epi8(w);
        const float dx = h2f(x[ib].d);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_us(aw, _mm256_sign_epi8(load32(y[t][ib].qs), w));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)), acc[t]);
        }
    }
    finish<NT>(acc, out, os);
}

template <int NT, bool kQ5>
void dot_x_q8_1(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = std::conditional_t<kQ5, BlockQ5_1, BlockQ4_1>;
    const auto* x = static_cast<const WB*>(wv);
    const BlockQ8_1* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_1>(act, stride, t);
    __m256 acc[NT];
    float summs[NT] = {};
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        prefetch_ahead<sizeof(WB), NT>(x + ib);
        __m256i w = nibbles(x[ib].qs);
        if constexpr (kQ5) w = _mm256_or_si256(w, _mm256_and_si256(bits_to_bytes(x[ib].qh), _mm256_set1_epi8(0x10)));
        const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_us(w, load32(y[t][ib].qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)), acc[t]);
            summs[t] += mx * h2f(y[t][ib].s);
        }
    }
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os] = hsum(acc[t]) + summs[t];
}

// Q4_K, and Q5_K (Q5): the nibbles of chunk k (64 values: 32 low nibbles, then 32 high), Q5_K's
// fifth bit from qh (bit 2k for the low half, 2k + 1 for the high half, shifted down as the chunks
// go); one scale per 32 values, the mins through bsums.
template <int NT, bool Q5>
void dot_q45_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using Block = std::conditional_t<Q5, BlockQ5_K, BlockQ4_K>;
    const auto* x = static_cast<const Block*>(wv);
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        prefetch_ahead<sizeof(x[0]), NT>(x + i);
        alignas(16) uint8_t sc[16], mn[16];
        q4k_unpack_scales(x[i].scales, sc, mn);
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        [[maybe_unused]] __m256i hb = _mm256_setzero_si256();
        if constexpr (Q5) hb = load32(x[i].qh);
        for (int k = 0; k < 4; ++k) {
            const __m256i b = load32(x[i].qs + 32 * k);
            __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
            if constexpr (Q5) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
                hb = _mm256_srli_epi16(hb, 2);
            }
            const __m256i slo = _mm256_set1_epi16(sc[2 * k]), shi = _mm256_set1_epi16(sc[2 * k + 1]);
            for (int t = 0; t < NT; ++t) {
                const int8_t* q8 = y[t][i].qs + 64 * k;
                const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(q8)), slo);
                const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(q8 + 32)), shi);
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(plo, phi));
            }
        }
        const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
        const float dx = h2f(x[i].d), dmx = h2f(x[i].dmin);
        for (int t = 0; t < NT; ++t) {
            const __m256i msum = _mm256_madd_epi16(load32(y[t][i].bsums), mins16);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dx * y[t][i].d), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmx * y[t][i].d), acc[t]);
        }
    }
    finish<NT>(acc, out, os);
}

// IQ4_XS: per sub-block of 32 the levels of its 16 nibble bytes (vpshufb), signed products with q8
// in int16 pairs, then the sub-block's scale (ls - 32) in vpmaddwd.
template <int NT>
void dot_iq4_xs(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    const auto* x = static_cast<const BlockIQ4_XS*>(wv);
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i tbl = iq4nl_table();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        prefetch_ahead<sizeof(x[0]), NT>(x + i);
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const __m256i w = _mm256_shuffle_epi8(tbl, nibbles(x[i].qs + 16 * ib));
            const __m256i aw = _mm256_abs_epi8(w);
            const __m256i sv = _mm256_set1_epi16(static_cast<int16_t>(iq4xs_scale(x[i].scales_l, x[i].scales_h, ib)));
            for (int t = 0; t < NT; ++t) {
                const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load32(y[t][i].qs + 32 * ib), w));
                sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, sv));
            }
        }
        const float dx = h2f(x[i].d);
        for (int t = 0; t < NT; ++t)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dx * y[t][i].d), acc[t]);
    }
    finish<NT>(acc, out, os);
}

// Q2_K and Q3_K: 2-bit fields of qs (bits 2s of byte l for element 128h + 32s + l), one scale per
// 16 elements -- the low 128-bit lane is sub-block 8h + 2s, the high lane the next. Q3_K adds the
// hmask bit (u = q + 4 in 0..7, unsigned for vpmaddubsw; the 4 comes back out through bsums).
template <int NT, bool Q3>
void dot_q23_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using Block = std::conditional_t<Q3, BlockQ3_K, BlockQ2_K>;
    const auto* x = static_cast<const Block*>(wv);
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        prefetch_ahead<sizeof(x[0]), NT>(x + i);
        alignas(16) int8_t sc[16];  // Q3_K: signed scales; Q2_K: the 4-bit scales
        alignas(16) uint8_t mn[16];
        if constexpr (Q3) {
            q3k_unpack_scales(x[i].scales, sc);
        } else {
            for (int g = 0; g < 16; ++g) {
                sc[g] = static_cast<int8_t>(x[i].scales[g] & 0xF);
                mn[g] = static_cast<uint8_t>(x[i].scales[g] >> 4);
            }
        }
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        [[maybe_unused]] __m256i hb = _mm256_setzero_si256();
        if constexpr (Q3) hb = load32(x[i].hmask);
        for (int h = 0; h < 2; ++h) {
            __m256i b = load32(x[i].qs + 32 * h);
            for (int s = 0; s < 4; ++s, b = _mm256_srli_epi16(b, 2)) {
                __m256i q = _mm256_and_si256(b, m3);
                if constexpr (Q3) {
                    q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(hb, one), 2));
                    hb = _mm256_srli_epi16(hb, 1);
                }
                const int g = 8 * h + 2 * s;
                const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
                for (int t = 0; t < NT; ++t) {
                    const __m256i p = _mm256_maddubs_epi16(q, load32(y[t][i].qs + 128 * h + 32 * s));
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, sv));
                }
            }
        }
        const float dx = h2f(x[i].d);
        if constexpr (Q3) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sc)));
            for (int t = 0; t < NT; ++t) {
                const __m256i corr = _mm256_madd_epi16(load32(y[t][i].bsums), sc16);
                const __m256i s = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(corr, 2));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx * y[t][i].d), acc[t]);
            }
        } else {
            const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(mn)));
            const float dmx = h2f(x[i].dmin);
            for (int t = 0; t < NT; ++t) {
                const __m256i msum = _mm256_madd_epi16(load32(y[t][i].bsums), mins16);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), _mm256_set1_ps(dx * y[t][i].d), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmx * y[t][i].d), acc[t]);
            }
        }
    }
    finish<NT>(acc, out, os);
}

template <int NT>
void dot_q6_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    const auto* x = static_cast<const BlockQ6_K*>(wv);
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        prefetch_ahead<sizeof(x[0]), NT>(x + i);
        const int8_t* sc = x[i].scales;
        __m256i sumi[NT];
        for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = load32(x[i].ql + 64 * h), ql1 = load32(x[i].ql + 64 * h + 32);
            const __m256i qh = load32(x[i].qh + 32 * h);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
            };
            for (int c = 0; c < 4; ++c) {
                const int g = 8 * h + 2 * c;  // sub-blocks of 16: g (low lane), g + 1 (high lane)
                const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
                for (int t = 0; t < NT; ++t) {
                    const __m256i p = _mm256_maddubs_epi16(q[c], load32(y[t][i].qs + 128 * h + 32 * c));
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, sv));
                }
            }
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const float dx = h2f(x[i].d);
        for (int t = 0; t < NT; ++t) {
            const __m256i corr = _mm256_madd_epi16(load32(y[t][i].bsums), sc16);
            const __m256i s = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(corr, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx * y[t][i].d), acc[t]);
        }
    }
    finish<NT>(acc, out, os);
}

enum class FloatKind { F32, F16, BF16 };

template <FloatKind K>
inline __m256 load_w(const void* w, int64_t i) {
    if constexpr (K == FloatKind::F32) {
        return _mm256_loadu_ps(static_cast<const float*>(w) + i);
    } else {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i));
        if constexpr (K == FloatKind::F16) return _mm256_cvtph_ps(h);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
}

template <FloatKind K>
inline float load_w1(const void* w, int64_t i) {
    if constexpr (K == FloatKind::F32) return static_cast<const float*>(w)[i];
    if constexpr (K == FloatKind::F16) return kernels::f16_to_f32(static_cast<const uint16_t*>(w)[i]);
    return kernels::bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
}

template <int NT, FloatKind K>
void dot_float(int64_t n, const void* w, const void* act, size_t stride, float* out, size_t os) {
    const float* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<float>(act, stride, t);
    constexpr int kU = NT == 1 ? 4 : 2;
    __m256 acc[kU][NT];
    for (int u = 0; u < kU; ++u)
        for (int t = 0; t < NT; ++t) acc[u][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * kU <= n; i += 8 * kU) {
        for (int u = 0; u < kU; ++u) {
            const __m256 wv = load_w<K>(w, i + 8 * u);
            for (int t = 0; t < NT; ++t) acc[u][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y[t] + i + 8 * u), acc[u][t]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = load_w<K>(w, i);
        for (int t = 0; t < NT; ++t) acc[0][t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(y[t] + i), acc[0][t]);
    }
    for (int t = 0; t < NT; ++t) {
        __m256 s = acc[0][t];
        for (int u = 1; u < kU; ++u) s = _mm256_add_ps(s, acc[u][t]);
        float r = hsum(s);
        for (int64_t j = i; j < n; ++j) r += load_w1<K>(w, j) * y[t][j];
        out[static_cast<size_t>(t) * os] = r;
    }
}

template <template <int> class K>
void by_nt(int64_t n, const void* w, const void* act, size_t stride, int nt, float* out, size_t os) {
    switch (nt) {
        case 1: return K<1>::run(n, w, act, stride, out, os);
        case 2: return K<2>::run(n, w, act, stride, out, os);
        case 3: return K<3>::run(n, w, act, stride, out, os);
        default: return K<4>::run(n, w, act, stride, out, os);
    }
}

template <int NT> struct KQ4_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q4_0>; };
template <int NT> struct KQ5_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q5_0>; };
template <int NT> struct KQ8_0 { static constexpr auto run = dot_x_q8_0<NT, W0::Q8_0>; };
template <int NT> struct KQ4_1 { static constexpr auto run = dot_x_q8_1<NT, false>; };
template <int NT> struct KQ5_1 { static constexpr auto run = dot_x_q8_1<NT, true>; };
template <int NT> struct KQ4_K { static constexpr auto run = dot_q45_K<NT, false>; };
template <int NT> struct KQ6_K { static constexpr auto run = dot_q6_K<NT>; };
template <int NT> struct KQ5_K { static constexpr auto run = dot_q45_K<NT, true>; };
template <int NT> struct KQ2_K { static constexpr auto run = dot_q23_K<NT, false>; };
template <int NT> struct KQ3_K { static constexpr auto run = dot_q23_K<NT, true>; };
template <int NT> struct KIQ4_NL { static constexpr auto run = dot_x_q8_0<NT, W0::IQ4_NL>; };
template <int NT> struct KIQ4_XS { static constexpr auto run = dot_iq4_xs<NT>; };
template <int NT> struct KF32 { static constexpr auto run = dot_float<NT, FloatKind::F32>; };
template <int NT> struct KF16 { static constexpr auto run = dot_float<NT, FloatKind::F16>; };
template <int NT> struct KBF16 { static constexpr auto run = dot_float<NT, FloatKind::BF16>; };

}  // namespace

VecDotFn vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_0: return by_nt<KQ4_0>;
        case TensorType::Q8_0: return by_nt<KQ8_0>;
        case TensorType::Q4_1: return by_nt<KQ4_1>;
        case TensorType::Q5_0: return by_nt<KQ5_0>;
        case TensorType::Q5_1: return by_nt<KQ5_1>;
        case TensorType::Q4_K: return by_nt<KQ4_K>;
        case TensorType::Q6_K: return by_nt<KQ6_K>;
        case TensorType::Q2_K: return by_nt<KQ2_K>;
        case TensorType::Q3_K: return by_nt<KQ3_K>;
        case TensorType::Q5_K: return by_nt<KQ5_K>;
        case TensorType::IQ4_NL: return by_nt<KIQ4_NL>;
        case TensorType::IQ4_XS: return by_nt<KIQ4_XS>;
        case TensorType::F32: return by_nt<KF32>;
        case TensorType::F16: return by_nt<KF16>;
        case TensorType::BF16: return by_nt<KBF16>;
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx2
