// AVX-512 (F, BW, VL, DQ, VNNI) dot kernels (dot.h). Compiled with AVX-512 flags; called only
// when active_isa() == Isa::Avx512.
//
// Shape of every kernel: for each weight block, decode it once into registers (nibbles -> bytes,
// 6-bit scales -> int16 lanes), then for each of the NT activation rows do the integer dot with
// VNNI (vpdpbusd: u8 x s8 -> s32, or vpmaddubsw + vpdpwssd when per-sub-block scales apply) and
// fold the block scale in with one FMA into a per-row float accumulator. Signed x signed products
// use |w| x sign(y, w). Horizontal sums happen once per row, at the end.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_avx512_helpers.h"
#include "kernels/cpu/quant_common.h"

namespace sl::kernels::avx512 {

namespace {

using namespace helpers;

template <int NT>
inline void finish(const __m512 (&acc)[NT], float* out, size_t out_stride) {
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// ---- Q8_0, Q4_0 and Q5_0 weights, Q8_0 activations --------------------------------------------
template <int NT, W0 K>
void dot_x_q8_0(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = W0Block<K>;
    const WB* x = static_cast<const WB*>(wv);
    const int64_t nb = n / 32;
    const BlockQ8_0* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_0>(act, stride, t);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        prefetch_ahead<2 * sizeof(WB), NT>(x + ib);
        __m512i w;
        if constexpr (K == W0::Q4_0) {
            w = _mm512_sub_epi8(nibbles2(x[ib].qs, x[ib + 1].qs), _mm512_set1_epi8(8));
        } else if constexpr (K == W0::Q5_0) {
            // q - 16 = nibble where the high bit is set, nibble - 16 where it is clear.
            const __m512i nib = nibbles2(x[ib].qs, x[ib + 1].qs);
            w = _mm512_mask_sub_epi8(nib, ~q5_bits2(x[ib].qh, x[ib + 1].qh), nib, _mm512_set1_epi8(16));
        } else {
            w = load2x32(x[ib].qs, x[ib + 1].qs);
        }
        const __m512i aw = _mm512_abs_epi8(w);
        const __mmask64 neg = _mm512_movepi8_mask(w);
        const float dx0 = h2f(x[ib].d), dx1 = h2f(x[ib + 1].d);
        for (int t = 0; t < NT; ++t) {
            const __m512i p = dot_ss(aw, neg, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale2(dx0 * h2f(y[t][ib].d), dx1 * h2f(y[t][ib + 1].d)),
                                     acc[t]);
        }
    }
    if (ib < nb) {
        __m256i w;
        if constexpr (K == W0::Q4_0) {
            w = _mm256_sub_epi8(nibbles1(x[ib].qs), _mm256_set1_epi8(8));
        } else if constexpr (K == W0::Q5_0) {
            const __m256i nib = nibbles1(x[ib].qs);
            w = _mm256_mask_sub_epi8(nib, static_cast<__mmask32>(~q5_bits(x[ib].qh)), nib, _mm256_set1_epi8(16));
        } else {
            w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[ib].qs));
        }
        const float dx = h2f(x[ib].d);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_ss(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
            const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)));
            acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
        }
    }
    finish<NT>(acc, out, os);
}

// ---- Q4_1 and Q5_1 weights, Q8_1 activations: d_x d_y sum(q y) + m_x s_y ---------------------
template <int NT, bool kQ5>
void dot_x_q8_1(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    using WB = std::conditional_t<kQ5, BlockQ5_1, BlockQ4_1>;
    const auto* x = static_cast<const WB*>(wv);
    const int64_t nb = n / 32;
    const BlockQ8_1* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_1>(act, stride, t);
    __m512 acc[NT];
    float summs[NT] = {};
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        prefetch_ahead<2 * sizeof(WB), NT>(x + ib);
        __m512i w = nibbles2(x[ib].qs, x[ib + 1].qs);
        if constexpr (kQ5) w = _mm512_mask_add_epi8(w, q5_bits2(x[ib].qh, x[ib + 1].qh), w, _mm512_set1_epi8(16));
        const float dx0 = h2f(x[ib].d), dx1 = h2f(x[ib + 1].d);
        const float mx0 = h2f(x[ib].m), mx1 = h2f(x[ib + 1].m);
        for (int t = 0; t < NT; ++t) {
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, load2x32(y[t][ib].qs, y[t][ib + 1].qs));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale2(dx0 * h2f(y[t][ib].d), dx1 * h2f(y[t][ib + 1].d)),
                                     acc[t]);
            // Fused, block after block (as the tile kernel's lanes: dot_tile_avx512.cpp).
            summs[t] = std::fma(mx0, h2f(y[t][ib].s), summs[t]);
            summs[t] = std::fma(mx1, h2f(y[t][ib + 1].s), summs[t]);
        }
    }
    if (ib < nb) {
        __m256i w = nibbles1(x[ib].qs);
        if constexpr (kQ5) {
            w = _mm256_mask_add_epi8(w, static_cast<__mmask32>(q5_bits(x[ib].qh)), w, _mm256_set1_epi8(16));
        }
        const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
        for (int t = 0; t < NT; ++t) {
            const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w,
                                                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][ib].qs)));
            const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dx * h2f(y[t][ib].d)));
            acc[t] = _mm512_add_ps(acc[t], _mm512_zextps256_ps512(s));
            summs[t] = std::fma(mx, h2f(y[t][ib].s), summs[t]);
        }
    }
    for (int t = 0; t < NT; ++t) out[static_cast<size_t>(t) * os] = _mm512_reduce_add_ps(acc[t]) + summs[t];
}

// ---- Q4_K weights, Q8_K activations ------------------------------------------------------------
// sum = d d_y sum_j sc_j (q_j . y_j) - dmin sum_j m_j (d_y bsum8_j), j the 8 sub-blocks of 32.
//
// Scaled products: per token and chunk k (sub-blocks 2k, 2k+1: 64 nibbles x 64 activations) one
// vpdpbusd sums the u8 x s8 products in fours (int32 lanes 0..7: sub-block 2k, 8..15: 2k+1;
// |sum| <= 4 * 15 * 128, so int16 holds it exactly); two chunks pack to int16 (vpackssdw) and one
// vpdpwssd applies their four 6-bit scales: 4 vpdpbusd + 2 vpdpwssd per token and block where
// vpmaddubsw + vpdpwssd took 8 multiplies.
//
// Mins: in float, as (dmin m_j) x (d_y bsum8_j), bsum8_j = bsums[2j] + bsums[2j+1]; the
// activation side is a product per token, block and sub-block that a tile (32 rows) computes once
// (Q4KMins), where the int16 dot per token and block it replaces cost a quarter of the kernel's
// time. Lanes 8t'..8t'+7 of a token pair's vector hold token 2p+t''s eight terms; the row kernel
// (VecDotFn, no tile) computes the same products inline, so the two paths agree bit for bit.
// Bench (one core, 256 rows x 2048, 8 tokens): 62 -> 74 GMAC/s.

// The activation side of the mins for one token and block: d_y * bsum8_j, j = 0..7.
inline __m256 q4k_act_mins(const BlockQ8_K& yb) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.bsums));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(b, _mm256_set1_epi16(1))), _mm256_set1_ps(yb.d));
}

// Tokens 2p and 2p+1 (zeros for a missing second) of block i: lanes 0..7 and 8..15.
inline __m512 q4k_act_mins2(const BlockQ8_K* y0, const BlockQ8_K* y1) {
    const __m256 lo = q4k_act_mins(*y0);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), y1 ? q4k_act_mins(*y1) : _mm256_setzero_ps(), 1);
}

// Per tile: the mins' activation side of every token pair and block, (pairs, nb, 16) floats.
struct Q4KMins {
    std::vector<float> v;
};

Q4KMins& q4k_mins_scratch() {
    thread_local Q4KMins s;
    return s;
}

template <int NT>
void q4k_prepare_mins(const void* act, size_t stride, int64_t nb, Q4KMins& m) {
    constexpr int NP = (NT + 1) / 2;
    m.v.resize(static_cast<size_t>(NP * nb * 16));
    for (int p = 0; p < NP; ++p) {
        const BlockQ8_K* y0 = row<BlockQ8_K>(act, stride, 2 * p);
        const BlockQ8_K* y1 = 2 * p + 1 < NT ? row<BlockQ8_K>(act, stride, 2 * p + 1) : nullptr;
        for (int64_t i = 0; i < nb; ++i)
            _mm512_storeu_ps(m.v.data() + (p * nb + i) * 16, q4k_act_mins2(y0 + i, y1 ? y1 + i : nullptr));
    }
}

// One weight row x NT tokens; am: q4k_prepare_mins's (pairs, nb, 16) for these tokens, or null
// (computed inline). Blocks [i0, i1) only (i1 < 0: to the end), continuing from and, unless i1
// is the end, leaving the accumulators in `state` (NT + pairs vectors of 16 floats): the row's sums in pieces,
// each lane's fused multiply-adds in the same order as in one pass, so the result is the same.
template <int NT>
void dot_q4_K_rows(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os,
                   const float* am, int64_t i0 = 0, int64_t i1 = -1, float* state = nullptr) {
    const auto* x = static_cast<const BlockQ4_K*>(wv);
    const int64_t nb = n / kQK_K;
    constexpr int NP = (NT + 1) / 2;
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m512 acc[NT];
    __m512 accm[NP];  // pair p: token 2p's mins in lanes 0..7, token 2p + 1's in 8..15
    for (int t = 0; t < NT; ++t) acc[t] = i0 > 0 ? _mm512_loadu_ps(state + 16 * t) : _mm512_setzero_ps();
    for (int p = 0; p < NP; ++p) accm[p] = i0 > 0 ? _mm512_loadu_ps(state + 16 * (NT + p)) : _mm512_setzero_ps();
    if (i1 < 0) i1 = nb;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    // vpackssdw(a, b) puts, in 128-bit lane L, a's int32 lanes 4L..4L+3 then b's as int16; a's
    // lanes belong to sub-block 2k + (L >= 2), b's to 2k + 2 + (L >= 2). Int16 lane j of
    // permutation h (chunks 2h, 2h+1) therefore picks scale 4h + 2 ((j % 8) >= 4) + (j >= 16).
    __m512i idx[2];
    for (int h = 0; h < 2; ++h) {
        alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; ++j) ix[j] = static_cast<int16_t>(4 * h + 2 * ((j % 8) >= 4) + (j >= 16));
        idx[h] = _mm512_load_si512(ix);
    }
    for (int64_t i = i0; i < i1; ++i) {
        prefetch_ahead<sizeof(BlockQ4_K), NT>(x + i);
        uint64_t sc, mn;
        q4k_scale_min_words(x[i].scales, &sc, &mn);
        const __m512i sc512 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
        const __m512i sv0 = _mm512_permutexvar_epi16(idx[0], sc512), sv1 = _mm512_permutexvar_epi16(idx[1], sc512);
        __m512i q[4];
        for (int k = 0; k < 4; ++k) {
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * k));
            q[k] = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1), m4);
        }
        const float dx = h2f(x[i].d), dmx = h2f(x[i].dmin);
        // dmin m_j, j = 0..7, in both halves.
        const __m256 wm8 = _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mn)))), _mm256_set1_ps(dmx));
        const __m512 wm = _mm512_insertf32x8(_mm512_castps256_ps512(wm8), wm8, 1);
        for (int t = 0; t < NT; ++t) {
            const BlockQ8_K& yb = y[t][i];
            __m512i d[4];
            for (int k = 0; k < 4; ++k)
                d[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], _mm512_loadu_si512(yb.qs + 64 * k));
            const __m512i sumi = _mm512_dpwssd_epi32(
                _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]), sv0),
                _mm512_packs_epi32(d[2], d[3]), sv1);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(dx * yb.d), acc[t]);
        }
        for (int p = 0; p < NP; ++p) {
            const __m512 a = am ? _mm512_loadu_ps(am + (p * nb + i) * 16)
                                : q4k_act_mins2(y[2 * p] + i, 2 * p + 1 < NT ? y[2 * p + 1] + i : nullptr);
            accm[p] = _mm512_fmadd_ps(wm, a, accm[p]);
        }
    }
    if (i1 < nb) {
        for (int t = 0; t < NT; ++t) _mm512_storeu_ps(state + 16 * t, acc[t]);
        for (int p = 0; p < NP; ++p) _mm512_storeu_ps(state + 16 * (NT + p), accm[p]);
        return;
    }
    for (int t = 0; t < NT; ++t) {
        const __m512 m = accm[t / 2];
        const __m256 half = t % 2 ? _mm512_extractf32x8_ps(m, 1) : _mm512_castps512_ps256(m);
        acc[t] = _mm512_sub_ps(acc[t], _mm512_zextps256_ps512(half));
    }
    finish<NT>(acc, out, os);
}

template <int NT>
void dot_q4_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    dot_q4_K_rows<NT>(n, wv, act, stride, out, os, nullptr);
}

// DotTileFn body: the mins' activation side once, then every row. Rows longer than kQ4KChunk
// blocks go in pieces of that many blocks, every row's piece before the next piece: NT tokens'
// activations for a piece (8 tokens x 8 blocks: 18 KB) stay in L1 while the rows pass over them,
// where a whole ffn_down row's (8192 wide: 75 KB) came from L2 for each row (one core, 8192 x
// 256 rows, 64 tokens: 57 -> 70 GMAC/s; 2048-wide rows: 72).
// Activations up to kQ4KWholeRowBytes stay in L1 anyway: rows go whole (one token, decode: in
// pieces the rows' weights no longer stream in order, -8 % decode on the 1B model).
constexpr int64_t kQ4KChunk = 8;
constexpr int64_t kQ4KWholeRowBytes = 24 * 1024;

template <int NT>
void tile_q4_K(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    const int64_t nb = n / kQK_K;
    Q4KMins& m = q4k_mins_scratch();
    q4k_prepare_mins<NT>(act, stride, nb, m);
    auto row_w = [&](int r) { return static_cast<const char*>(w) + static_cast<size_t>(r) * wbytes; };
    if (nb <= kQ4KChunk || NT * nb * static_cast<int64_t>(sizeof(BlockQ8_K)) <= kQ4KWholeRowBytes) {
        for (int r = 0; r < rows; ++r) dot_q4_K_rows<NT>(n, row_w(r), act, stride, out + r, os, m.v.data());
        return;
    }
    constexpr int kState = 16 * (NT + (NT + 1) / 2);
    thread_local std::vector<float> state;
    state.resize(static_cast<size_t>(rows * kState));
    for (int64_t i0 = 0; i0 < nb; i0 += kQ4KChunk) {
        const int64_t i1 = std::min(nb, i0 + kQ4KChunk);
        for (int r = 0; r < rows; ++r)
            dot_q4_K_rows<NT>(n, row_w(r), act, stride, out + r, os, m.v.data(), i0, i1,
                              state.data() + static_cast<size_t>(r) * kState);
    }
}

// ---- Q6_K weights, Q8_K activations: sum sc_g (sum q y - 32 bsum_g) ---------------------------
template <int NT>
void dot_q6_K(int64_t n, const void* wv, const void* act, size_t stride, float* out, size_t os) {
    const auto* x = static_cast<const BlockQ6_K*>(wv);
    const int64_t nb = n / kQK_K;
    const BlockQ8_K* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<BlockQ8_K>(act, stride, t);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    // Lane j of permutation k picks scale 4k + j / 8 (16 values = 8 int16 pair lanes per scale).
    __m512i idx[4];
    for (int k = 0; k < 4; ++k) {
        alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; ++j) ix[j] = static_cast<int16_t>(4 * k + j / 8);
        idx[k] = _mm512_load_si512(ix);
    }
    for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead<sizeof(BlockQ6_K), NT>(x + i);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
        const __m512i sc512 = _mm512_zextsi256_si512(sc16);
        __m512i q[4], sv[4];
        for (int h = 0; h < 2; ++h) {
            const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * h);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
            const __m512i qh2 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh2, m30));
        }
        for (int k = 0; k < 4; ++k) sv[k] = _mm512_permutexvar_epi16(idx[k], sc512);
        const float dx = h2f(x[i].d);
        for (int t = 0; t < NT; ++t) {
            const BlockQ8_K& yb = y[t][i];
            __m512i sumi = _mm512_setzero_si512();
            for (int k = 0; k < 4; ++k) {
                const __m512i p16 = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(yb.qs + 64 * k));
                sumi = _mm512_dpwssd_epi32(sumi, p16, sv[k]);
            }
            const __m256i corr = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.bsums)), sc16);
            sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(dx * yb.d), acc[t]);
        }
    }
    finish<NT>(acc, out, os);
}

// ---- F32 / F16 / BF16 weights, F32 activations ---------------------------------------------------
enum class FloatKind { F32, F16, BF16 };

template <FloatKind K>
inline __m512 load_w(const void* w, int64_t i, __mmask16 m) {
    if constexpr (K == FloatKind::F32) {
        return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
    } else if constexpr (K == FloatKind::F16) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i));
    } else {
        const __m256i b = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
    }
}

template <int NT, FloatKind K>
void dot_float(int64_t n, const void* w, const void* act, size_t stride, float* out, size_t os) {
    const float* y[NT];
    for (int t = 0; t < NT; ++t) y[t] = row<float>(act, stride, t);
    constexpr int kU = NT == 1 ? 4 : 2;  // independent FMA chains per row
    __m512 acc[kU][NT];
    for (int u = 0; u < kU; ++u)
        for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 * kU <= n; i += 16 * kU) {
        for (int u = 0; u < kU; ++u) {
            const __m512 wv = load_w<K>(w, i + 16 * u, 0xFFFF);
            for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(y[t] + i + 16 * u), acc[u][t]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 wv = load_w<K>(w, i, m);
        for (int t = 0; t < NT; ++t) acc[0][t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, y[t] + i), acc[0][t]);
    }
    for (int t = 0; t < NT; ++t) {
        __m512 s = acc[0][t];
        for (int u = 1; u < kU; ++u) s = _mm512_add_ps(s, acc[u][t]);
        out[static_cast<size_t>(t) * os] = _mm512_reduce_add_ps(s);
    }
}

// Dispatches nt (1..4) to the unrolled template.
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
template <int NT> struct KQ4_K {
    static constexpr auto run = dot_q4_K<NT>;
    static constexpr auto tile = tile_q4_K<NT>;
};
template <int NT> struct KQ6_K { static constexpr auto run = dot_q6_K<NT>; };
template <int NT> struct KF32 { static constexpr auto run = dot_float<NT, FloatKind::F32>; };
template <int NT> struct KF16 { static constexpr auto run = dot_float<NT, FloatKind::F16>; };
template <int NT> struct KBF16 { static constexpr auto run = dot_float<NT, FloatKind::BF16>; };

}  // namespace

namespace {

// `rows` weight rows x NT tokens with a row kernel K<NT>.
template <template <int> class K, int NT>
void rows_of(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out, size_t os) {
    for (int r = 0; r < rows; ++r)
        K<NT>::run(n, static_cast<const char*>(w) + static_cast<size_t>(r) * wbytes, act, stride, out + r, os);
}

// A DotTileFn over up to kMaxTileTokens (8) tokens per pass, for the K-quants: their activations
// (Q8_K) carry float scales, so there is nothing to convert once per tile; what sharing pays for is
// the weight block's decode (nibbles or 6-bit values, scales, permutations), now spread over twice
// as many tokens as VecDotFn's 4 (1B Q4_K prefill, 2 threads: 69 -> 80-88 tok/s).
// Q4_K's tile (tile_q4_K) as rows_of's signature.
template <template <int> class K, int NT>
void rows_tile(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, float* out,
               size_t os) {
    K<NT>::tile(n, w, wbytes, rows, act, stride, out, os);
}

template <template <int> class K, int NT>
constexpr auto rows_fn() {
    if constexpr (requires { K<NT>::tile; }) return rows_tile<K, NT>;
    else return rows_of<K, NT>;
}

template <template <int> class K>
void rows_by_nt(int64_t n, const void* w, size_t wbytes, int rows, const void* act, size_t stride, int nt, float* out,
                size_t os) {
    static_assert(kMaxTileTokens == 8);
    switch (nt) {
        case 1: return rows_fn<K, 1>()(n, w, wbytes, rows, act, stride, out, os);
        case 2: return rows_fn<K, 2>()(n, w, wbytes, rows, act, stride, out, os);
        case 3: return rows_fn<K, 3>()(n, w, wbytes, rows, act, stride, out, os);
        case 4: return rows_fn<K, 4>()(n, w, wbytes, rows, act, stride, out, os);
        case 5: return rows_fn<K, 5>()(n, w, wbytes, rows, act, stride, out, os);
        case 6: return rows_fn<K, 6>()(n, w, wbytes, rows, act, stride, out, os);
        case 7: return rows_fn<K, 7>()(n, w, wbytes, rows, act, stride, out, os);
        default: return rows_fn<K, 8>()(n, w, wbytes, rows, act, stride, out, os);
    }
}

}  // namespace

DotTileFn kquant_tile_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_K: return rows_by_nt<KQ4_K>;
        case TensorType::Q6_K: return rows_by_nt<KQ6_K>;
        default: return nullptr;
    }
}

VecDotFn vec_dot_fn(TensorType wtype) {
    switch (wtype) {
        case TensorType::Q4_0: return by_nt<KQ4_0>;
        case TensorType::Q8_0: return by_nt<KQ8_0>;
        case TensorType::Q4_1: return by_nt<KQ4_1>;
        case TensorType::Q5_0: return by_nt<KQ5_0>;
        case TensorType::Q5_1: return by_nt<KQ5_1>;
        case TensorType::Q4_K: return by_nt<KQ4_K>;
        case TensorType::Q6_K: return by_nt<KQ6_K>;
        case TensorType::F32: return by_nt<KF32>;
        case TensorType::F16: return by_nt<KF16>;
        case TensorType::BF16: return by_nt<KBF16>;
        default: return nullptr;
    }
}

}  // namespace sl::kernels::avx512
